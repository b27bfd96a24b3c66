"""Smoke test of bench/stability.py: one regression and one binary table of tests/data, one repetition, small
forests; the report's numbers checked against the records they summarize."""

from pathlib import Path

import numpy as np
import pytest
from sirus import Condition, Rule

from bench import stability

DATA_DIR = Path(__file__).resolve().parents[2] / "tests" / "data"


@pytest.fixture(scope="module")
def report():
    return stability.evaluate(
        ("stock", "credit_data"), ["bins10"], reps=1, data_dir=DATA_DIR, max_rows=300, sirus_trees=50, log=print
    )


def test_every_method_is_fitted_on_both_halves_of_every_table(report):
    records = report["records"]
    assert {(r["table"], r["task"]) for r in records} == {("stock", "regression"), ("credit_data", "binary")}
    assert {r["method"] for r in records} == {"sirus", "fire", "bins10"}
    for r in records:
        assert 0 <= r["dice"] <= 1 and 0 <= r["dice_rules"] <= 1
        assert len(r["errors"]) == 2 and all(0 < e < 10 for e in r["errors"])
        assert all(t <= stability.BUDGET for t in r["terms"])
        assert all(a >= t - lin for a, t, lin in zip(r["antecedents"], r["terms"], r["linear"]))


def test_the_summary_is_the_median_of_per_fit_ratios(report):
    summary, records = report["summary"], report["records"]
    fire = {(r["table"], r["rep"]): r["errors"] for r in records if r["method"] == "fire"}
    binned = [r for r in records if r["method"] == "bins10"]
    ratios = [e / f for r in binned for e, f in zip(r["errors"], fire[r["table"], r["rep"]])]
    overall = summary["overall"]
    assert overall["bins10"]["error_vs_fire"] == pytest.approx(np.median(ratios))
    assert overall["fire"]["error_vs_fire"] == 1.0 and overall["sirus"]["error_vs_sirus"] == 1.0
    dice = [r["dice"] for r in binned]
    assert overall["bins10"]["dice"] == pytest.approx(np.median(dice))
    assert set(summary["per_task"]) == {"regression", "binary"}
    assert summary["best"] == "bins10"


def test_sirus_conditions_read_as_fire_s_sides_of_the_nearest_cut():
    cuts = [np.array([1.0, 2.0, 3.0]), np.array([0.0, 1.0])]
    rule = Rule([Condition(0, "a", "<", 2.1), Condition(1, "b", ">=", 1.0)], 0.5, 1.0, 0.0, 10, 10)
    (key,) = stability.sirus_rule_keys([rule], cuts)
    assert key == frozenset({(0, "<=", None, 1), (1, ">", None, 1)})


def test_the_report_renders(report, tmp_path):
    markdown = stability.write_report(report, tmp_path).read_text()
    for heading in ("## Setup", "## Headline (all tables)", "## Trade-off", "## Per table"):
        assert heading in markdown
    assert (tmp_path / "stability.json").exists()


def test_stability_selection_keeps_the_most_frequent_terms_of_its_fits_and_refits_them(monkeypatch):
    monkeypatch.setattr(stability, "STABILITY_PAIRS", 1)  # two fits: each half of one split
    X, y, task, classes, encoding = stability.load_table("stock", DATA_DIR, max_rows=300)
    cuts, with_missing = stability.reference_cuts(X), stability.missing_features(X)
    selected = stability.fit_stability_selected("stabsel", X, y, task, classes, encoding, 0, cuts, with_missing)
    fits = [
        stability.fire_rules("fire", X[h], y[h], task, classes, encoding, 0)
        for h in stability.half_sample_pairs(len(y), 1, 0)[0]
    ]
    keys = [set(stability.fire_rule_keys(f, cuts, with_missing)) for f in fits]
    assert selected["terms"] == int(np.median([len(k) for k in keys]))
    assert keys[0] & keys[1] <= selected["keys"] <= keys[0] | keys[1]  # terms of both fits first
    residual = y - selected["predict"](X)
    assert abs(residual.mean()) < 1e-8  # least squares with an intercept
