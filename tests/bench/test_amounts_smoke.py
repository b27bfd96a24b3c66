"""Smoke test of bench/amounts.py: the RAND HIE sample of tests/data (no ../shared), one split, small forests, a
3000-row speed case; the report's numbers checked against the records they summarize."""

from pathlib import Path

import numpy as np
import pytest

from bench import amounts

DATA_DIR = Path(__file__).resolve().parents[2] / "tests" / "data"


@pytest.fixture(scope="module")
def report():
    cfg = {
        "splits": 1,
        "trees": 20,
        "depth": 3,
        "tables": ("rand_hie_amounts",),
        "max_rows": 800,
        "only": None,
        "speed_rows": 3000,
        "speed_trees": 10,
        "n_jobs": 1,
        "data_dir": DATA_DIR,
        "speed_table": "rand_hie_amounts",
    }
    return amounts.evaluate(cfg, log=lambda message: None)


def test_every_method_is_fitted_within_the_budget_on_both_tasks(report):
    records = report["records"]
    assert [r["task"] for r in records] == list(amounts.TASKS)
    for r in records:
        for method in amounts.METHODS:
            fit = r[method]
            assert fit["terms"] <= amounts.BUDGET and 0 <= fit["linear"] <= fit["terms"]
            assert fit["antecedents"] >= 0
        for method in (*amounts.METHODS, "forest"):
            assert np.isfinite(r[method]["deviance"]) and r[method]["deviance"] > 0
    gamma = records[1]
    assert gamma["rows"][0] < records[0]["rows"][0]  # Gamma: the positive rows only


def test_the_targets_are_medians_of_per_split_gains(report):
    for task, summary in report["quality"].items():
        (record,) = [r for r in report["records"] if r["task"] == task]
        for other, goal in amounts.TARGETS:
            target = summary["targets"][other]
            assert target["median"] == pytest.approx(1 - record["fire"]["deviance"] / record[other]["deviance"])
            assert target["goal"] == goal and target["met"] == (target["median"] >= goal)


def test_ours_and_glum_solve_the_same_l1_paths(report):
    assert [r["loss"] for r in report["speed"]] == ["tweedie", "gamma", "poisson"]
    for r in report["speed"]:
        assert r["speedup"] > 0 and len(r["steps"]) == amounts.SPEED_LAMBDAS
        assert r["worst_gap"] < 1e-3  # our objective is never visibly above glum's


def test_the_report_renders(report):
    report = dict(report, command="amounts", date="today", machine="here", solver_version="x")
    markdown = amounts.render(report)
    for heading in ("## Quality", "### Tweedie", "### Gamma", "## Speed: L1 paths against glum"):
        assert heading in markdown
