"""Smoke test of bench/ebm.py: one regression and one binary table of tests/data, one split, a small EBM (2 outer
bags, 300 rounds); the numbers read and the summary checked against what they count and summarize."""

from pathlib import Path

import numpy as np
import pytest

from bench import ebm

DATA_DIR = Path(__file__).resolve().parents[2] / "tests" / "data"


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    settings = dict(ebm.EBM_SETTINGS)
    ebm.EBM_SETTINGS.update(outer_bags=2, max_rounds=300)
    try:
        return ebm.evaluate(("stock", "credit_data"), 1, DATA_DIR, 300, tmp_path_factory.mktemp("ebm"), log=print)
    finally:
        ebm.EBM_SETTINGS.clear()
        ebm.EBM_SETTINGS.update(settings)


def test_every_method_is_fitted_and_scored_on_every_table(report):
    records = report["records"]
    assert {(r["table"], r["task"]) for r in records} == {("stock", "regression"), ("credit_data", "binary")}
    for table in ("stock", "credit_data"):
        fits = {r["method"]: r for r in records if r["table"] == table}
        assert set(fits) == set(ebm.METHODS)
        assert all(0 < r["error"] < 2 for r in fits.values())  # standardized MSE, log loss: below the mean's
        assert fits["fire14"]["terms"] <= 14 and fits["fire30"]["terms"] <= 30 and fits["fire_gb30"]["terms"] <= 30
        assert fits["ebm_gam"]["terms"] == len(ebm.load_table(table, DATA_DIR, 300)["features"].columns)
        assert fits["ebm_top14"]["terms"] == min(14, fits["ebm"]["terms"])


def test_the_summary_is_the_median_of_per_split_ratios(report):
    records, summary = report["records"], report["summary"]
    error = {(r["table"], r["method"]): r["error"] for r in records}
    stock = summary["per_table"]["stock"]["ratios"]["fire14/ebm_gam"]
    assert stock["error"] == pytest.approx(error["stock", "fire14"] / error["stock", "ebm_gam"])
    (regression,) = [t for t in summary["targets"] if t["task"] == "regression" and t["fire"] == "fire14"]
    assert regression["error_ratio"] == stock["error"] and regression["met"] == (stock["error"] <= 1.0)
    assert set(summary["per_task"]) == {"regression", "binary"}


def test_the_numbers_read_count_every_threshold_weight_bin_and_intercept():
    table = ebm.load_table("stock", DATA_DIR, 300)
    train, val, _ = ebm.split_rows(len(table["y"]), 0)
    rows = np.concatenate([train, val])
    ebm.EBM_SETTINGS.update(outer_bags=2, max_rounds=100)
    try:
        model = ebm._ebm("regression", 0, interactions=[(0, 1)]).fit(table["features"].iloc[rows], table["y"][rows])
    finally:
        for key in ("outer_bags", "max_rounds"):
            ebm.EBM_SETTINGS.pop(key)
    n_features = len(table["features"].columns)
    # a main's scores: its bins (cuts + 1) plus the missing and unknown bins; the pair: a table of both features'
    # coarser interaction bins (bins_[i][-1], at most max_interaction_bins), each with those two
    mains = [len(model.bins_[i][0]) + 3 for i in range(n_features)]
    pair = [len(model.bins_[i][-1]) + 3 for i in (0, 1)]
    assert pair[0] < mains[0]  # the pair's table is on its own bins
    assert ebm.ebm_numbers(model) == sum(mains) + pair[0] * pair[1] + 1
    _, rules, X_train = ebm.fit_fire("fire14", table, train, val, 0)
    document = rules.to_dict()  # the fire-rules document: what a person reads
    assert rules.rules and rules.linear  # both kinds of term are counted here
    missing = np.isnan(X_train).any(axis=0)
    read = (
        sum(len(rule["conditions"]) + 1 for rule in document["rules"])  # a threshold each, the contribution
        + sum(3 + missing[term["feature_index"]] for term in document.get("linear", []))  # coefficient, bounds, fill
        + 1  # the intercept
    )
    assert ebm.fire_numbers(rules, X_train) == read
