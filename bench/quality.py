"""Rule quality of FIRE against RuleFit-style L1 selection, imodels RuleFit and the full forest (issue 4).

Protocol (the paper's, sections 5-6 and its supplement):
- the seven datasets in ../shared/datasets (target = last column; abalone's categorical ``Sex`` one-hot);
- ``--splits`` repeated random train / validation / test splits (50 / 16 / 34, seeded), y standardized on
  the training split, every error a test MSE on that scale;
- a RandomForestRegressor of 500 trees, max_depth=3, max_features='sqrt' (seeded) for the headline
  comparison, plus depth 5 and 7 for the rule-budget sweep;
- every method tuned on the validation split (the step of its path with the lowest validation MSE within
  the budget; imodels' max_rules on a small grid) and scored once on test.

Methods on the depth-3 forest (all paths: n_lambdas=50, tol=1e-4, early stop at ``--path-rules`` rules):
  fire          MCP gamma=1.1 (block scaling) + fusion lambda_f = 0.5 lambda_s   (the main configuration)
  mcp           MCP gamma=1.1, no fusion
  fire_strong   MCP gamma=1.1 + fusion lambda_f = 2 lambda_s
  fire_lf01     MCP gamma=1.1 + fixed lambda_f = 0.1 (the paper's section 5 setting; see the report)
  l1            the L1 path on the same forest (RuleFit's selection problem)
  rulefit       imodels RuleFitRegressor (its own trees and L1 fit), max_rules tuned under 15 terms
  forest        the full forest
plus, for the defaults investigation (``--no-investigate`` skips them): MCP in plain scaling, block MCP
with gamma = 3 and 10, fusion ratio 1, a 100-point grid, and unit-norm columns of M (emulated by handing
the solver a LeafMatrix whose values are 1/sqrt(n_j): same rules, rescaled weights).

Usage::

    PYTHONPATH=. python bench/quality.py            # full run, writes bench/results/quality.md and .png
    PYTHONPATH=. python bench/quality.py --quick    # 2 datasets, 1 split, 100 trees: < 2 minutes
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestRegressor

REPO_ROOT = Path(__file__).resolve().parents[1]
# bench/ holds a solver.py (the speed benchmark): make sure "solver" is the package, not that script
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != REPO_ROOT / "bench"]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from solver import LeafMatrix, TableEncoding, TreeEnsemble, fit_path, leaf_matrix  # noqa: E402

DATA_DIR = REPO_ROOT.parent / "shared" / "datasets"
RESULTS_DIR = REPO_ROOT / "bench" / "results"
DATASETS = ("abalone", "california_housing", "elevators", "kin8nm", "stock", "wind", "wine_quality")
QUICK_DATASETS = ("stock", "abalone")
BUDGETS = (5, 10, 15, 25, 50)
HEADLINE_BUDGET = 14  # "fewer than 15 rules"
BAND = (10, 15)       # the fusion-vs-MCP antecedent comparison: best step with 10..15 rules

# name -> fit_path keyword arguments (depth-3 forest); "columns": "unit" rescales M's columns
MAIN_METHODS = {
    "fire": dict(penalty="mcp", gamma=1.1, fusion_ratio=0.5),
    "mcp": dict(penalty="mcp", gamma=1.1, fusion_ratio=0.0),
    "fire_strong": dict(penalty="mcp", gamma=1.1, fusion_ratio=2.0),
    "fire_lf01": dict(penalty="mcp", gamma=1.1, lambda_f=0.1, path_rules=16),
    "l1": dict(penalty="l1", fusion_ratio=0.0),
}
# the investigation only needs the < 15 rule and 10-15 rule steps: paths stop after 16 rules
INVESTIGATE_METHODS = {
    "mcp_plain": dict(penalty="mcp", gamma=1.1, mcp_scaling="plain", path_rules=16, fusion_ratio=0.0),
    "fire_g3": dict(penalty="mcp", gamma=3.0, fusion_ratio=0.5, path_rules=16),
    "fire_r1": dict(penalty="mcp", gamma=1.1, fusion_ratio=1.0, path_rules=16),
    "mcp_n100": dict(penalty="mcp", gamma=1.1, n_lambdas=100, path_rules=16, fusion_ratio=0.0),
    "fire_n100": dict(penalty="mcp", gamma=1.1, fusion_ratio=0.5, n_lambdas=100, path_rules=16),
    "fire_unit": dict(penalty="mcp", gamma=1.1, fusion_ratio=0.5, columns="unit", path_rules=16),
    "l1_unit": dict(penalty="l1", columns="unit", path_rules=16, fusion_ratio=0.0),
}
SWEEP_METHODS = ("fire", "mcp", "fire_strong", "l1")
# methods whose < 15 and 10-15 rule steps are also scored after an unpenalized least-squares refit of the
# selected leaves (a "polish"/debias step the solver does not have yet: see the report)
POLISH_METHODS = ("fire", "mcp", "fire_strong", "fire_r1", "l1")
COLORS = {"fire": "tab:blue", "mcp": "tab:orange", "fire_strong": "tab:green", "l1": "tab:red"}
DEEP_SWEEP_METHODS = ("fire", "mcp", "l1")  # depths 5 and 7 (time budget)
LABELS = {
    "fire": "FIRE (MCP g=1.1 + fusion 0.5 lambda_s)",
    "mcp": "FIRE MCP only",
    "fire_strong": "FIRE strong fusion (2 lambda_s)",
    "fire_lf01": "FIRE fixed lambda_f=0.1",
    "l1": "L1 path, same forest (RuleFit problem)",
    "rulefit": "imodels RuleFitRegressor",
    "forest": "full forest",
    "mcp_plain": "MCP plain scaling g=1.1",
    "fire_g3": "FIRE block gamma=3",
    "mcp_n100": "MCP only, n_lambdas=100",
    "fire_r1": "FIRE fusion ratio 1",
    "fire_n100": "FIRE n_lambdas=100",
    "fire_unit": "FIRE, unit-norm columns",
    "l1_unit": "L1, unit-norm columns",
}


@dataclass
class Config:
    datasets: tuple = DATASETS
    n_splits: int = 5
    n_trees: int = 500
    depths: tuple = (3, 5, 7)
    n_lambdas: int = 50
    tol: float = 1e-4
    path_rules: int = 60
    rulefit_grid: tuple = (7, 14)
    rulefit_trees: int = 100
    investigate: bool = True
    investigate_splits: int = 2  # the defaults investigation runs on the first splits only (time budget)
    n_jobs: int = 2
    max_rows: int | None = None  # subsample rows (smoke tests only)
    data_dir: Path = DATA_DIR
    extra: dict = field(default_factory=dict)


def load_dataset(name, data_dir=DATA_DIR):
    """(X float64, y float64, feature names): target is the last column, text columns one-hot (the library's
    TableEncoding, as the estimator and the service encode them)."""
    frame = pd.read_csv(Path(data_dir) / f"{name}.csv.gz")
    target = frame.columns[-1]
    features = frame.drop(columns=[target])
    encoding = TableEncoding.infer(features)
    return encoding.encode_frame(features), frame[target].to_numpy(dtype=np.float64), encoding.feature_names


def split_indices(n, seed):
    """50 / 16 / 34 train / validation / test, seeded."""
    perm = np.random.default_rng(1000 + seed).permutation(n)
    n_train, n_val = int(round(0.50 * n)), int(round(0.16 * n))
    return perm[:n_train], perm[n_train:n_train + n_val], perm[n_train + n_val:]


def _import_rulefit():
    from imodels import RuleFitRegressor  # needs `six`, which imodels does not declare: our test extra does
    return RuleFitRegressor


def unit_columns(matrix: LeafMatrix, train_matrix: LeafMatrix) -> LeafMatrix:
    """``matrix`` with each column rescaled to unit norm on the training rows (values 1/sqrt(n_j)).

    Same leaves, so the same rules and antecedents; only the weights' scale (hence the penalty) changes.
    """
    counts = np.zeros(len(train_matrix.values))
    leaves = train_matrix.leaves.astype(np.int64) + train_matrix.offsets[:-1][None, :]
    np.add.at(counts, leaves.ravel(), 1.0)
    values = 1.0 / np.sqrt(np.maximum(counts, 1.0))
    return LeafMatrix(matrix.leaves, values, matrix.offsets)


def _mse(a, b):
    return float(np.mean((np.asarray(a) - np.asarray(b)) ** 2))


def selected_columns(matrix: LeafMatrix, leaves):
    """Dense columns of M for the global leaves ``leaves`` (n x len(leaves))."""
    out = np.zeros((matrix.leaves.shape[0], len(leaves)))
    trees = np.searchsorted(matrix.offsets, leaves, side="right") - 1
    for c, (leaf, t) in enumerate(zip(leaves, trees)):
        hit = matrix.leaves[:, t].astype(np.int64) + matrix.offsets[t] == leaf
        out[hit, c] = matrix.values[leaf]
    return out


def polished_errors(mats, ys, leaves):
    """Validation and test MSE after refitting the weights of ``leaves`` (and the intercept) by least squares."""
    tr, va, te = mats
    design = np.column_stack([np.ones(tr.leaves.shape[0]), selected_columns(tr, leaves)])
    coef, *_ = np.linalg.lstsq(design, ys[0], rcond=None)
    val = _mse(coef[0] + selected_columns(va, leaves) @ coef[1:], ys[1])
    test = _mse(coef[0] + selected_columns(te, leaves) @ coef[1:], ys[2])
    return val, test


def run_path(kwargs, forest, mats, y_train, y_val, y_test, cfg, budgets, polish=False):
    """One path; per budget the validation-selected step: rules, antecedents, val and test MSE."""
    kwargs = dict(kwargs)
    columns = kwargs.pop("columns", None)
    tr, va, te = mats
    if columns == "unit":
        tr, va, te = unit_columns(tr, mats[0]), unit_columns(va, mats[0]), unit_columns(te, mats[0])
    kwargs.setdefault("n_lambdas", cfg.n_lambdas)
    path_rules = kwargs.pop("path_rules", cfg.path_rules)
    started = time.perf_counter()
    result = fit_path(tr, y_train, tol=cfg.tol, max_rules=path_rules, val_matrix=va, y_val=y_val,
                      leaf_ancestors=forest.leaf_ancestors, **kwargs)
    seconds = time.perf_counter() - started
    out = {"seconds": seconds, "n_steps": len(result.steps), "stop": result.stop_reason,
           "not_converged": int(sum(not s.converged for s in result.steps)), "budgets": {}}
    test_cache = {}

    def record(k):
        if k not in test_cache:
            step = result.steps[k]
            pred = result.intercepts[k] + te.matvec(result.coef(k))
            test_cache[k] = {"step": k, "rules": step.n_rules, "antecedents": step.n_antecedents,
                             "trees": step.n_trees, "val": step.val_loss, "test": _mse(pred, y_test)}
        return test_cache[k]

    for budget in budgets:
        out["budgets"][str(budget)] = record(result.select(max_rules=budget))
    band = [s for s in result.steps if BAND[0] <= s.n_rules <= BAND[1]]
    out["band"] = record(min(band, key=lambda s: (s.val_loss, s.index)).index) if band else None
    if polish:  # refit every candidate step's support, select on the refitted validation error
        out["polish"] = {}
        for key, (lo, hi) in (("headline", (1, HEADLINE_BUDGET)), ("band", BAND)):
            best = None
            for s in result.steps:
                if lo <= s.n_rules <= hi:
                    val, test = polished_errors((tr, va, te), (y_train, y_val, y_test),
                                                np.flatnonzero(result.coef(s.index)))
                    if best is None or val < best["val"]:
                        best = {"step": s.index, "rules": s.n_rules, "antecedents": s.n_antecedents,
                                "val": val, "test": test}
            out["polish"][key] = best
    return out


def run_rulefit(X, y, idx, seed, cfg):
    """imodels RuleFit (its own trees, include_linear default), max_rules on a grid, <= 14 terms."""
    RuleFitRegressor = _import_rulefit()
    tr, va, te = idx
    best, tried = None, []
    started = time.perf_counter()
    for max_rules in cfg.rulefit_grid:
        model = RuleFitRegressor(n_estimators=cfg.rulefit_trees, max_rules=max_rules, cv=False,
                                 random_state=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.fit(X[tr], y[tr])
        coef = np.asarray(model.coef, dtype=float)
        n_features = X.shape[1]
        nonzero = np.abs(coef) > 1e-6 / np.mean(np.abs(y[tr]))
        n_terms = int(nonzero.sum())
        rules = model.rules_without_feature_names_
        n_conditions = int(sum(len(str(r).split(" and ")) for r, nz in zip(rules, nonzero[n_features:]) if nz))
        val = _mse(model.predict(X[va]), y[va])
        entry = {"max_rules": max_rules, "terms": n_terms, "linear": int(nonzero[:n_features].sum()),
                 "conditions": n_conditions, "val": val}
        tried.append(entry)
        if n_terms <= HEADLINE_BUDGET and (best is None or val < best[0]["val"]):
            best = (entry, model)
    if best is None:  # nothing under budget: report the smallest, flagged
        entry = dict(tried[0], over_budget=True)
        model = RuleFitRegressor(n_estimators=cfg.rulefit_trees, max_rules=cfg.rulefit_grid[0], cv=False,
                                 random_state=seed).fit(X[tr], y[tr])
        best = (entry, model)
    entry, model = best
    return dict(entry, test=_mse(model.predict(X[te]), y[te]), seconds=time.perf_counter() - started,
                tried=tried)


def run_split(name, X, y, seed, cfg, log):
    tr, va, te = split_indices(len(y), seed)
    if cfg.max_rows is not None:
        tr, va, te = tr[:cfg.max_rows // 2], va[:cfg.max_rows // 6], te[:cfg.max_rows // 3]
    mean, std = y[tr].mean(), y[tr].std()
    ys = (y - mean) / std
    record = {"dataset": name, "split": seed, "n_train": len(tr), "depths": {}}
    for depth in cfg.depths:
        started = time.perf_counter()
        rf = RandomForestRegressor(n_estimators=cfg.n_trees, max_depth=depth, max_features="sqrt",
                                   random_state=seed, n_jobs=cfg.n_jobs).fit(X[tr], ys[tr])
        forest = TreeEnsemble.from_sklearn(rf)
        mats = tuple(leaf_matrix(forest, X[i]) for i in (tr, va, te))
        fit_seconds = time.perf_counter() - started
        entry = {"forest": {"test": _mse(forest.predict(X[te]), ys[te]), "val": _mse(forest.predict(X[va]), ys[va]),
                            "rules": forest.n_leaves, "seconds": fit_seconds}, "methods": {}}
        if depth == 3:
            methods = dict(MAIN_METHODS)
            if cfg.investigate and seed < cfg.investigate_splits:
                methods.update(INVESTIGATE_METHODS)
        else:
            methods = {m: MAIN_METHODS[m] for m in DEEP_SWEEP_METHODS}
        for method, kwargs in methods.items():
            entry["methods"][method] = run_path(kwargs, forest, mats, ys[tr], ys[va], ys[te], cfg,
                                                (HEADLINE_BUDGET,) + BUDGETS,
                                                polish=depth == 3 and method in POLISH_METHODS)
        record["depths"][str(depth)] = entry
        log(f"  {name} split {seed} depth {depth}: forest {fit_seconds:.1f}s, paths "
            f"{sum(m['seconds'] for m in entry['methods'].values()):.1f}s")
    record["rulefit"] = run_rulefit(X, ys, (tr, va, te), seed, cfg)
    log(f"  {name} split {seed} rulefit: {record['rulefit']['seconds']:.1f}s")
    return record


def _solver_version():
    """Last commit touching solver/ plus '+dirty' when solver/ has uncommitted changes (None without git)."""
    import subprocess
    try:
        commit = subprocess.run(["git", "log", "-1", "--format=%h", "--", "solver"], cwd=REPO_ROOT,
                                capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "solver"], cwd=REPO_ROOT,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return (commit + ("+dirty" if dirty else "")) or None


def evaluate(cfg: Config, log=print):
    """All datasets x splits; returns the raw records plus the summary (see :func:`summarize`)."""
    started = time.perf_counter()
    solver_version = _solver_version()  # the solver is being tuned: record which one produced the numbers
    records = []
    for name in cfg.datasets:
        X, y, _ = load_dataset(name, cfg.data_dir)
        for seed in range(cfg.n_splits):
            records.append(run_split(name, X, y, seed, cfg, log))
            log(f"{name} split {seed} done at {time.perf_counter() - started:.0f}s")
    report = {"config": {k: (str(v) if isinstance(v, Path) else v) for k, v in cfg.__dict__.items()},
              "records": records, "seconds": time.perf_counter() - started, "solver_version": solver_version}
    report["summary"] = summarize(records, cfg)
    return report


# ----------------------------------------------------------------------------------------------------- summary

def _headline(rec, method):
    """Test MSE, rules, antecedents of ``method`` at the < 15 rule budget on the depth-3 forest."""
    if method == "rulefit":
        r = rec["rulefit"]
        return {"test": r["test"], "rules": r["terms"], "antecedents": r["conditions"]}
    d3 = rec["depths"]["3"]
    if method == "forest":
        return {"test": d3["forest"]["test"], "rules": d3["forest"]["rules"], "antecedents": None}
    b = d3["methods"][method]["budgets"][str(HEADLINE_BUDGET)]
    return {"test": b["test"], "rules": b["rules"], "antecedents": b["antecedents"]}


def _has(rec, method):
    return method in ("rulefit", "forest") or method in rec["depths"]["3"]["methods"]


def _decrease(fire, comp):
    return (comp - fire) / comp if comp > 0 else 0.0


def summarize(records, cfg):
    datasets = list(dict.fromkeys(r["dataset"] for r in records))
    depth3_methods = list(dict.fromkeys(m for r in records for m in r["depths"]["3"]["methods"]))
    headline_methods = depth3_methods + ["rulefit", "forest"]
    per_dataset = {}
    for name in datasets:
        recs = [r for r in records if r["dataset"] == name]
        per_dataset[name] = {}
        for m in headline_methods:
            rows = [_headline(r, m) for r in recs if _has(r, m)]
            ants = [x["antecedents"] for x in rows if x["antecedents"] is not None]
            per_dataset[name][m] = {"test": float(np.mean([x["test"] for x in rows])),
                                    "test_sd": float(np.std([x["test"] for x in rows])),
                                    "rules": float(np.mean([x["rules"] for x in rows])),
                                    "max_rules": int(max(x["rules"] for x in rows)),
                                    "antecedents": float(np.mean(ants)) if ants else None}
    # median percent decrease of FIRE's error (and every depth-3 variant's) vs each competitor
    decreases = {}
    for fire_m in depth3_methods:
        decreases[fire_m] = {}
        for comp in ("l1", "rulefit", "mcp", "forest", "fire"):
            if comp == fire_m:
                continue
            vals = [_decrease(_headline(r, fire_m)["test"], _headline(r, comp)["test"]) for r in records
                    if _has(r, fire_m)]
            decreases[fire_m][comp] = {"median": float(np.median(vals)), "q25": float(np.percentile(vals, 25)),
                                       "q75": float(np.percentile(vals, 75)), "n": len(vals)}
    # fusion vs MCP only, best validation step with 10..15 rules
    band = {}
    for fused in [m for m in depth3_methods if m.startswith("fire")]:
        ant_red, err_inc, pairs = [], [], 0
        for r in records:
            if not _has(r, fused):
                continue
            a = r["depths"]["3"]["methods"][fused]["band"]
            b = r["depths"]["3"]["methods"]["mcp"]["band"]
            if a is None or b is None or not b["antecedents"]:
                continue
            pairs += 1
            ant_red.append(1.0 - a["antecedents"] / b["antecedents"])
            err_inc.append(a["test"] / b["test"] - 1.0)
        band[fused] = {"pairs": pairs,
                       "median_antecedent_reduction": float(np.median(ant_red)) if ant_red else None,
                       "median_error_increase": float(np.median(err_inc)) if err_inc else None,
                       "mean_antecedents": float(np.mean([r["depths"]["3"]["methods"][fused]["band"]["antecedents"]
                                                          for r in records if _has(r, fused)
                                                          and r["depths"]["3"]["methods"][fused]["band"]]))
                       if pairs else None}
    band["mcp"] = {"mean_antecedents": float(np.mean([r["depths"]["3"]["methods"]["mcp"]["band"]["antecedents"]
                                                      for r in records if r["depths"]["3"]["methods"]["mcp"]["band"]]))}
    # within 15% of the full forest (dataset means)
    near_forest = {name: per_dataset[name]["fire"]["test"] / per_dataset[name]["forest"]["test"] - 1.0
                   for name in datasets}
    # rule-budget sweep: per depth, method, budget: median over datasets x splits of test / forest test,
    # and median decrease vs L1 at that budget
    sweep = {}
    for depth in cfg.depths:
        sweep[str(depth)] = {}
        for m in (SWEEP_METHODS if depth == 3 else DEEP_SWEEP_METHODS):
            sweep[str(depth)][m] = {}
            for budget in BUDGETS:
                rel, dec, rules, ants = [], [], [], []
                for r in records:
                    e = r["depths"][str(depth)]
                    b = e["methods"][m]["budgets"][str(budget)]
                    rel.append(b["test"] / e["forest"]["test"])
                    dec.append(_decrease(b["test"], e["methods"]["l1"]["budgets"][str(budget)]["test"]))
                    rules.append(b["rules"])
                    ants.append(b["antecedents"])
                sweep[str(depth)][m][str(budget)] = {"rel_forest": float(np.median(rel)),
                                                     "dec_vs_l1": float(np.median(dec)),
                                                     "rules": float(np.mean(rules)),
                                                     "antecedents": float(np.mean(ants))}
    polish = {}
    for m in POLISH_METHODS:
        rows = [r for r in records if _has(r, m) and "polish" in r["depths"]["3"]["methods"][m]]
        if not rows:
            continue
        get = lambda r, mm, key: r["depths"]["3"]["methods"][mm]["polish"][key]  # noqa: E731
        plain = [_headline(r, m)["test"] for r in rows]
        polished = [get(r, m, "headline")["test"] for r in rows]
        entry = {"pairs": len(rows),
                 "gain_from_refit": float(np.median([_decrease(b, a) for a, b in zip(plain, polished)])),
                 "dec_vs_l1_polished": float(np.median([_decrease(get(r, m, "headline")["test"],
                                                                  get(r, "l1", "headline")["test"]) for r in rows])),
                 "dec_vs_rulefit": float(np.median([_decrease(get(r, m, "headline")["test"], r["rulefit"]["test"])
                                                    for r in rows]))}
        ant, err = [], []
        for r in rows:
            a, b = get(r, m, "band"), get(r, "mcp", "band")
            if a and b and b["antecedents"]:
                ant.append(1.0 - a["antecedents"] / b["antecedents"])
                err.append(a["test"] / b["test"] - 1.0)
        entry["band_antecedent_reduction_vs_mcp"] = float(np.median(ant)) if ant else None
        entry["band_error_change_vs_mcp"] = float(np.median(err)) if err else None
        polish[m] = entry
    timing = {}
    for r in records:
        for depth, e in r["depths"].items():
            for m, v in e["methods"].items():
                timing.setdefault(m, []).append(v["seconds"])
    nonconv = {m: int(sum(r["depths"]["3"]["methods"][m]["not_converged"] for r in records if _has(r, m)))
               for m in depth3_methods}
    fire_vs = decreases["fire"]
    best_fused = band.get("fire", {})
    targets = {
        "vs_l1": {"value": fire_vs["l1"]["median"], "goal": 0.30, "met": fire_vs["l1"]["median"] >= 0.30},
        "vs_rulefit": {"value": fire_vs["rulefit"]["median"], "goal": 0.30,
                       "met": fire_vs["rulefit"]["median"] >= 0.30},
        "fusion_antecedents": {
            "reduction": best_fused.get("median_antecedent_reduction"),
            "error_increase": best_fused.get("median_error_increase"),
            "met": bool(best_fused.get("median_antecedent_reduction") is not None
                        and best_fused["median_antecedent_reduction"] >= 0.30
                        and best_fused["median_error_increase"] <= 0.05)},
        "near_forest": {"within": sum(v <= 0.15 for v in near_forest.values()), "of": len(near_forest),
                        "met": sum(v <= 0.15 for v in near_forest.values()) * 2 >= len(near_forest)},
    }
    return {"datasets": datasets, "methods": headline_methods, "per_dataset": per_dataset,
            "decreases": decreases, "band": band, "near_forest": near_forest, "sweep": sweep,
            "path_seconds": {m: float(np.mean(v)) for m, v in timing.items()}, "polish": polish,
            "not_converged_steps": nonconv, "targets": targets}


# ----------------------------------------------------------------------------------------------------- output

def _pct(x):
    return "n/a" if x is None else f"{100 * x:.1f}%"


def sweep_table(summary, key="rel_forest"):
    """ASCII table of the rule-budget sweep (median test MSE / full forest, or decrease vs L1)."""
    lines = []
    header = f"{'depth':>5} {'method':<12}" + "".join(f"{b:>9}" for b in BUDGETS)
    lines.append(header)
    lines.append("-" * len(header))
    for depth, methods in summary["sweep"].items():
        for m, row in methods.items():
            cells = "".join(f"{row[str(b)][key]:>9.3f}" for b in BUDGETS)
            lines.append(f"{depth:>5} {m:<12}{cells}")
    return "\n".join(lines)


def plot_sweep(summary, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter, NullLocator

    depths = list(summary["sweep"])
    fig, axes = plt.subplots(1, len(depths), figsize=(4.2 * len(depths), 3.6), sharey=True, squeeze=False)
    for ax, depth in zip(axes[0], depths):
        for m, row in summary["sweep"][depth].items():
            ax.plot(BUDGETS, [row[str(b)]["rel_forest"] for b in BUDGETS], marker="o", label=LABELS[m],
                    color=COLORS.get(m))
        ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        ax.set_xscale("log")
        ax.set_xticks(BUDGETS)
        ax.set_xticklabels([str(b) for b in BUDGETS])
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_title(f"500 trees, depth {depth}")
        ax.set_xlabel("rule budget (max rules)")
    axes[0][0].set_ylabel("median test MSE / full forest")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def render_markdown(report, plot_name="quality_budget.png", command="PYTHONPATH=. python bench/quality.py"):
    s, cfg = report["summary"], report["config"]
    t = s["targets"]
    out = []
    w = out.append
    w("# FIRE rule quality (issue 4)\n")
    w(f"Generated by `{command}` in {report['seconds'] / 60:.1f} min on this 2-core machine (shared with other "
      f"jobs); solver at commit `{report.get('solver_version') or 'unknown'}`.\n")
    w("## Setup\n")
    w(f"- Datasets: {', '.join(s['datasets'])} (target = last column; abalone `Sex` one-hot).")
    w(f"- {cfg['n_splits']} seeded random splits each, train/validation/test 50/16/34; y standardized on "
      "train; all errors are test MSE on that scale.")
    w(f"- RandomForestRegressor({cfg['n_trees']} trees, max_features='sqrt', seeded), depth 3 for the "
      f"headline; depths {', '.join(map(str, cfg['depths']))} for the budget sweep.")
    w(f"- Paths: `fit_path`, n_lambdas={cfg['n_lambdas']}, lambda_min_ratio=1e-3, tol={cfg['tol']}, early "
      f"stop once a step passes {cfg['path_rules']} rules; each method takes the step with the lowest "
      "validation MSE among steps with at most 14 rules (< 15), scored once on test.")
    w(f"- imodels RuleFitRegressor: {cfg['rulefit_trees']} trees of its own (tree_size 4, linear terms "
      f"included as RuleFit does), cv=False, max_rules in {list(cfg['rulefit_grid'])} chosen on validation "
      "among fits with at most 14 non-zero terms (rules + linear terms); its 'antecedents' are the summed "
      "conditions of its rules (no sharing).")
    w("- Rules = non-zero leaf weights; antecedents = distinct internal nodes the selected leaves need "
      "(`TreeEnsemble.leaf_ancestors` / `count_antecedents`).\n")

    w(f"## Headline ({cfg['n_trees']} trees of depth 3, < 15 rules)\n")
    w("| target | goal | result | met |")
    w("|---|---|---|---|")
    w(f"| FIRE median test-error decrease vs L1 path (same forest) | >= 30% | {_pct(t['vs_l1']['value'])} | "
      f"{'yes' if t['vs_l1']['met'] else '**no**'} |")
    w(f"| FIRE median test-error decrease vs imodels RuleFit | >= 30% | {_pct(t['vs_rulefit']['value'])} | "
      f"{'yes' if t['vs_rulefit']['met'] else '**no**'} |")
    w(f"| fusion (0.5 lambda_s) vs MCP only, 10-15 rules: fewer antecedents at <= 5% more error | >= 30% fewer | "
      f"{_pct(t['fusion_antecedents']['reduction'])} fewer, error {_pct(t['fusion_antecedents']['error_increase'])} | "
      f"{'yes' if t['fusion_antecedents']['met'] else '**no**'} |")
    w(f"| best-15-rule FIRE within 15% of the full forest | >= half the datasets | "
      f"{t['near_forest']['within']} of {t['near_forest']['of']} | {'yes' if t['near_forest']['met'] else '**no**'} |")
    w("")
    w("Median percent decrease of test error, (err_comp - err_method) / err_comp, over datasets x splits "
      "(IQR in brackets):\n")
    comps = ("l1", "rulefit", "mcp", "forest", "fire")
    w("| method | pairs | " + " | ".join(f"vs {c}" for c in comps) + " |")
    w("|---|---|" + "---|" * len(comps))
    for m, row in s["decreases"].items():
        cells = [f"{_pct(row[c]['median'])} [{_pct(row[c]['q25'])}, {_pct(row[c]['q75'])}]" if c in row else "-"
                 for c in comps]
        w(f"| {m}: {LABELS.get(m, m)} | {row['l1']['n'] if 'l1' in row else row['fire']['n']} | "
          + " | ".join(cells) + " |")
    w("")
    w(f"(Methods below `fire_lf01` are the defaults investigation, run on the first {cfg['investigate_splits']} "
      "splits of every dataset only; 'vs fire' compares with the main configuration on the same splits.)\n")

    w("## Per dataset: mean test MSE (standardized y), < 15 rules, depth 3\n")
    main_cols = ["fire", "mcp", "fire_strong", "fire_lf01", "l1", "rulefit", "forest"]
    main_cols = [c for c in main_cols if c in s["methods"]]
    w("| dataset | " + " | ".join(main_cols) + " | FIRE / forest - 1 |")
    w("|---|" + "---|" * (len(main_cols) + 1))
    for name in s["datasets"]:
        row = s["per_dataset"][name]
        w(f"| {name} | " + " | ".join(f"{row[c]['test']:.3f}" for c in main_cols)
          + f" | {_pct(s['near_forest'][name])} |")
    w("")
    w("Mean rules / mean antecedents at that step (max rules over splits in brackets):\n")
    cnt_cols = [c for c in main_cols if c != "forest"]
    w("| dataset | " + " | ".join(cnt_cols) + " |")
    w("|---|" + "---|" * len(cnt_cols))
    for name in s["datasets"]:
        row = s["per_dataset"][name]
        cells = []
        for c in cnt_cols:
            a = row[c]["antecedents"]
            cells.append(f"{row[c]['rules']:.1f} ({row[c]['max_rules']}) / {'-' if a is None else f'{a:.1f}'}")
        w(f"| {name} | " + " | ".join(cells) + " |")
    w("")

    w("## Fusion vs MCP only at the same size (best validation step with 10-15 rules, depth 3)\n")
    w(f"MCP only: {s['band']['mcp']['mean_antecedents']:.1f} antecedents on average.\n")
    w("| method | pairs | mean antecedents | median antecedent reduction vs MCP | median test-error change vs MCP |")
    w("|---|---|---|---|---|")
    for m, row in s["band"].items():
        if m == "mcp":
            continue
        ma = row["mean_antecedents"]
        w(f"| {m}: {LABELS.get(m, m)} | {row['pairs']} | {'-' if ma is None else f'{ma:.1f}'} | "
          f"{_pct(row['median_antecedent_reduction'])} | {_pct(row['median_error_increase'])} |")
    w("")

    if s.get("polish"):
        w("## Refit experiment: least-squares polish of the selected rules (depth 3)\n")
        w("Each candidate step's support is refitted by unpenalized least squares (intercept included) and "
          "the step re-selected on the refitted validation error; not a solver feature (yet).\n")
        w("| method | pairs | median gain from the refit | decrease vs refitted L1 | decrease vs imodels RuleFit | "
          "10-15 rules: antecedents vs refitted MCP | 10-15 rules: test error vs refitted MCP |")
        w("|---|---|---|---|---|---|---|")
        for m, row in s["polish"].items():
            w(f"| {m} + refit | {row['pairs']} | {_pct(row['gain_from_refit'])} | {_pct(row['dec_vs_l1_polished'])} | "
              f"{_pct(row['dec_vs_rulefit'])} | {_pct(row['band_antecedent_reduction_vs_mcp'])} fewer | "
              f"{_pct(row['band_error_change_vs_mcp'])} |")
        w("")

    w(f"## Rule-budget sweep\n\n![budget sweep]({plot_name})\n")
    w("Median (datasets x splits) of test MSE / the same forest's test MSE at each rule budget:\n")
    w("```\n" + sweep_table(s) + "\n```\n")
    w("Median percent decrease of test error versus the L1 path at the same budget (fractions):\n")
    w("```\n" + sweep_table(s, "dec_vs_l1") + "\n```\n")
    w("Mean antecedents of the selected step:\n")
    w("```\n" + sweep_table(s, "antecedents") + "\n```\n")

    w("## Path cost\n")
    w("| method | mean seconds per path | steps not converged (depth 3, all splits) |")
    w("|---|---|---|")
    for m, sec in s["path_seconds"].items():
        w(f"| {m} | {sec:.2f} | {s['not_converged_steps'].get(m, '-')} |")
    w("")
    extra = report.get("notes")
    if extra:
        w(extra)
    return "\n".join(out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="2 datasets, 1 split, 100 trees (< 2 min)")
    parser.add_argument("--datasets", nargs="*", default=None)
    parser.add_argument("--splits", type=int, default=None)
    parser.add_argument("--trees", type=int, default=None)
    parser.add_argument("--no-investigate", action="store_true")
    parser.add_argument("--out", default=None, help="markdown report (default bench/results/quality.md; "
                        "--quick: a temporary directory)")
    parser.add_argument("--json", default=None, help="also dump the raw records here")
    parser.add_argument("--notes", default=None, help="markdown file appended to the report")
    parser.add_argument("--render", default=None, metavar="JSON",
                        help="no evaluation: re-render the report and plot from a --json dump")
    args = parser.parse_args(argv)

    cfg = Config()
    if args.quick:
        cfg = Config(datasets=QUICK_DATASETS, n_splits=1, n_trees=100, rulefit_trees=50, rulefit_grid=(5, 14),
                     investigate=False)
    if args.datasets:
        cfg.datasets = tuple(args.datasets)
    if args.splits is not None:
        cfg.n_splits = args.splits
    if args.trees is not None:
        cfg.n_trees = args.trees
    if args.no_investigate:
        cfg.investigate = False
    if args.out:
        out = Path(args.out)
    elif args.quick:  # smoke runs never overwrite the committed report
        out = Path(tempfile.gettempdir()) / "fire_quality_quick" / "quality.md"
    else:
        out = RESULTS_DIR / "quality.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    plot = out.with_name(out.stem + "_budget.png")  # quality.md -> quality_budget.png

    if args.render:
        report = json.loads(Path(args.render).read_text())
        report["summary"] = summarize(report["records"], Config(**{
            k: (tuple(v) if isinstance(v, list) else v) for k, v in report["config"].items()
            if k in Config.__dataclass_fields__ and k != "data_dir"}))
    else:
        report = evaluate(cfg, log=lambda msg: print(msg, flush=True))
    if args.notes:
        report["notes"] = Path(args.notes).read_text()
    command = "PYTHONPATH=. python bench/quality.py" + (" --quick" if args.quick else "")
    if args.render:
        command = report.get("command", command)
    report["command"] = command
    plot_sweep(report["summary"], plot)
    out.write_text(render_markdown(report, plot.name, command))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1, default=float))
    t = report["summary"]["targets"]
    print(json.dumps(t, indent=1, default=float))
    print(f"wrote {out} and {plot} in {report['seconds']:.0f}s")


if __name__ == "__main__":
    main()
