"""Smoke test of bench/survival.py: scikit-survival's veterans table (no ../shared), one split, small forests, a
3000-row speed case; the report's numbers checked against the records they summarize."""

import numpy as np
import pytest

from bench import survival


@pytest.fixture(scope="module")
def report():
    cfg = {
        "splits": 1,
        "trees": 20,
        "depth": 3,
        "tables": ("veterans_lung_cancer",),
        "only": None,
        "speed_rows": 3000,
        "speed_trees": 10,
        "n_jobs": 1,
        "data_dir": None,
    }
    return survival.evaluate(cfg, log=lambda message: None)


def test_every_model_is_fitted_within_the_budget(report):
    (record,) = report["records"]
    assert set(record["martingale"]) == {"forest", *survival.FIRE_METHODS}
    assert set(record["rsf"]) == {"forest", "fire", "l1"}
    for forest, method, result in survival.models_of(record):
        assert 0 <= result["cindex"] <= 1, (forest, method)
        if method != "forest":
            assert result["terms"] <= survival.BUDGET and result["antecedents"] >= 0
            assert np.isfinite(result["deviance"]) and result["deviance"] > 0


def test_the_targets_read_the_martingale_forests_fire(report):
    (record,) = report["records"]
    fire = record["martingale"]["fire"]
    (deviance, cindex, median_cindex, with_rule, forest) = report["quality"]["targets"]
    gain = 1 - fire["deviance"] / record["martingale"]["l1"]["deviance"]
    assert deviance[1] == f"{100 * gain:.1f}% lower" and deviance[3] == (gain >= 0.10)
    assert cindex[3] == (fire["cindex"] > record["coxnet"]["cindex"])
    assert median_cindex[1] == f"{fire['cindex']:.3f} vs {record['coxnet']['cindex']:.3f}"  # one split: its figures
    assert median_cindex[3] == (fire["cindex"] >= record["coxnet"]["cindex"])
    assert with_rule[1] == f"{int(fire['terms'] > fire['linear'])} of 1"
    assert forest[3] == (record["rsf"]["forest"]["cindex"] - fire["cindex"] <= 0.02)


def test_ours_and_coxnet_solve_the_same_l1_path(report):
    speed = report["speed"]
    assert speed["speedup"] > 0 and len(speed["steps"]) == survival.SPEED_LAMBDAS
    assert speed["worst_gap"] < 1e-3  # our objective is never visibly above Coxnet's


def test_the_report_renders(report):
    report = dict(report, command="survival", date="today", machine="here", solver_version="x")
    markdown = survival.render(report)
    for heading in ("## Quality", "## Speed: the L1-Cox path against Coxnet", "| target |"):
        assert heading in markdown
