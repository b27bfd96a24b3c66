"""Smoke test of bench/stable_selection.py: one table of tests/data, one repetition of two halves, each half's
cross-validated fit read by every selection; the summary checked against the records it summarizes."""

from pathlib import Path

import numpy as np
import pytest

from bench import stable_selection
from bench.stability import BUDGET

DATA_DIR = Path(__file__).resolve().parents[2] / "tests" / "data"


@pytest.fixture(scope="module")
def records():
    return stable_selection.run_table("stock", reps=1, data_dir=DATA_DIR, max_rows=300, log=print)


def test_every_selection_picks_a_step_within_the_budget_on_both_halves(records):
    assert [r["selection"] for r in records] == list(stable_selection.SELECTIONS)
    by_name = {r["selection"]: r for r in records}
    for r in records:
        assert 0 <= r["dice"] <= 1 and 0 <= r["dice_rules"] <= 1
        assert len(r["errors"]) == 2 and all(0 < e < 10 for e in r["errors"])
        assert all(rules <= terms <= BUDGET for rules, terms in zip(r["rules"], r["terms"]))
    assert by_name["holdout"]["steps"] == [None, None]
    # the lowest cross-validated loss is never a sparser step than the one-standard-error rule's
    assert all(low >= one for low, one in zip(by_name["lowest"]["steps"], by_name["1se"]["steps"]))


def test_the_summary_is_the_median_of_per_fit_ratios_to_1se(records):
    summary = stable_selection.summarize(records)
    base = next(r for r in records if r["selection"] == "1se")
    assert summary["1se"]["error_vs_1se"] == 1.0 and summary["1se"]["differs"] == 0.0
    lowest = next(r for r in records if r["selection"] == "lowest")
    ratios = [e / b for e, b in zip(lowest["errors"], base["errors"])]
    assert summary["lowest"]["error_vs_1se"] == pytest.approx(np.median(ratios))
    assert summary["lowest"]["differs"] == np.mean([a != b for a, b in zip(lowest["steps"], base["steps"])])
    assert summary["holdout"]["differs"] is None
    assert "| holdout |" in stable_selection.render_markdown(
        {
            "summary": summary,
            "config": {"datasets": ["stock"], "reps": 1, "max_rows": 300},
            "command": "c",
            "seconds": 1.0,
            "solver": "s",
            "machine": "m",
        }
    )
