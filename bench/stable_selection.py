"""Step selections that weigh stability, on cross-validated fits (issue 39, item 3): do they make rules repeat?

A cross-validated fit (``PathSpec(cv_folds=5)``) already knows, at each step, how often each of its rules is chosen
by the folds' paths and how alike the folds' rule sets are (``RuleFit.fold_stability``). This bench asks whether a
selection that reads it gives rule sets that repeat on another sample more than the one-standard-error rule does,
and at what cost in test error. Protocol (bench/stability.py's): each table of ../shared/datasets (at most
``--max-rows`` rows drawn once with seed 0) is cut ``--reps`` times into two disjoint halves
(``solver.stability.half_sample_pairs``); on each half one cross-validated fit, ``fit_rules`` with ``cv_folds=5``,
``selection="1se"``, at most 14 terms, its forests within the half, seeded by the repetition; the selections below
each pick a step of that one fit, so every figure of a repetition comes from the same paths:

- ``1se``: the library's (the sparsest step within one standard error of the lowest cross-validated loss);
- ``lowest``: the lowest cross-validated loss;
- ``repeat50`` / ``repeat80``: the sparsest step within one standard error whose every term (rule or linear term)
  is held by at least 50% / 80% of the folds' paths at that step (the issue's example), else ``1se``'s;
- ``dice``: the step within one standard error whose folds' rule sets are most alike (highest mean Dice; the
  sparser on ties);
- ``holdout``: beside them, the library's default fit on the same half (a 20% holdout, lowest validation loss).

Per repetition and selection: the Dice index of the two halves' rule sets (rules keyed by column, direction,
missing flag where the column misses values and nearest decile cut of the table, linear terms by column:
``bench.stability.fire_rule_keys``), the same for rules alone, and the test error of each half's rules on the
other half (MSE of the standardized target, log loss), relative to ``1se``'s on the same fits.

    PYTHONPATH=. FIRE_NUM_THREADS=2 python bench/stable_selection.py [--reps 2] [--datasets ...] [--write]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from scipy.special import expit

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from bench.machine import cpu_model, solver_commit  # noqa: E402
from bench.stability import (  # noqa: E402
    BINARY_TABLES,
    BUDGET,
    DATA_DIR,
    REGRESSION_TABLES,
    RESULTS_DIR,
    fire_rule_keys,
    load_table,
    test_error,
)
from solver import PathSpec  # noqa: E402
from solver.fitting import fit_rules  # noqa: E402
from solver.spec import ForestSpec  # noqa: E402
from solver.stability import dice, half_sample_pairs, missing_features, reference_cuts  # noqa: E402

FOLDS = 5
SELECTIONS = ("1se", "lowest", "repeat50", "repeat80", "dice", "holdout")


def cross_validated_picks(fit) -> dict[str, int]:
    """The step each selection of a cross-validated fit picks (module docstring)."""
    steps, stability = fit.path.steps, fit.fold_stability
    eligible = [k for k, s in enumerate(steps) if s.n_terms <= BUDGET]
    lowest = min(eligible, key=lambda k: (steps[k].val_loss, k))
    threshold = steps[lowest].val_loss + (steps[lowest].val_loss_se or 0.0)
    within = [k for k in eligible if steps[k].val_loss <= threshold]

    def repeating(share):
        held = [k for k in within if len(stability.frequencies[k]) and np.all(stability.frequencies[k] >= share)]
        return min(held) if held else fit.selected

    return {
        "1se": fit.selected,
        "lowest": lowest,
        "repeat50": repeating(0.5),
        "repeat80": repeating(0.8),
        "dice": max(within, key=lambda k: (stability.dice[k], -k)),
    }


def fitted_rules(X, y, task, classes, encoding, seed) -> dict:
    """selection -> (the RuleEnsemble it picks on these rows, the step of the cross-validated path it is; None for
    the holdout fit's)."""
    loss = "squared" if task == "regression" else "logistic"
    spec = PathSpec(loss=loss, max_rules=BUDGET, random_state=seed)
    forest = ForestSpec(random_state=seed)
    cv = fit_rules(
        X, y, spec.replace(cv_folds=FOLDS, selection="1se"), forest=forest, encoding=encoding, classes=classes
    )
    picks = {name: (cv.rules_at(step), step) for name, step in cross_validated_picks(cv).items()}
    picks["holdout"] = (fit_rules(X, y, spec, forest=forest, encoding=encoding, classes=classes).rules, None)
    return picks


def run_table(name, reps, data_dir, max_rows, log) -> list[dict]:
    """Records of one table: one per repetition and selection."""
    X, y, task, classes, encoding = load_table(name, data_dir, max_rows)
    cuts, with_missing = reference_cuts(X), missing_features(X)
    records = []
    for rep, halves in enumerate(half_sample_pairs(len(y), reps, seed=0)):
        started = time.perf_counter()
        fits = [fitted_rules(X[h], y[h], task, classes, encoding, rep) for h in halves]
        for selection in SELECTIONS:
            pair = [fit[selection][0] for fit in fits]
            keys = [fire_rule_keys(rules, cuts, with_missing) for rules in pair]
            errors = []
            for rules, other in zip(pair, halves[::-1]):
                score = rules.predict(X[other])
                errors.append(test_error(task, y[other], score if task == "regression" else expit(score)))
            records.append(
                {
                    "table": name,
                    "task": task,
                    "rep": rep,
                    "selection": selection,
                    "dice": dice(set(keys[0]), set(keys[1])),
                    "dice_rules": dice(*(set(k[: len(r.rules)]) for k, r in zip(keys, pair))),
                    "errors": errors,
                    "terms": [len(k) for k in keys],
                    "rules": [len(r.rules) for r in pair],
                    "steps": [fit[selection][1] for fit in fits],
                }
            )
        log(f"{name} repetition {rep}: {time.perf_counter() - started:.0f} s")
    return records


def summarize(records: list[dict]) -> dict:
    """Per selection: median (and mean) Dice, Dice of rules, the median of per-fit test error ratios to ``1se``'s,
    the worst table's mean ratio, median terms and rules, and the share of fits whose pick differs from 1se's."""
    base = {(r["table"], r["rep"]): r for r in records if r["selection"] == "1se"}
    summary = {}
    for selection in SELECTIONS:
        rows = [r for r in records if r["selection"] == selection]
        ratios = [e / b for r in rows for e, b in zip(r["errors"], base[r["table"], r["rep"]]["errors"])]
        per_table: dict[str, list[float]] = {}
        for r in rows:
            pairs = zip(r["errors"], base[r["table"], r["rep"]]["errors"])
            per_table.setdefault(r["table"], []).extend(e / b for e, b in pairs)
        summary[selection] = {
            "dice": float(np.median([r["dice"] for r in rows])),
            "dice_mean": float(np.mean([r["dice"] for r in rows])),
            "dice_rules": float(np.median([r["dice_rules"] for r in rows])),
            "dice_rules_mean": float(np.mean([r["dice_rules"] for r in rows])),
            "error_vs_1se": float(np.median(ratios)),
            "worst_table": float(max(np.mean(v) for v in per_table.values())),
            "terms": float(np.median([t for r in rows for t in r["terms"]])),
            "rules": float(np.median([t for r in rows for t in r["rules"]])),
            "differs": _other_steps(rows, base),
        }
    return summary


def _other_steps(rows: list[dict], base: dict) -> float | None:
    """The share of the halves' fits where a selection picks another step of the path than 1se (None: the holdout
    fit, a fit of its own)."""
    if None in rows[0]["steps"]:
        return None
    return float(np.mean([a != b for r in rows for a, b in zip(r["steps"], base[r["table"], r["rep"]]["steps"])]))


def _share(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.0f}%"


def render_markdown(report: dict) -> str:
    summary, config = report["summary"], report["config"]
    lines = [
        "# Step selections that weigh stability (issue 39, item 3)",
        "",
        f"Generated by `{report['command']}` ({report['seconds']:.0f} s, solver {report['solver']}, "
        f"{report['machine']}).",
        "",
        f"Tables: {', '.join(config['datasets'])}; at most {config['max_rows']} rows each; {config['reps']} "
        f'repetition(s) of two disjoint halves; on each half one fit with {FOLDS} folds (`selection="1se"`, at most '
        f"{BUDGET} terms) whose steps every selection below picks from, and the default holdout fit. The protocol: "
        "`bench/stable_selection.py`'s docstring.",
        "",
        "| selection | Dice (median / mean) | Dice of rules (median / mean) | test error / 1se's | worst table | terms "
        "| rules | picks another step than 1se |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, s in summary.items():
        lines.append(
            f"| {name} | {s['dice']:.3f} / {s['dice_mean']:.3f} | {s['dice_rules']:.3f} / {s['dice_rules_mean']:.3f} "
            f"| {s['error_vs_1se']:.3f} | {s['worst_table']:.3f} | {s['terms']:g} | {s['rules']:g} "
            f"| {_share(s['differs'])} |"
        )
    lines += [
        "",
        "'picks another step than 1se': the share of the halves' cross-validated fits where the selection takes "
        "another step of the path; the holdout fit is a fit of its own.",
        "",
    ]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="*", default=[*REGRESSION_TABLES, *BINARY_TABLES])
    parser.add_argument("--reps", type=int, default=2, help="repetitions of two disjoint halves")
    parser.add_argument("--max-rows", type=int, default=3000)
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR)
    parser.add_argument("--write", action="store_true", help="write bench/results/stable_selection.md")
    args = parser.parse_args()
    started = time.perf_counter()
    records = [r for name in args.datasets for r in run_table(name, args.reps, args.data_dir, args.max_rows, print)]
    report = {
        "config": {"datasets": args.datasets, "reps": args.reps, "max_rows": args.max_rows},
        "command": "PYTHONPATH=. FIRE_NUM_THREADS=2 python bench/stable_selection.py " + " ".join(sys.argv[1:]),
        "solver": solver_commit(),
        "machine": cpu_model(),
        "seconds": time.perf_counter() - started,
        "summary": summarize(records),
        "records": records,
    }
    markdown = render_markdown(report)
    print(markdown)
    if args.write:
        (RESULTS_DIR / "stable_selection.md").write_text(markdown)


if __name__ == "__main__":
    main()
