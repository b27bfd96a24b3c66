"""Smoke test of bench/quality.py: a tiny in-process evaluation (one small dataset, few trees), < 60 s."""

import importlib.util
import sys
from pathlib import Path

import pytest

from bench import quality_methods, quality_report

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA_DIR = REPO_ROOT / "tests" / "data"  # stock.csv.gz ships with the tests


def _load_quality():
    spec = importlib.util.spec_from_file_location("bench_quality", REPO_ROOT / "bench" / "quality.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_quality"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def tiny_report():
    quality = _load_quality()
    cfg = quality_methods.Config(
        datasets=("stock",),
        n_splits=1,
        n_trees=40,
        depths=(3, 5),
        rulefit_trees=20,
        rulefit_grid=(5, 14),
        sirus_trees=50,
        glrm_max_rows=150,
        investigate=True,
        investigate_splits=1,
        n_jobs=1,
        n_lambdas=30,
        data_dir=DATA_DIR,
    )
    return cfg, quality.evaluate(cfg, log=lambda msg: None)


def test_report_structure(tiny_report, tmp_path):
    _cfg, report = tiny_report
    summary = report["summary"]
    assert set(summary) >= {
        "datasets",
        "methods",
        "per_dataset",
        "decreases",
        "band",
        "near_forest",
        "sweep",
        "targets",
    }
    assert summary["datasets"] == ["stock"]
    for method in (
        *quality_methods.MAIN_METHODS,
        *quality_methods.BASELINES,
        "forest",
        *quality_methods.INVESTIGATE_METHODS,
    ):
        row = summary["per_dataset"]["stock"][method]
        assert row["test"] > 0
    for comp in ("l1", *quality_methods.BASELINES, "mcp", "forest"):
        assert -10 < summary["decreases"]["fire"][comp]["median"] < 1
    assert set(summary["targets"]) == {
        "vs_l1",
        "vs_rulefit",
        "vs_sirus",
        "vs_glrm",
        "vs_mcp",
        "fusion_antecedents",
        "near_forest",
    }
    assert all(isinstance(t["met"], bool) for t in summary["targets"].values())
    assert set(summary["sweep"]) == {"3", "5"}
    for name, depth in summary["sweep"].items():
        assert set(depth) == set(quality_methods.SWEEP_METHODS if name == "3" else quality_methods.DEEP_SWEEP_METHODS)
        for row in depth.values():
            assert set(row) == {str(b) for b in quality_methods.BUDGETS}

    markdown = quality_report.render_markdown(report)
    for heading in ("## Setup", "## Headline", "## Per dataset", "## Fusion vs MCP only", "## Rule-budget sweep"):
        assert heading in markdown
    assert "| FIRE defaults: median test-error decrease vs L1 path" in markdown
    table = quality_report.sweep_table(summary)
    assert table.splitlines()[0].split()[:2] == ["depth", "method"]

    plot = tmp_path / "sweep.png"
    quality_report.plot_sweep(summary, plot)
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_rule_budgets_respected(tiny_report):
    _cfg, report = tiny_report
    (record,) = report["records"]
    for depth, entry in record["depths"].items():
        for method, result in entry["methods"].items():
            for budget, chosen in result["budgets"].items():
                assert chosen["rules"] <= int(budget), (depth, method, budget, chosen)
                assert chosen["antecedents"] is not None and chosen["antecedents"] >= 0
    headline = record["depths"]["3"]["methods"]
    for method in ("fire", "mcp", "fire_readable", "l1"):
        assert headline[method]["budgets"][str(quality_methods.HEADLINE_BUDGET)]["rules"] < 15
    for baseline in quality_methods.BASELINES:
        assert record[baseline]["terms"] < 15 or record[baseline].get("over_budget")
