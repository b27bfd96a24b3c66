"""Stability against accuracy of FIRE's settings, beside SIRUS (issue 29): which rule sets repeat on another sample.

Protocol (SIRUS's, Bénard et al. 2021): each table (at most ``--max-rows`` rows, drawn once with seed 0: every
number is then about that subsample, "the table") is cut ``--reps`` times into two disjoint halves
(``solver.stability.half_sample_pairs``). On each half every method is fitted with at most 14 terms (rules + linear
terms), seeded by the repetition; FIRE through ``solver.fitting.fit_rules`` on the half's rows alone (its holdout
and its forest come from within the half, as a user's fit would). Per repetition and method:

- stability: the Dice–Sørensen index of the two halves' rule sets, a rule being the set of its conditions (column,
  direction, the missing flag where the column has missing values, the nearest decile cut of the column on the
  whole table) and a linear term its column (``solver.stability.rule_keys``); ``dice_rules`` leaves linear terms
  out. SIRUS's rule set is every rule it selects (``rules_``, the set its own stability measure compares; its ridge
  may zero some: ``dice_used`` keeps the nonzero ones);
- test error of each half's model on the other half: the MSE of y standardized on the table (regression, so 1 is
  the error of the mean), the log loss (binary tables: the target's two values);
- terms (SIRUS: its rules of nonzero weight) and antecedents (conditions of the rules).

Methods: SIRUS (the ``sirus`` package, 14 rules, its trees grown until its own stability criterion holds unless
``--sirus-trees``, on the table with missing values imputed by the column's median, as bench/classification.py
does), FIRE's defaults (``fire``: ``PathSpec(max_rules=14)``, ``ForestSpec()``) and FIRE variants (``VARIANTS``):
forests split at quantile bins (``threshold_bins``), rules from every node of at most two conditions (``READABLE``),
stronger fusion, the L1 penalty, no linear terms, depth-2 forests, and combinations. Each is reported with its
median Dice and its test error relative to the defaults' and to SIRUS's on the same fits (the median of per-fit
ratios), the issue's targets: Dice >= 1.5 x SIRUS's median, error <= 1.05 x the defaults', <= 0.70 x SIRUS's.

    PYTHONPATH=. FIRE_NUM_THREADS=1 python bench/stability.py [--datasets ...] [--reps 5] [--variants ...]
        [--max-rows 4000] [--out-dir bench/results]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from dataclasses import fields
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import expit
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss
from sklearn.preprocessing import StandardScaler

REPO_ROOT = Path(__file__).resolve().parents[1]
# bench/ holds a solver.py (the speed benchmark): make sure "solver" is the package, not that script
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != REPO_ROOT / "bench"]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.machine import cpu_model, solver_commit  # noqa: E402
from solver import ForestSpec, PathSpec, TableEncoding, binary_labels  # noqa: E402
from solver.fitting import fit_rules  # noqa: E402
from solver.spec import READABLE, STABLE  # noqa: E402
from solver.stability import dice, half_sample_pairs, missing_features, reference_cuts  # noqa: E402
from solver.stability import rule_keys as fire_rule_keys  # noqa: E402

DATA_DIR = REPO_ROOT.parent / "shared" / "datasets"
REGRESSION_TABLES = ("abalone", "california_housing", "elevators", "kin8nm", "stock", "wind", "wine_quality")
BINARY_TABLES = ("attrition", "churn", "credit_data", "hmda", "spam7")  # in DATA_DIR / "classification"
BUDGET = 14  # "fewer than 15 terms" (rules + linear terms)
RESULTS_DIR = REPO_ROOT / "bench" / "results"
# issue 29's targets for the new defaults
DICE_VS_SIRUS = 1.5  # median Dice at least this times SIRUS's
ERROR_VS_DEFAULTS = 1.05  # median test error ratio to today's defaults at most this
ERROR_VS_SIRUS = 0.70  # ... and to SIRUS's at most this (30% below)


def _path_and_forest(settings: dict) -> tuple[dict, dict]:
    """Estimator-style settings (``solver.spec.STABLE``) as (PathSpec settings, ForestSpec settings)."""
    forest_fields = {f.name for f in fields(ForestSpec)}
    return (
        {k: v for k, v in settings.items() if k not in forest_fields},
        {k: v for k, v in settings.items() if k in forest_fields},
    )


# name -> (PathSpec settings, ForestSpec settings) on top of the defaults; "fire" is today's defaults
VARIANTS: dict[str, tuple[dict, dict]] = {
    "fire": ({}, {}),
    "bins10": ({}, {"threshold_bins": 10}),
    "bins5": ({}, {"threshold_bins": 5}),
    "bins20": ({}, {"threshold_bins": 20}),
    "readable": (dict(READABLE), {}),
    "fusion1": ({"fusion_ratio": 1.0}, {}),
    "fusion2": ({"fusion_ratio": 2.0}, {}),
    "l1": ({"penalty": "l1"}, {}),
    "nolinear": ({"linear_terms": False}, {}),
    "depth2": ({}, {"max_depth": 2}),
    "bins10_readable": (dict(READABLE), {"threshold_bins": 10}),
    "bins10_fusion1": ({"fusion_ratio": 1.0}, {"threshold_bins": 10}),
    "bins10_l1": ({"penalty": "l1"}, {"threshold_bins": 10}),
    "bins10_depth2": ({}, {"threshold_bins": 10, "max_depth": 2}),
    "bins10_readable_fusion1": (dict(READABLE, fusion_ratio=1.0), {"threshold_bins": 10}),
    "bins5_readable": (dict(READABLE), {"threshold_bins": 5}),
    "bins10_nolinear": ({"linear_terms": False}, {"threshold_bins": 10}),
    "readable_fusion1": (dict(READABLE, fusion_ratio=1.0), {}),
    "readable_fusion2": (dict(READABLE, fusion_ratio=2.0), {}),
    "bins10_readable_fusion2": (dict(READABLE, fusion_ratio=2.0), {"threshold_bins": 10}),
    "len1": (dict(READABLE, max_rule_length=1), {}),  # rules of one condition (stumps) beside linear terms
    "bins10_len1": _path_and_forest(STABLE),  # the library's documented stable setting
    "bins5_len1": (dict(READABLE, max_rule_length=1), {"threshold_bins": 5}),
    "len1_fusion1": (dict(READABLE, max_rule_length=1, fusion_ratio=1.0), {}),
    "len1_nolinear": (dict(READABLE, max_rule_length=1, linear_terms=False), {}),
    "bins10_depth2_readable": (dict(READABLE), {"threshold_bins": 10, "max_depth": 2}),
    "bins10_depth2_readable_l1": (dict(READABLE, penalty="l1"), {"threshold_bins": 10, "max_depth": 2}),
}
# stability selection over a variant (fit_stability_selected): name -> the variant
STABILITY_SELECTION = {"stabsel": "fire", "stabsel_bins10": "bins10", "stabsel_bins10_readable": "bins10_readable"}
STABILITY_PAIRS = 5  # splits into two halves inside the rows fitted: 10 fits of the variant
REFERENCES = ("fire", "sirus")  # every run has them: the error ratios are to these


def table_path(name: str, data_dir: Path) -> Path:
    """The table's file: ``data_dir/name.csv.gz`` or, for the binary tables, ``data_dir/classification/``."""
    for path in (data_dir / f"{name}.csv.gz", data_dir / "classification" / f"{name}.csv.gz"):
        if path.exists():
            return path
    raise FileNotFoundError(f"no table {name!r} in {data_dir} or {data_dir / 'classification'}")


def load_table(name: str, data_dir: Path = DATA_DIR, max_rows: int | None = None):
    """(X encoded, y, task, classes, TableEncoding): the target is the last column; a target of two distinct values
    is a binary one (y 0/1 of ``classes``), any other a regression one (y standardized on these rows). At most
    ``max_rows`` rows, drawn with seed 0."""
    frame = pd.read_csv(table_path(name, data_dir))
    if max_rows is not None and len(frame) > max_rows:
        rows = np.sort(np.random.default_rng(0).permutation(len(frame))[:max_rows])
        frame = frame.iloc[rows].reset_index(drop=True)
    features, target = frame.iloc[:, :-1], frame.iloc[:, -1].to_numpy()
    encoding = TableEncoding.infer(features)
    X = encoding.encode_frame(features)
    if len(pd.unique(target)) == 2:
        classes, y = binary_labels(target)
        return X, y, "binary", classes, encoding
    y = target.astype(np.float64)
    return X, (y - y.mean()) / y.std(), "regression", None, encoding


def test_error(task: str, y: np.ndarray, prediction: np.ndarray) -> float:
    """MSE (regression: standardized y) or log loss (binary: ``prediction`` the probability of class 1)."""
    if task == "regression":
        return float(np.mean((prediction - y) ** 2))
    return float(log_loss(y, np.clip(prediction, 1e-15, 1 - 1e-15), labels=[0, 1]))


def fire_rules(variant, X, y, task, classes, encoding, seed):
    """The RuleEnsemble of one FIRE fit of a variant on these rows (its holdout and forest within them)."""
    path_settings, forest_settings = VARIANTS[variant]
    loss = "squared" if task == "regression" else "logistic"
    spec = PathSpec(loss=loss, max_rules=BUDGET, random_state=seed).replace(**path_settings)
    forest = ForestSpec(random_state=seed).replace(**forest_settings)
    return fit_rules(X, y, spec, forest=forest, encoding=encoding, classes=classes).rules


def fit_fire(variant, X, y, task, classes, encoding, seed, cuts, with_missing):
    """One FIRE fit of a variant on these rows: its predict (the mean: probabilities for a binary table), its keys
    (rules and linear terms), its rules' keys, terms, linear terms, antecedents."""
    if variant in STABILITY_SELECTION:
        return fit_stability_selected(variant, X, y, task, classes, encoding, seed, cuts, with_missing)
    rules = fire_rules(variant, X, y, task, classes, encoding, seed)
    keys = fire_rule_keys(rules, cuts, with_missing)
    # a logistic fit's rules add log-odds (their ensemble's link is the identity: the documents it has always written)
    predict = rules.predict if task == "regression" else (lambda Z: expit(rules.predict(Z)))
    return {
        "predict": predict,
        "keys": set(keys),
        "rule_keys": set(keys[: len(rules.rules)]),
        "terms": len(rules.rules) + len(rules.linear),
        "linear": len(rules.linear),
        "antecedents": sum(len(rule.conditions) for rule in rules.rules),
    }


def _fires(rule, X: np.ndarray) -> np.ndarray:
    """Whether each row satisfies the rule, compared as RuleEnsemble compares (float32 values, NaN by its flag)."""
    fired = np.ones(len(X), dtype=bool)
    for c in rule.conditions:
        column = X[:, c.feature_index].astype(np.float32).astype(np.float64)
        side = column <= c.threshold if c.operator == "<=" else column > c.threshold
        fired &= np.where(np.isnan(column), c.missing, side)
    return fired


def fit_stability_selected(variant, X, y, task, classes, encoding, seed, cuts, with_missing):
    """Stability selection (Meinshausen & Bühlmann, 2010) over a FIRE variant: the variant fitted on the two halves of
    ``STABILITY_PAIRS`` splits of these rows, its terms ranked by how many of those fits hold them (keys binned on
    ``cuts``), the k most frequent kept (k: the fits' median number of terms) and their weights refitted on all these
    rows without a penalty (least squares; a logistic regression's mild L2 for a binary table), as SIRUS weighs its
    selected rules. A term is the first of the fits that holds its key."""
    base = STABILITY_SELECTION[variant]
    counts: dict = {}
    first: dict = {}
    sizes = []
    for k, halves in enumerate(half_sample_pairs(len(y), STABILITY_PAIRS, seed)):
        for h in halves:
            rules = fire_rules(base, X[h], y[h], task, classes, encoding, seed * STABILITY_PAIRS + k)
            terms = [*rules.rules, *rules.linear]
            sizes.append(len(terms))
            for key, term in zip(fire_rule_keys(rules, cuts, with_missing), terms):
                counts[key] = counts.get(key, 0) + 1
                first.setdefault(key, term)
    kept = sorted(counts, key=lambda key: -counts[key])[: int(np.median(sizes))]  # stable: ties by first seen
    rule_keys = [key for key in kept if hasattr(first[key], "conditions")]
    rules = [first[key] for key in rule_keys]
    linear = [first[key] for key in kept if key not in rule_keys]

    def design(Z):
        """The kept terms' columns: 0/1 per rule, the clipped value per linear term, then a column of ones."""
        columns = [_fires(rule, Z) for rule in rules] + [t.values(Z) for t in linear]
        return np.column_stack([*columns, np.ones(len(Z))])

    if task == "regression":
        weights = np.linalg.lstsq(design(X), y, rcond=None)[0]

        def predict(Z):
            return design(Z) @ weights

    else:
        scaler = StandardScaler().fit(design(X))
        model = LogisticRegression(max_iter=1000).fit(scaler.transform(design(X)), y)

        def predict(Z):
            return model.predict_proba(scaler.transform(design(Z)))[:, 1]

    return {
        "predict": predict,
        "keys": set(kept),
        "rule_keys": set(rule_keys),
        "terms": len(kept),
        "linear": len(linear),
        "antecedents": sum(len(rule.conditions) for rule in rules),
    }


def sirus_rule_keys(rules, cuts) -> list[frozenset]:
    """SIRUS's rules as ``solver.stability.rule_keys`` reads FIRE's: ``x < t`` is ``x <= t``'s side, ``x >= t``
    ``x > t``'s (SIRUS takes no missing value: no flag), t binned on the nearest reference cut."""
    return [
        frozenset(
            (c.feature, "<=" if c.op == "<" else ">", None, int(np.argmin(np.abs(cuts[c.feature] - c.value))))
            for c in rule.conditions
        )
        for rule in rules
    ]


def fit_sirus(X, y, task, seed, cuts, n_trees):
    """SIRUS (14 rules) on these rows (no missing values): as ``fit_fire``, plus the Dice keys of its used rules."""
    from sirus import SirusClassifier, SirusRegressor

    estimator = SirusRegressor if task == "regression" else SirusClassifier
    model = estimator(num_rules=BUDGET, num_trees=n_trees, random_state=seed, n_jobs=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(X, y)
    used = [rule for rule, weight in zip(model.rules_, model.rule_weights_) if weight != 0]
    keys = set(sirus_rule_keys(model.rules_, cuts))
    return {
        "predict": model.predict if task == "regression" else (lambda Z: model.predict_proba(Z)[:, 1]),
        "keys": keys,
        "rule_keys": keys,
        "used_keys": set(sirus_rule_keys(used, cuts)),
        "terms": len(used),
        "linear": 0,
        "antecedents": sum(len(rule.conditions) for rule in used),
    }


def run_table(name, variants, reps, data_dir, max_rows, sirus_trees, log):
    """Records of one table: one per repetition and method."""
    X, y, task, classes, encoding = load_table(name, data_dir, max_rows)
    cuts = reference_cuts(X)
    with_missing = missing_features(X)
    X_complete = np.where(np.isnan(X), np.nanmedian(X, axis=0), X)  # SIRUS takes no missing value
    records = []
    for rep, halves in enumerate(half_sample_pairs(len(y), reps, seed=0)):
        for method in ("sirus", *variants):
            started = time.perf_counter()
            if method == "sirus":
                fits = [fit_sirus(X_complete[h], y[h], task, rep, cuts, sirus_trees) for h in halves]
                data = X_complete
            else:
                fits = [fit_fire(method, X[h], y[h], task, classes, encoding, rep, cuts, with_missing) for h in halves]
                data = X
            errors = [test_error(task, y[other], fit["predict"](data[other])) for fit, other in zip(fits, halves[::-1])]
            record = {
                "table": name,
                "task": task,
                "rows": len(y),
                "rep": rep,
                "method": method,
                "dice": dice(fits[0]["keys"], fits[1]["keys"]),
                "dice_rules": dice(fits[0]["rule_keys"], fits[1]["rule_keys"]),
                "errors": errors,
                "terms": [fit["terms"] for fit in fits],
                "linear": [fit["linear"] for fit in fits],
                "antecedents": [fit["antecedents"] for fit in fits],
                "seconds": time.perf_counter() - started,
            }
            if method == "sirus":
                record["dice_used"] = dice(fits[0]["used_keys"], fits[1]["used_keys"])
            records.append(record)
        log(
            f"{name} ({task}, {len(y)} rows) rep {rep}: "
            + ", ".join(f"{r['method']} {r['dice']:.2f}/{np.mean(r['errors']):.3f}" for r in records if r["rep"] == rep)
        )
    return records


def _median(values) -> float:
    return float(np.median(values)) if len(values) else float("nan")


def summarize(records, methods) -> dict:
    """Per method: median Dice (and rules-only Dice), median per-fit error ratios to the defaults and to SIRUS,
    median terms and antecedents, the targets; per table and per task the same medians; the trade-off points."""
    fits = {}  # (table, rep, half) -> method -> error
    for r in records:
        for half, error in enumerate(r["errors"]):
            fits.setdefault((r["table"], r["rep"], half), {})[r["method"]] = error

    def ratios(method, reference, tables=None):
        return [
            errors[method] / errors[reference]
            for (table, _, _), errors in fits.items()
            if (tables is None or table in tables) and method in errors and reference in errors
        ]

    def medians(rows, method, tables=None):
        rows = [r for r in rows if r["method"] == method]
        return {
            "dice": _median([r["dice"] for r in rows]),
            "dice_rules": _median([r["dice_rules"] for r in rows]),
            # a Dice index of two sets of about 12 takes few values: the means tell settings apart where medians tie
            "dice_mean": float(np.mean([r["dice"] for r in rows])) if rows else float("nan"),
            "dice_rules_mean": float(np.mean([r["dice_rules"] for r in rows])) if rows else float("nan"),
            "error": _median([e for r in rows for e in r["errors"]]),
            "error_vs_fire": _median(ratios(method, "fire", tables)),
            "error_vs_sirus": _median(ratios(method, "sirus", tables)),
            "terms": _median([t for r in rows for t in r["terms"]]),
            "linear": _median([t for r in rows for t in r["linear"]]),
            "antecedents": _median([a for r in rows for a in r["antecedents"]]),
            "seconds": _median([r["seconds"] for r in rows]),
            "reps": len(rows),
        }

    tables = list(dict.fromkeys(r["table"] for r in records))
    tasks = {
        task: [t for t in tables if any(r["table"] == t and r["task"] == task for r in records)]
        for task in ("regression", "binary")
    }
    per_table = {t: {m: medians([r for r in records if r["table"] == t], m, [t]) for m in methods} for t in tables}

    def over(names):
        """The medians over the tables ``names``, with Dice relative to SIRUS's and the worst table's error ratio."""
        rows = {m: medians([r for r in records if r["table"] in names], m, names) for m in methods}
        for m, row in rows.items():
            sirus_dice = rows["sirus"]["dice"]
            row["dice_vs_sirus"] = row["dice"] / sirus_dice if sirus_dice > 0 else float("inf")
            # a median over tables hides a table where a setting loses much
            row["worst_table_error_vs_fire"] = max(per_table[t][m]["error_vs_fire"] for t in names)
            row["targets"] = {
                "stability": bool(row["dice_vs_sirus"] >= DICE_VS_SIRUS),
                "error_vs_defaults": bool(row["error_vs_fire"] <= ERROR_VS_DEFAULTS),
                "error_vs_sirus": bool(row["error_vs_sirus"] <= ERROR_VS_SIRUS),
            }
        return rows

    overall = over(tables)
    per_task = {task: over(names) for task, names in tasks.items() if names}
    sirus_used = [r["dice_used"] for r in records if r["method"] == "sirus"]
    candidates = [m for m in methods if m not in REFERENCES]
    meeting = [m for m in candidates if all(overall[m]["targets"].values())]
    accurate = [m for m in candidates if overall[m]["targets"]["error_vs_defaults"]]
    best = max(meeting or accurate or candidates, key=lambda m: overall[m]["dice"], default=None)
    return {
        "tables": tables,
        "tasks": tasks,
        "methods": methods,
        "overall": overall,
        "per_task": per_task,
        "per_table": per_table,
        "sirus_dice_used": _median(sirus_used),
        "best": best,
        "meeting_all_targets": meeting,
    }


def _row(name, row):
    targets = "".join("y" if met else "n" for met in row["targets"].values())
    return (
        f"| {name} | {row['dice']:.3f} | {row['dice_mean']:.3f} | {row['dice_rules_mean']:.3f} | "
        f"{row['dice_vs_sirus']:.2f} | {row['error']:.4f} | {row['error_vs_fire']:.3f} | "
        f"{row['worst_table_error_vs_fire']:.3f} | {row['error_vs_sirus']:.3f} | {row['terms']:.0f} | "
        f"{row['linear']:.0f} | {row['antecedents']:.0f} | {row['seconds']:.1f} | {targets} |"
    )


def render_markdown(report) -> str:
    s, cfg = report["summary"], report["config"]
    head = (
        "| method | Dice | mean Dice | mean Dice (rules) | Dice / SIRUS | test error | error / defaults | worst table "
        "error / defaults | error / SIRUS | terms | linear | antecedents | s per rep | targets |"
    )
    rule = "|" + "---|" * (head.count("|") - 1)
    lines = [
        "# Stability against accuracy: FIRE's settings and SIRUS (issue 29)",
        "",
        f"Generated by `bench/stability.py` ({report['seconds']:.0f} s, solver {report['solver']}, "
        f"{report['machine']}, one core: FIRE_NUM_THREADS=1, n_jobs=1).",
        "",
        "## Setup",
        "",
        f"- Tables: {', '.join(s['tables'])}; at most {cfg['max_rows']} rows each (a seeded subsample: the table);",
        f"  {cfg['reps']} repetitions of two disjoint halves; every method fitted on each half with <= {BUDGET} terms,",
        "  seeded by the repetition (FIRE: `fit_rules` on the half, its holdout and forest inside the half).",
        "- Dice: rule sets of the two halves, a rule = its conditions (column, direction, missing flag where the "
        "column has missing values, nearest decile cut of the table), a linear term = its column; 'mean Dice (rules)' "
        "without linear terms. SIRUS: every selected rule (`rules_`); with only its nonzero-weight rules its median "
        f"Dice is {s['sirus_dice_used']:.3f}.",
        "- Test error: each half's model on the other half: MSE of y standardized on the table (regression), log loss "
        "(binary). 'error / defaults' and 'error / SIRUS' are medians of per-fit ratios (same table, repetition, "
        "half); 'worst table' is the largest of the tables' medians of it; terms, linear, antecedents are medians over "
        "fits. Dice is a median over tables x repetitions; 'mean Dice' (and its rules-only one) the mean, which tells "
        "settings apart where medians of a few-valued index tie.",
        f"- SIRUS: the `sirus` package, 14 rules, trees: {cfg['sirus_trees'] or 'grown until its stability criterion'}"
        "; missing values imputed by the column median.",
        f"- Targets (issue 29): Dice >= {DICE_VS_SIRUS} x SIRUS's median; error <= {ERROR_VS_DEFAULTS} x today's "
        f"defaults'; error <= {ERROR_VS_SIRUS} x SIRUS's. The last column says y/n for each, in that order.",
        "",
        "Variants (PathSpec settings, ForestSpec settings on top of the defaults):",
        "",
    ]
    lines += [f"- `{m}`: {VARIANTS[m][0] or '-'}, {VARIANTS[m][1] or '-'}" for m in s["methods"] if m in VARIANTS]
    lines += [
        f"- `{m}`: stability selection over `{STABILITY_SELECTION[m]}` ({2 * STABILITY_PAIRS} half-sample fits inside "
        "the half; its median number of terms kept, the most frequent; weights refitted without a penalty)"
        for m in s["methods"]
        if m in STABILITY_SELECTION
    ]
    lines += ["", "## Headline (all tables)", "", head, rule]
    lines += [_row(m, s["overall"][m]) for m in s["methods"]]
    lines += [
        "",
        f"Best candidate: `{s['best']}` (highest median Dice among those meeting all targets, else among those within "
        f"{ERROR_VS_DEFAULTS} x the defaults' error); meeting all targets: "
        + (", ".join(f"`{m}`" for m in s["meeting_all_targets"]) or "none")
        + ".",
        "",
        "## Trade-off: stability against accuracy",
        "",
        "One point per method (all tables): median Dice against the median error ratio to today's defaults.",
        "",
        "| method | median Dice | error / defaults |",
        "|---|---|---|",
    ]
    by_dice = sorted(s["methods"], key=lambda m: s["overall"][m]["dice"])
    lines += [f"| {m} | {s['overall'][m]['dice']:.3f} | {s['overall'][m]['error_vs_fire']:.3f} |" for m in by_dice]
    if report.get("plot"):
        lines += ["", f"![trade-off]({report['plot']})"]
    for task, rows in s["per_task"].items():
        lines += ["", f"## {task.capitalize()} tables ({', '.join(s['tasks'][task])})", "", head, rule]
        lines += [_row(m, rows[m]) for m in s["methods"]]
    lines += ["", "## Per table", "", "Median Dice / median error ratio to today's defaults, per table and method.", ""]
    lines += ["| table | " + " | ".join(s["methods"]) + " |", "|---|" + "---|" * len(s["methods"])]
    for table, rows in s["per_table"].items():
        lines.append(
            f"| {table} | "
            + " | ".join(f"{rows[m]['dice']:.2f} / {rows[m]['error_vs_fire']:.3f}" for m in s["methods"])
            + " |"
        )
    return "\n".join(lines) + "\n"


def plot_tradeoff(summary, path: Path) -> bool:
    """The trade-off curve as a PNG (False where matplotlib is missing)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(7, 5))
    for m in summary["methods"]:
        row = summary["overall"][m]
        ax.scatter(row["dice"], row["error_vs_fire"], color="tab:red" if m in REFERENCES else "tab:blue")
        ax.annotate(m, (row["dice"], row["error_vs_fire"]), fontsize=8, xytext=(3, 3), textcoords="offset points")
    sirus = summary["overall"]["sirus"]["dice"]
    ax.axvline(DICE_VS_SIRUS * sirus, color="grey", linestyle=":", label=f"{DICE_VS_SIRUS} x SIRUS's Dice")
    ax.axhline(ERROR_VS_DEFAULTS, color="grey", linestyle="--", label=f"{ERROR_VS_DEFAULTS} x defaults' error")
    ax.set_xlabel("median Dice of the two halves' rule sets (stability)")
    ax.set_ylabel("median test error / today's defaults'")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def evaluate(datasets, variants, reps, data_dir=DATA_DIR, max_rows=4000, sirus_trees=None, log=print) -> dict:
    """Records of every table and the summary: the report ``main`` writes."""
    known = {*VARIANTS, *STABILITY_SELECTION}
    unknown = sorted(set(variants) - known)
    if unknown:
        raise ValueError(f"unknown variants {unknown}; known: {sorted(known)}")
    variants = ["fire", *(v for v in variants if v != "fire")]
    started = time.perf_counter()
    records = [r for name in datasets for r in run_table(name, variants, reps, data_dir, max_rows, sirus_trees, log)]
    return {
        "config": {
            "datasets": list(datasets),
            "variants": variants,
            "reps": reps,
            "max_rows": max_rows,
            "sirus_trees": sirus_trees,
        },
        "solver": solver_commit(),
        "machine": cpu_model(),
        "seconds": time.perf_counter() - started,
        "summary": summarize(records, ["sirus", *variants]),
        "records": records,
    }


def write_report(report, out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    if plot_tradeoff(report["summary"], out_dir / "stability.png"):
        report["plot"] = "stability.png"
    (out_dir / "stability.json").write_text(json.dumps(report, indent=1))
    markdown = out_dir / "stability.md"
    markdown.write_text(render_markdown(report))
    return markdown


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="*", default=[*REGRESSION_TABLES, *BINARY_TABLES])
    parser.add_argument("--reps", type=int, default=5, help="repetitions of two disjoint halves")
    parser.add_argument(
        "--variants",
        nargs="*",
        default=list(VARIANTS),
        help=f"FIRE variants of {list(VARIANTS)} and stability selection {list(STABILITY_SELECTION)}",
    )
    parser.add_argument("--max-rows", type=int, default=4000, help="subsample larger tables to this many rows")
    parser.add_argument("--sirus-trees", type=int, default=None, help="SIRUS's trees (default: until stable)")
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR)
    parser.add_argument("--out-dir", type=Path, default=RESULTS_DIR)
    args = parser.parse_args()
    report = evaluate(
        args.datasets,
        args.variants,
        args.reps,
        args.data_dir,
        args.max_rows,
        args.sirus_trees,
        log=lambda message: print(message, flush=True),
    )
    print(f"wrote {write_report(report, args.out_dir)} in {report['seconds']:.0f}s")


if __name__ == "__main__":
    main()
