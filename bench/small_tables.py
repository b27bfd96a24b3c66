"""Choosing the step on a small table: the default holdout against K-fold cross-validation (issue 39, item 6).

A default fit holds 20% of its rows out to choose the step: 60 rows of a 300-row table. glmnet cross-validates by
default. This bench measures what folds buy, and cost, by the size of the table, to choose the size below which
``cv_folds`` would be worth its price by default.

Protocol: each shared regression and binary table (bench/stability.py's ``load_table``: text columns encoded, y
standardised on the whole table for regression) is sampled ``--reps`` times at each size of ``--sizes`` rows
(seeded by the repetition); the rows outside the sample, at most ``--test-rows`` of them, are its test rows. On the
sample, FIRE's defaults at fewer than 15 terms (``PathSpec(max_rules=14)``, ``ForestSpec()``, seeded by the
repetition) through
``solver.fitting.fit_rules``:

- ``holdout``: the default, the step by the validation loss on a 20% holdout;
- ``cv5``: ``cv_folds=5``, the step by the folds' mean validation loss;
- ``cv5_1se``: the same fit, the step by glmnet's one-standard-error rule (``solver.path.best_step``).

Per method: the test error (MSE of the standardised y; log loss for binary tables, the probability clipped at
1e-15), terms, rules with a condition, and the fit's seconds (cv5_1se shares cv5's fit and time). Reported per size:
the median over tables and repetitions of each method's test error over the holdout's on the same sample, how
often it is lower, the median time ratio, and the median terms and rules.

    PYTHONPATH=. FIRE_NUM_THREADS=1 python bench/small_tables.py [--sizes 300 1000 3000] [--reps 3]
        [--tables ...] [--out bench/results/small_tables.md]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from scipy.special import expit

REPO_ROOT = Path(__file__).resolve().parents[1]
# bench/ holds a solver.py (the speed benchmark): make sure "solver" is the package, not that script
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != REPO_ROOT / "bench"]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.machine import cpu_model, solver_commit  # noqa: E402
from bench.stability import BINARY_TABLES, BUDGET, REGRESSION_TABLES, load_table, test_error  # noqa: E402
from solver import ForestSpec, PathSpec  # noqa: E402
from solver.fitting import fit_rules  # noqa: E402
from solver.path import best_step  # noqa: E402

METHODS = ("holdout", "cv5", "cv5_1se")
FOLDS = 5


def summary(rules, task, X_test, y_test) -> dict:
    """Test error, terms and rules with a condition of one rule ensemble."""
    score = rules.predict(X_test)
    prediction = score if task == "regression" else expit(score)
    return {
        "error": test_error(task, y_test, prediction),
        "terms": len(rules.rules) + len(rules.linear),
        "rules": sum(1 for rule in rules.rules if rule.conditions),
    }


def run_sample(X, y, task, classes, encoding, sample, test, seed) -> dict:
    """The three methods on one sample: {method: {error, terms, rules, seconds}}."""
    loss = "squared" if task == "regression" else "logistic"
    forest = ForestSpec(random_state=seed)
    results = {}
    for method, folds in (("holdout", None), ("cv5", FOLDS)):
        spec = PathSpec(loss=loss, max_rules=BUDGET, random_state=seed, cv_folds=folds)
        start = time.perf_counter()
        fit = fit_rules(X[sample], y[sample], spec, forest=forest, encoding=encoding, classes=classes)
        seconds = time.perf_counter() - start
        results[method] = {**summary(fit.rules, task, X[test], y[test]), "seconds": seconds}
        if folds:
            step = best_step(fit.path.steps, spec.max_rules, "1se")
            results["cv5_1se"] = {**summary(fit.rules_at(step), task, X[test], y[test]), "seconds": seconds}
    return results


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[300, 1000, 3000])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--test-rows", type=int, default=5000)
    parser.add_argument("--tables", nargs="+", default=list(REGRESSION_TABLES + BINARY_TABLES))
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "bench" / "results" / "small_tables.md")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    records = []
    for name in args.tables:
        X, y, task, classes, encoding = load_table(name)
        for size in args.sizes:
            if size + 500 > len(y):  # too few rows left to test on
                continue
            for rep in range(args.reps):
                order = np.random.default_rng(rep).permutation(len(y))
                sample, test = np.sort(order[:size]), np.sort(order[size : size + args.test_rows])
                results = run_sample(X, y, task, classes, encoding, sample, test, rep)
                records.append({"table": name, "task": task, "size": size, "rep": rep, **results})
                shown = [f"{m}: {r['error']:.4f} ({r['terms']} terms, {r['seconds']:.1f}s)" for m, r in results.items()]
                print(name, size, rep, "  ".join(shown), flush=True)
    args.out.with_suffix(".json").write_text(json.dumps(records, indent=1))
    args.out.write_text(report(records, args, time.perf_counter() - started))
    print(args.out.read_text())


def report(records: list[dict], args, seconds: float) -> str:
    lines = [
        "# Choosing the step on a small table: holdout against 5-fold cross-validation (bench/small_tables.py)",
        "",
        f"`python bench/small_tables.py --sizes {' '.join(map(str, args.sizes))} --reps {args.reps}`: "
        f"{cpu_model()}, solver commit {solver_commit()}, {seconds:.0f} s; tables {', '.join(args.tables)}.",
        "Error ratio: a method's test error over the holdout's on the same sample (median over tables x "
        "repetitions); lower: how often it is below the holdout's; terms and rules: medians.",
        "",
        "| rows | samples | method | error ratio | lower | time ratio | terms | rules with a condition |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for size in args.sizes:
        at_size = [r for r in records if r["size"] == size]
        if not at_size:
            continue
        for method in METHODS:
            ratios = [r[method]["error"] / r["holdout"]["error"] for r in at_size]
            times = [r[method]["seconds"] / r["holdout"]["seconds"] for r in at_size]
            lines.append(
                f"| {size} | {len(at_size)} | {method} | {statistics.median(ratios):.3f} | "
                f"{sum(x < 1 for x in ratios)}/{len(ratios)} | {statistics.median(times):.2f} | "
                f"{statistics.median(r[method]['terms'] for r in at_size):g} | "
                f"{statistics.median(r[method]['rules'] for r in at_size):g} |"
            )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
