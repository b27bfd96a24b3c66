"""Near-identical rules (issue 39, item 2): is there anything to merge or fuse?

A rule is its conditions, each binned as ``solver.stability`` bins it for the Dice index: column, direction, the
missing flag where the column has missing values, the nearest decile cut of the column on the whole table
(``rule_keys``). Two rules are **near-identical** when they have the same columns, directions and flags and each
condition's decile cut is at most one cut away from the other's (``x > 5.1`` and ``x > 5.3`` where no more than
one decile cut lies between them); **identical** when every cut is the same.

Protocol (bench/stability.py's): each table (at most ``--max-rows`` rows, drawn once with seed 0) is cut ``--reps``
times into two disjoint halves; on each half a FIRE setting (``bench.stability.VARIANTS``) is fitted with at most
14 terms on the half's rows alone. Per fit and per pair of halves:

- ``within``: pairs of a fit's own rules that are identical or near-identical: what merging (or fusing) one fit's
  near-identical rules could remove;
- ``dice_rules``: the two halves' Dice index on rules alone with keys compared exactly (bench/stability.py's
  measure), and ``dice_rules_near`` with near-identical keys counted as one: the most that merging near-identical
  rules across samples (a rule one cut from the other half's counted as the same) could add to the rules' Dice.

    PYTHONPATH=. FIRE_NUM_THREADS=1 python bench/near_identical_rules.py [--datasets ...] [--reps 3]
        [--variants fire bins10] [--max-rows 4000] [--out-dir bench/results]

writes bench/results/near_identical_rules.json and .md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from itertools import combinations
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
# bench/ holds a solver.py (the speed benchmark): make sure "solver" is the package, not that script
sys.path.insert(0, str(REPO_ROOT))

from bench.machine import cpu_model, solver_commit  # noqa: E402
from bench.stability import (  # noqa: E402
    BINARY_TABLES,
    DATA_DIR,
    REGRESSION_TABLES,
    RESULTS_DIR,
    VARIANTS,
    fire_rules,
    load_table,
)
from solver.stability import dice, half_sample_pairs, missing_features, reference_cuts, rule_keys  # noqa: E402

NEAR_CUTS = 1  # "one bin apart on one condition": decile cuts at most this far apart


def _by_condition(key) -> dict:
    """A rule key as {(column, direction, missing flag): decile cut}; a reduced rule has one bound per pair."""
    return {(feature, operator, missing): cut for feature, operator, missing, cut in key}


def near_identical(a, b) -> bool:
    """Whether two rule keys have the same columns, directions and flags, every cut at most ``NEAR_CUTS`` apart."""
    first, second = _by_condition(a), _by_condition(b)
    return first.keys() == second.keys() and all(abs(first[c] - second[c]) <= NEAR_CUTS for c in first)


def near_dice(a: list, b: list) -> float:
    """Dice index of two rule sets where a rule counts as shared when the other set holds a near-identical one."""
    a, b = list(dict.fromkeys(a)), list(dict.fromkeys(b))  # sets, as the exact index takes them
    if not a and not b:
        return 1.0
    shared = sum(any(near_identical(x, y) for y in b) for x in a) + sum(any(near_identical(y, x) for x in a) for y in b)
    return shared / (len(a) + len(b))


def run_table(name, variants, reps, data_dir, max_rows, log=print) -> list[dict]:
    """One record per repetition and variant."""
    X, y, task, classes, encoding = load_table(name, data_dir, max_rows)
    cuts, with_missing = reference_cuts(X), missing_features(X)
    records = []
    for rep, halves in enumerate(half_sample_pairs(len(y), reps, seed=0)):
        for variant in variants:
            keys = []
            for half in halves:
                rules = fire_rules(variant, X[half], y[half], task, classes, encoding, rep)
                keys.append(rule_keys(rules, cuts, with_missing)[: len(rules.rules)])
            pairs = [list(combinations(k, 2)) for k in keys]
            records.append(
                {"table": name, "task": task, "rep": rep, "variant": variant, "rules": [len(k) for k in keys],
                 "within_identical": [sum(a == b for a, b in p) for p in pairs],
                 "within_near": [sum(near_identical(a, b) for a, b in p) for p in pairs],
                 "dice_rules": dice(*map(set, keys)), "dice_rules_near": near_dice(*keys)}
            )  # fmt: skip
        log(
            f"{name} rep {rep}: "
            + ", ".join(
                f"{r['variant']} rules {r['rules']} within near {r['within_near']} dice {r['dice_rules']:.2f} -> "
                f"{r['dice_rules_near']:.2f}"
                for r in records
                if r["rep"] == rep
            )
        )
    return records


def summarize(records: list[dict]) -> dict:
    """Per variant: fits, rules, near-identical pairs within fits (and the fits holding any), the median over
    tables of each table's mean rules' Dice, exact and near."""
    summary = {}
    for variant in dict.fromkeys(r["variant"] for r in records):
        mine = [r for r in records if r["variant"] == variant]
        tables = dict.fromkeys(r["table"] for r in mine)

        def table_median(key, mine=mine, tables=tables):
            return float(np.median([np.mean([r[key] for r in mine if r["table"] == t]) for t in tables]))

        summary[variant] = {
            "fits": 2 * len(mine),
            "rules": sum(sum(r["rules"]) for r in mine),
            "within_identical": sum(sum(r["within_identical"]) for r in mine),
            "within_near": sum(sum(r["within_near"]) for r in mine),
            "fits_with_near": sum(n > 0 for r in mine for n in r["within_near"]),
            "dice_rules": table_median("dice_rules"),
            "dice_rules_near": table_median("dice_rules_near"),
        }
    return summary


def render_markdown(report: dict) -> str:
    lines = [
        "# Near-identical rules (issue 39, item 2)",
        "",
        f"Generated by `{report['command']}` ({report['seconds']:.0f} s, solver {report['solver']}, "
        f"{report['machine']}). Tables: {', '.join(report['config']['datasets'])}; at most "
        f"{report['config']['max_rows']} rows each; {report['config']['reps']} repetition(s) of two disjoint halves, "
        "a fit of at most 14 terms on each. The protocol and the definitions: `bench/near_identical_rules.py`'s "
        "docstring.",
        "",
        "| setting | fits | rules | identical pairs within a fit | near-identical pairs within a fit | fits with "
        "any | rules' Dice, exact | rules' Dice, near counted as one |",
        "|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {variant} | {s['fits']} | {s['rules']} | {s['within_identical']} | {s['within_near']} | "
        f"{s['fits_with_near']} | {s['dice_rules']:.3f} | {s['dice_rules_near']:.3f} |"
        for variant, s in report["summary"].items()
    ]
    lines += ["", "Dice: the median across tables of each table's mean over repetitions.", ""]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="*", default=[*REGRESSION_TABLES, *BINARY_TABLES])
    parser.add_argument("--reps", type=int, default=3, help="splits into two disjoint halves per table")
    parser.add_argument("--variants", nargs="*", default=["fire", "bins10"], choices=list(VARIANTS))
    parser.add_argument("--max-rows", type=int, default=4000)
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR)
    parser.add_argument("--out-dir", type=Path, default=RESULTS_DIR)
    args = parser.parse_args()
    started = time.perf_counter()
    records = []
    for name in args.datasets:
        records += run_table(name, args.variants, args.reps, args.data_dir, args.max_rows,
                             log=lambda message: print(message, flush=True))  # fmt: skip
    report = {
        "config": {"datasets": args.datasets, "reps": args.reps, "variants": args.variants, "max_rows": args.max_rows},
        "command": "PYTHONPATH=. FIRE_NUM_THREADS=1 python bench/near_identical_rules.py " + " ".join(sys.argv[1:]),
        "solver": solver_commit(),
        "machine": cpu_model(),
        "seconds": time.perf_counter() - started,
        "summary": summarize(records),
        "records": records,
    }
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "near_identical_rules.json").write_text(json.dumps(report, indent=1))
    (args.out_dir / "near_identical_rules.md").write_text(render_markdown(report))
    print(render_markdown(report))


if __name__ == "__main__":
    main()
