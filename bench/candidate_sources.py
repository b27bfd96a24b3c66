"""Candidate sources and penalties beside FIRE's defaults (issue 39, item 1): do steps at every bin of every column,
a column's bins as a fused shape, gradient-boosted trees or another penalty bring FIRE at <= 14 terms nearer the EBM?

Protocol: bench/ebm.py's (its tables, rows, split 0 and test error), so that each variant's error is side by side
with the defaults' of the same run and, per table, with the EBM's of the committed ``bench/results/ebm.json`` (same
rows and split: the EBM takes minutes a fit and is not refitted here). Every variant is ``fit_rules`` at <= 14 terms
on the split's train rows, its step by the validation rows, scored on the test rows:

- ``defaults``: ``PathSpec(max_rules=14)``, ``ForestSpec()`` (500 random trees of depth 3, leaves, linear terms);
- ``steps``: the defaults' forest plus, for every column, one stump at each of its decile cuts on the train rows
  (``solver.binning.quantile_cuts``), a rule ``x > cut`` or ``x <= cut`` each: one-condition steps at every bin;
- ``shapes``: the defaults' forest plus, for every column, one tree whose leaves are its 32-quantile bins left to
  right, so that fusion between a column's neighbouring bins draws its shape in a few jumps (a bin is a rule of at
  most two conditions);
- ``gb_nodes3``: 500 gradient-boosted trees of depth 4, rules from every node of at most three conditions;
- ``l1``, ``gamma3``, ``no_polish``: the defaults with ``penalty="l1"``, ``gamma=3`` or ``polish=False``.

Reported: per variant and task the median over tables of test error / the defaults' and / the EBM's (regression:
the EBM without interactions, issue 39's target; binary: the EBM with its defaults), and the median terms.

    PYTHONPATH=. FIRE_NUM_THREADS=1 python bench/candidate_sources.py [--datasets ...] [--write]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from scipy.special import expit

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from bench.ebm import LOSSES, RESULTS_DIR, load_table, split_rows, test_error  # noqa: E402
from bench.machine import cpu_model, solver_commit  # noqa: E402
from bench.stability import BINARY_TABLES, REGRESSION_TABLES  # noqa: E402
from solver import PathSpec, Tree, TreeEnsemble  # noqa: E402
from solver.binning import quantile_cuts  # noqa: E402
from solver.fitting import fit_rules, train_forest  # noqa: E402
from solver.spec import ForestSpec  # noqa: E402

BUDGET = 14
SPLIT = 0
MAX_ROWS = 4000  # bench/results/ebm.json's rows
EBM_OF_TASK = {"regression": "ebm_gam", "binary": "ebm"}
# name -> (PathSpec settings, ForestSpec settings, trees added to the forest: (kind, bins) or None)
VARIANTS = {
    "defaults": ({}, {}, None),
    "steps": ({}, {}, ("steps", 10)),
    "shapes": ({}, {}, ("shapes", 32)),
    "gb_nodes3": ({"candidates": "nodes", "max_rule_length": 3}, {"kind": "gradient_boosting", "max_depth": 4}, None),
    "l1": ({"penalty": "l1"}, {}, None),
    "gamma3": ({"gamma": 3.0}, {}, None),
    "no_polish": ({"polish": False}, {}, None),
}


def stump(feature: int, cut: float) -> Tree:
    """A tree of one split, ``x[feature] <= cut``, whose two leaves are the rules of either side (value 1)."""
    return Tree(
        children_left=np.array([1, -1, -1]),
        children_right=np.array([2, -1, -1]),
        feature=np.array([feature, -2, -2]),
        threshold=np.array([cut, -2.0, -2.0]),
        value=np.array([0.0, 1.0, 1.0]),
    )


def shape_tree(feature: int, cuts: np.ndarray) -> Tree:
    """A balanced tree whose leaves, left to right, are the bins between ``cuts`` of one column (value 1)."""
    left: list[int] = []
    right: list[int] = []
    features: list[int] = []
    thresholds: list[float] = []

    def grow(first: int, last: int) -> int:  # the bins first..last, the cuts between them cuts[first:last]
        node = len(left)
        for column, blank in ((left, -1), (right, -1), (features, -2), (thresholds, -2.0)):
            column.append(blank)
        if first < last:
            middle = (first + last) // 2
            features[node], thresholds[node] = feature, float(cuts[middle])
            left[node] = grow(first, middle)
            right[node] = grow(middle + 1, last)
        return node

    grow(0, len(cuts))
    values = np.where(np.array(left) < 0, 1.0, 0.0)
    return Tree(np.array(left), np.array(right), np.array(features), np.array(thresholds), values)


def with_column_trees(forest: TreeEnsemble, X_train: np.ndarray, kind: str, bins: int) -> TreeEnsemble:
    """``forest`` and, per column, ``kind``'s trees at its ``bins``-quantile cuts of the train rows (a cut at the
    column's largest value splits nothing and is left out)."""
    trees = list(forest.trees)
    for feature, cuts in enumerate(quantile_cuts(X_train, bins)):
        cuts = cuts[cuts < np.nanmax(X_train[:, feature])] if len(cuts) else cuts
        if len(cuts):
            trees += [stump(feature, c) for c in cuts] if kind == "steps" else [shape_tree(feature, cuts)]
    return TreeEnsemble(trees, forest.n_features, forest.feature_names, kind="custom", max_nodes=None)


def fit_variant(name: str, table: dict) -> dict:
    """One fit of a variant on split SPLIT: its test error, terms and seconds."""
    path_settings, forest_settings, added = VARIANTS[name]
    task, X, y = table["task"], table["X"], table["y"]
    train, val, test = split_rows(len(y), SPLIT)
    rows = np.concatenate([train, val])
    spec = PathSpec(loss=LOSSES[task], max_rules=BUDGET, random_state=SPLIT).replace(**path_settings)
    forest_spec = ForestSpec(random_state=SPLIT).replace(**forest_settings)
    if forest_spec.kind == "gradient_boosting" and np.isnan(X).any():  # its trees take no missing value
        X = np.where(np.isnan(X), np.nan_to_num(np.nanmedian(X[train], axis=0)), X)
    started = time.perf_counter()
    forest: ForestSpec | TreeEnsemble = forest_spec
    if added is not None:
        names = table["encoding"].feature_names
        _, trained = train_forest(forest_spec, X[train], y[train], feature_names=names, loss=spec.loss)
        forest = with_column_trees(trained, X[train], *added)
    local = (np.arange(len(train)), np.arange(len(train), len(rows)))
    encoding, classes = table["encoding"], table["classes"]
    fit = fit_rules(X[rows], y[rows], spec, forest=forest, rows=local, encoding=encoding, classes=classes)
    rules = fit.rules
    score = rules.predict(X[test])
    return {
        "error": test_error(task, y[test], expit(score) if task == "binary" else score),
        "terms": len(rules.rules) + len(rules.linear),
        "seconds": time.perf_counter() - started,
    }


def summarize(records: list[dict], ebm: dict) -> dict:
    """Per task and variant: medians over tables of the error ratios to the defaults and to the EBM, and terms."""
    defaults = {r["table"]: r["error"] for r in records if r["variant"] == "defaults"}
    summary: dict = {}
    for task in ("regression", "binary"):
        for name in VARIANTS:
            rows = [r for r in records if r["task"] == task and r["variant"] == name]
            if rows:
                summary.setdefault(task, {})[name] = {
                    "vs_defaults": float(np.median([r["error"] / defaults[r["table"]] for r in rows])),
                    "vs_ebm": float(np.median([r["error"] / ebm[r["table"], EBM_OF_TASK[task]] for r in rows])),
                    "terms": float(np.median([r["terms"] for r in rows])),
                    "better_than_defaults": sum(r["error"] < defaults[r["table"]] for r in rows),
                    "tables": len(rows),
                }
    return summary


def render_markdown(report: dict) -> str:
    lines = [
        "# Candidate sources and penalties beside FIRE's defaults (issue 39, item 1)",
        "",
        f"Generated by `{report['command']}` ({report['seconds']:.0f} s, solver {report['solver']}, "
        f"{report['machine']}, one thread). Split {SPLIT} of bench/ebm.py's protocol on at most {MAX_ROWS} rows; "
        "every variant at most 14 terms; the EBM's errors from the committed bench/results/ebm.json (same rows and "
        "split). The variants: `bench/candidate_sources.py`'s docstring.",
        "",
    ]
    for task, variants in report["summary"].items():
        ebm = "the EBM without interactions" if task == "regression" else "the EBM with its defaults"
        lines += [
            f"## {task.capitalize()} ({variants['defaults']['tables']} tables; EBM: {ebm}), medians over tables",
            "",
            "| variant | error / defaults' | better than the defaults | error / EBM's | terms |",
            "|---|---|---|---|---|",
        ]
        for name, s in variants.items():
            lines.append(
                f"| {name} | {s['vs_defaults']:.3f} | {s['better_than_defaults']} of {s['tables']} | "
                f"{s['vs_ebm']:.3f} | {s['terms']:g} |"
            )
        lines.append("")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="*", default=[*REGRESSION_TABLES, *BINARY_TABLES])
    parser.add_argument("--write", action="store_true", help="write bench/results/candidate_sources.md")
    args = parser.parse_args()
    stored = json.loads((RESULTS_DIR / "ebm.json").read_text())
    ebm = {(r["table"], r["method"]): r["error"] for r in stored["records"] if r["split"] == SPLIT}
    started = time.perf_counter()
    records = []
    for name in args.datasets:
        table = load_table(name, max_rows=MAX_ROWS)
        for variant in VARIANTS:
            records.append({"table": name, "task": table["task"], "variant": variant, **fit_variant(variant, table)})
        print(name, " ".join(f"{r['variant']} {r['error']:.4f}" for r in records if r["table"] == name), flush=True)
    report = {
        "command": "PYTHONPATH=. FIRE_NUM_THREADS=1 python bench/candidate_sources.py " + " ".join(sys.argv[1:]),
        "solver": solver_commit(),
        "machine": cpu_model(),
        "seconds": time.perf_counter() - started,
        "summary": summarize(records, ebm),
    }
    markdown = render_markdown(report)
    print(markdown)
    if args.write:
        (RESULTS_DIR / "candidate_sources.md").write_text(markdown)


if __name__ == "__main__":
    main()
