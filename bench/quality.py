"""Rule quality of FIRE against the L1 path, imodels RuleFit, SIRUS, GLRM and the full forest (issues 4 and 9).

Protocol (the paper's, sections 5-6 and its supplement):
- the seven datasets in ../shared/datasets (target = last column; abalone's categorical ``Sex`` one-hot);
- ``--splits`` repeated random train / validation / test splits (50 / 16 / 34, seeded), y standardized on
  the training split, every error a test MSE on that scale;
- a RandomForestRegressor of 500 trees, max_depth=3, max_features='sqrt' (seeded) for the headline
  comparison, plus depth 5 and 7 for the rule-budget sweep;
- every method tuned on the validation split (the step of its path with the lowest validation MSE within
  the budget; imodels' max_rules on a small grid) and scored once on test.

Methods on the depth-3 forest (all paths: n_lambdas=50, tol=1e-4, early stop at ``--path-rules`` rules),
``MAIN_METHODS``: the library's defaults (``fire``), the paper's MCP only (``mcp``: leaf-value columns, no
min_support, no polish), the documented readable setting (``fire_readable``, ``solver.spec.READABLE``), the
paper's section-5 fixed lambda_f=0.1 and the L1 path (RuleFit's problem on the same forest); rule learners with
their own trees (``BASELINES``): imodels RuleFit, SIRUS (``sirus``), GLRM with debiasing (``aix360``, first
split only); and the full forest. ``INVESTIGATE_METHODS`` (first ``investigate_splits`` splits;
``--no-investigate`` skips them) vary one default at a time: polish, min_support, scaling, fusion strength.

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

from solver import TableEncoding, TreeEnsemble, fit_path, leaf_matrix  # noqa: E402
from solver.spec import READABLE  # noqa: E402

DATA_DIR = REPO_ROOT.parent / "shared" / "datasets"
RESULTS_DIR = REPO_ROOT / "bench" / "results"
DATASETS = ("abalone", "california_housing", "elevators", "kin8nm", "stock", "wind", "wine_quality")
QUICK_DATASETS = ("stock", "abalone")
BUDGETS = (5, 10, 15, 25, 50)
HEADLINE_BUDGET = 14  # "fewer than 15 rules"
BAND = (10, 15)  # the fusion-vs-MCP antecedent comparison: best step with 10..15 rules

# name -> fit_path keyword arguments (depth-3 forest) on top of PathSpec's defaults; "path_rules" stops the path
# earlier than Config.path_rules
PAPER = dict(scaling="leaf_value", min_support=0, polish=False)  # the problem as the paper states it
MAIN_METHODS = {
    "fire": dict(),  # the library's defaults
    "mcp": dict(PAPER, fusion_ratio=0.0),  # the paper's "MCP only"
    "fire_readable": dict(READABLE),  # the documented readable setting
    "fire_lf01": dict(PAPER, lambda_f=0.1, path_rules=16),
    "l1": dict(PAPER, penalty="l1", fusion_ratio=0.0),  # RuleFit's selection problem on the same forest
}
# the defaults investigation only needs the < 15 rule and 10-15 rule steps: paths stop after 16 rules
INVESTIGATE_METHODS = {
    "fire_paper": dict(PAPER, fusion_ratio=0.5, path_rules=16),
    "fire_no_polish": dict(polish=False, path_rules=16),
    "fire_ms0": dict(min_support=0, path_rules=16),
    "fire_ms02": dict(min_support=0.02, path_rules=16),
    "mcp_unit": dict(fusion_ratio=0.0, path_rules=16),
    "fire_r075": dict(fusion_ratio=0.75, path_rules=16),
    "fire_r1": dict(fusion_ratio=1.0, path_rules=16),
    "fire_leaf_r2_polish": dict(PAPER, fusion_ratio=2.0, polish=True, path_rules=16),
    "fire_leaf_r2": dict(PAPER, fusion_ratio=2.0, path_rules=16),
}
SWEEP_METHODS = ("fire", "mcp", "fire_readable", "l1")
BASELINES = ("rulefit", "sirus", "glrm")  # rule learners with their own trees, run once per split
# (target, competitor, goal): the median test-error decrease of the defaults ("fire") under 15 rules; the paper's
# medians are 46% vs RuleFit on the same forest (our L1 path), 18% vs SIRUS, 24% vs GLRM with debiasing
TARGETS = (
    ("vs_l1", "l1", 0.30),
    ("vs_rulefit", "rulefit", 0.30),
    ("vs_sirus", "sirus", 0.18),
    ("vs_glrm", "glrm", 0.24),
    ("vs_mcp", "mcp", 0.0),
)
TARGET_LABELS = {
    "vs_l1": "L1 path (same forest)",
    "vs_rulefit": "imodels RuleFit",
    "vs_sirus": "SIRUS",
    "vs_glrm": "GLRM with debiasing",
    "vs_mcp": "MCP only (default no worse)",
}
COMPARISONS = ("l1", "rulefit", "sirus", "glrm", "mcp", "forest", "fire")
COLORS = {
    "fire": "tab:blue",
    "fire_ms0": "tab:cyan",
    "mcp": "tab:orange",
    "fire_readable": "tab:green",
    "l1": "tab:red",
}
# depths 5 and 7 (time budget): the defaults with and without min_support, the paper's MCP only and L1
DEEP_SWEEP_METHODS = {
    "fire": MAIN_METHODS["fire"],
    "fire_ms0": dict(min_support=0),
    "mcp": MAIN_METHODS["mcp"],
    "l1": MAIN_METHODS["l1"],
}
LABELS = {
    "fire": "FIRE defaults (unit scaling, fusion 0.5 lambda_s, min_support 1%, polish)",
    "mcp": "MCP only, as in the paper (leaf-value columns, no min_support, no polish)",
    "fire_readable": "FIRE readable (defaults with fusion_ratio=1)",
    "fire_lf01": "paper sec. 5: leaf-value columns, fixed lambda_f=0.1",
    "l1": "L1 path, same forest (RuleFit problem)",
    "rulefit": "imodels RuleFitRegressor",
    "sirus": "SIRUS (sirus package)",
    "glrm": "GLRM with debiasing (aix360)",
    "forest": "full forest",
    "fire_paper": "FIRE as in the paper (leaf-value columns, 0.5 lambda_s, no min_support, no polish)",
    "fire_no_polish": "defaults without polish",
    "fire_ms0": "defaults with min_support=0",
    "fire_ms02": "defaults with min_support=0.02",
    "mcp_unit": "defaults without fusion (MCP, unit scaling, min_support, polish)",
    "fire_r075": "defaults with fusion 0.75 lambda_s",
    "fire_r1": "defaults with fusion 1 lambda_s",
    "fire_leaf_r2_polish": "leaf-value columns, fusion 2 lambda_s + polish",
    "fire_leaf_r2": "leaf-value columns, fusion 2 lambda_s (issue 9's 'strong fusion')",
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
    sirus_trees: int = 500  # SIRUS grows its own forest; its default grows until stable (minutes)
    glrm_splits: int = 1  # GLRM's column generation takes ~30-60 s per fit: first split(s) only,
    glrm_max_rows: int = 1500  # on at most this many training rows,
    glrm_lambda0: float = 0.2  # with this rule penalty (lambda1 = lambda0 / 10): about 10-15 terms
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
    return perm[:n_train], perm[n_train : n_train + n_val], perm[n_train + n_val :]


def _import_rulefit():
    from imodels import RuleFitRegressor  # needs `six`, which imodels does not declare: our test extra does

    return RuleFitRegressor


def _mse(a, b):
    return float(np.mean((np.asarray(a) - np.asarray(b)) ** 2))


def run_path(kwargs, forest, mats, y_train, y_val, y_test, cfg, budgets):
    """One path; per budget the validation-selected step: rules, antecedents, val and test MSE."""
    kwargs = dict(kwargs)
    tr, va, te = mats
    kwargs.setdefault("n_lambdas", cfg.n_lambdas)
    path_rules = kwargs.pop("path_rules", cfg.path_rules)
    started = time.perf_counter()
    result = fit_path(
        tr,
        y_train,
        tol=cfg.tol,
        max_rules=path_rules,
        val_matrix=va,
        y_val=y_val,
        leaf_ancestors=forest.leaf_ancestors,
        **kwargs,
    )
    seconds = time.perf_counter() - started
    out = {
        "seconds": seconds,
        "n_steps": len(result.steps),
        "stop": result.stop_reason,
        "not_converged": int(sum(not s.converged for s in result.steps)),
        "budgets": {},
    }
    test_cache = {}

    def record(k):
        if k not in test_cache:
            step = result.steps[k]
            pred = result.intercepts[k] + te.matvec(result.coef(k))
            test_cache[k] = {
                "step": k,
                "rules": step.n_rules,
                "antecedents": step.n_antecedents,
                "trees": step.n_trees,
                "val": step.val_loss,
                "test": _mse(pred, y_test),
            }
        return test_cache[k]

    for budget in budgets:
        out["budgets"][str(budget)] = record(result.select(max_rules=budget))
    band = [s for s in result.steps if BAND[0] <= s.n_rules <= BAND[1]]
    out["band"] = record(min(band, key=lambda s: (s.val_loss, s.index)).index) if band else None
    return out


def run_rulefit(X, y, idx, seed, cfg):
    """imodels RuleFit (its own trees, include_linear default), max_rules on a grid, <= 14 terms."""
    RuleFitRegressor = _import_rulefit()
    tr, va, te = idx
    best, tried = None, []
    started = time.perf_counter()
    for max_rules in cfg.rulefit_grid:
        model = RuleFitRegressor(n_estimators=cfg.rulefit_trees, max_rules=max_rules, cv=False, random_state=seed)
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
        entry = {
            "max_rules": max_rules,
            "terms": n_terms,
            "linear": int(nonzero[:n_features].sum()),
            "conditions": n_conditions,
            "val": val,
        }
        tried.append(entry)
        if n_terms <= HEADLINE_BUDGET and (best is None or val < best[0]["val"]):
            best = (entry, model)
    if best is None:  # nothing under budget: report the smallest, flagged
        entry = dict(tried[0], over_budget=True)
        model = RuleFitRegressor(
            n_estimators=cfg.rulefit_trees, max_rules=cfg.rulefit_grid[0], cv=False, random_state=seed
        ).fit(X[tr], y[tr])
        best = (entry, model)
    entry, model = best
    return dict(entry, test=_mse(model.predict(X[te]), y[te]), seconds=time.perf_counter() - started, tried=tried)


def run_sirus(X, y, idx, seed, cfg):
    """SIRUS (the ``sirus`` package): its own stable rules from ``cfg.sirus_trees`` depth-2 trees, 14 rules."""
    from sirus import SirusRegressor

    tr, _, te = idx
    started = time.perf_counter()
    model = SirusRegressor(num_rules=HEADLINE_BUDGET, num_trees=cfg.sirus_trees, random_state=seed, n_jobs=cfg.n_jobs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(X[tr], y[tr])
    used = [rule for rule, weight in zip(model.rules_, model.rule_weights_) if weight != 0]
    return {
        "terms": len(used),
        "conditions": sum(len(rule.conditions) for rule in used),
        "test": _mse(model.predict(X[te]), y[te]),
        "seconds": time.perf_counter() - started,
    }


def run_glrm(X, y, idx, cfg):
    """GLRM with debiasing (aix360 LinearRuleRegression, debias=True) on at most ``cfg.glrm_max_rows`` rows."""
    from aix360.algorithms.rbm import FeatureBinarizer, LinearRuleRegression

    tr, _, te = idx
    tr = tr[: cfg.glrm_max_rows]
    columns = [f"x{j}" for j in range(X.shape[1])]
    started = time.perf_counter()
    binarizer = FeatureBinarizer(negations=True)
    model = LinearRuleRegression(lambda0=cfg.glrm_lambda0, lambda1=cfg.glrm_lambda0 / 10, debias=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(binarizer.fit_transform(pd.DataFrame(X[tr], columns=columns)), y[tr])
        test = _mse(model.predict(binarizer.transform(pd.DataFrame(X[te], columns=columns))), y[te])
    terms = [rule for rule in model.explain()["rule"] if rule != "(intercept)"]
    return {
        "terms": len(terms),
        "conditions": sum(rule.count(" AND ") + 1 for rule in terms),
        "test": test,
        "over_budget": len(terms) > HEADLINE_BUDGET,
        "seconds": time.perf_counter() - started,
    }


def run_split(name, X, y, seed, cfg, log):
    tr, va, te = split_indices(len(y), seed)
    if cfg.max_rows is not None:
        tr, va, te = tr[: cfg.max_rows // 2], va[: cfg.max_rows // 6], te[: cfg.max_rows // 3]
    mean, std = y[tr].mean(), y[tr].std()
    ys = (y - mean) / std
    record = {"dataset": name, "split": seed, "n_train": len(tr), "depths": {}}
    for depth in cfg.depths:
        started = time.perf_counter()
        rf = RandomForestRegressor(
            n_estimators=cfg.n_trees, max_depth=depth, max_features="sqrt", random_state=seed, n_jobs=cfg.n_jobs
        ).fit(X[tr], ys[tr])
        forest = TreeEnsemble.from_sklearn(rf)
        mats = tuple(leaf_matrix(forest, X[i]) for i in (tr, va, te))
        fit_seconds = time.perf_counter() - started
        entry = {
            "forest": {
                "test": _mse(forest.predict(X[te]), ys[te]),
                "val": _mse(forest.predict(X[va]), ys[va]),
                "rules": forest.n_leaves,
                "seconds": fit_seconds,
            },
            "methods": {},
        }
        if depth == 3:
            methods = dict(MAIN_METHODS)
            if cfg.investigate and seed < cfg.investigate_splits:
                methods.update(INVESTIGATE_METHODS)
        else:
            methods = DEEP_SWEEP_METHODS
        for method, kwargs in methods.items():
            entry["methods"][method] = run_path(
                kwargs, forest, mats, ys[tr], ys[va], ys[te], cfg, (HEADLINE_BUDGET, *BUDGETS)
            )
        record["depths"][str(depth)] = entry
        log(
            f"  {name} split {seed} depth {depth}: forest {fit_seconds:.1f}s, paths "
            f"{sum(m['seconds'] for m in entry['methods'].values()):.1f}s"
        )
    record["rulefit"] = run_rulefit(X, ys, (tr, va, te), seed, cfg)
    record["sirus"] = run_sirus(X, ys, (tr, va, te), seed, cfg)
    if seed < cfg.glrm_splits:
        record["glrm"] = run_glrm(X, ys, (tr, va, te), cfg)
    log(
        f"  {name} split {seed} baselines: "
        + ", ".join(f"{m} {record[m]['seconds']:.1f}s" for m in BASELINES if m in record)
    )
    return record


def _solver_version():
    """Last commit touching solver/ plus '+dirty' when solver/ has uncommitted changes (None without git)."""
    import subprocess

    try:
        commit = subprocess.run(
            ["git", "log", "-1", "--format=%h", "--", "solver"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "solver"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10
        ).stdout.strip()
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
    report = {
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in cfg.__dict__.items()},
        "records": records,
        "seconds": time.perf_counter() - started,
        "solver_version": solver_version,
    }
    report["summary"] = summarize(records, cfg)
    return report


# ----------------------------------------------------------------------------------------------------- summary


def _headline(rec, method):
    """Test MSE, rules, antecedents of ``method`` at the < 15 rule budget on the depth-3 forest."""
    if method in BASELINES:
        r = rec[method]
        return {"test": r["test"], "rules": r["terms"], "antecedents": r["conditions"]}
    d3 = rec["depths"]["3"]
    if method == "forest":
        return {"test": d3["forest"]["test"], "rules": d3["forest"]["rules"], "antecedents": None}
    b = d3["methods"][method]["budgets"][str(HEADLINE_BUDGET)]
    return {"test": b["test"], "rules": b["rules"], "antecedents": b["antecedents"]}


def _has(rec, method):
    return method == "forest" or method in rec or method in rec["depths"]["3"]["methods"]


def _decrease(fire, comp):
    return (comp - fire) / comp if comp > 0 else 0.0


def summarize(records, cfg):
    datasets = list(dict.fromkeys(r["dataset"] for r in records))
    depth3_methods = list(dict.fromkeys(m for r in records for m in r["depths"]["3"]["methods"]))
    headline_methods = depth3_methods + [m for m in BASELINES if any(m in r for r in records)] + ["forest"]
    per_dataset = {}
    for name in datasets:
        recs = [r for r in records if r["dataset"] == name]
        per_dataset[name] = {}
        for m in headline_methods:
            rows = [_headline(r, m) for r in recs if _has(r, m)]
            ants = [x["antecedents"] for x in rows if x["antecedents"] is not None]
            per_dataset[name][m] = {
                "test": float(np.mean([x["test"] for x in rows])),
                "test_sd": float(np.std([x["test"] for x in rows])),
                "rules": float(np.mean([x["rules"] for x in rows])),
                "max_rules": int(max(x["rules"] for x in rows)),
                "antecedents": float(np.mean(ants)) if ants else None,
            }
    # median percent decrease of FIRE's error (and every depth-3 variant's) vs each competitor
    decreases = {}
    for fire_m in depth3_methods:
        decreases[fire_m] = {}
        for comp in COMPARISONS:
            vals = [
                _decrease(_headline(r, fire_m)["test"], _headline(r, comp)["test"])
                for r in records
                if _has(r, fire_m) and _has(r, comp)
            ]
            if comp == fire_m or not vals:
                continue
            decreases[fire_m][comp] = {
                "median": float(np.median(vals)),
                "q25": float(np.percentile(vals, 25)),
                "q75": float(np.percentile(vals, 75)),
                "n": len(vals),
            }
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
        band[fused] = {
            "pairs": pairs,
            "median_antecedent_reduction": float(np.median(ant_red)) if ant_red else None,
            "median_error_increase": float(np.median(err_inc)) if err_inc else None,
            "mean_antecedents": float(
                np.mean(
                    [
                        r["depths"]["3"]["methods"][fused]["band"]["antecedents"]
                        for r in records
                        if _has(r, fused) and r["depths"]["3"]["methods"][fused]["band"]
                    ]
                )
            )
            if pairs
            else None,
        }
    band["mcp"] = {
        "mean_antecedents": float(
            np.mean(
                [
                    r["depths"]["3"]["methods"]["mcp"]["band"]["antecedents"]
                    for r in records
                    if r["depths"]["3"]["methods"]["mcp"]["band"]
                ]
            )
        )
    }
    # within 15% of the full forest (dataset means)
    near_forest = {
        name: per_dataset[name]["fire"]["test"] / per_dataset[name]["forest"]["test"] - 1.0 for name in datasets
    }
    # rule-budget sweep: per depth, method, budget: median over datasets x splits of test / forest test,
    # and median decrease vs L1 at that budget
    sweep = {}
    for depth in cfg.depths:
        sweep[str(depth)] = {}
        for m in SWEEP_METHODS if depth == 3 else DEEP_SWEEP_METHODS:
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
                sweep[str(depth)][m][str(budget)] = {
                    "rel_forest": float(np.median(rel)),
                    "dec_vs_l1": float(np.median(dec)),
                    "rules": float(np.mean(rules)),
                    "antecedents": float(np.mean(ants)),
                }
    timing = {}
    for r in records:
        for e in r["depths"].values():
            for m, v in e["methods"].items():
                timing.setdefault(m, []).append(v["seconds"])
    nonconv = {
        m: int(sum(r["depths"]["3"]["methods"][m]["not_converged"] for r in records if _has(r, m)))
        for m in depth3_methods
    }
    fire_vs = decreases["fire"]
    best_fused = band.get("fire_readable", {})
    targets = {
        name: {"value": fire_vs[comp]["median"], "goal": goal, "met": fire_vs[comp]["median"] >= goal}
        for name, comp, goal in TARGETS
        if comp in fire_vs
    }
    targets.update(
        {
            "fusion_antecedents": {
                "reduction": best_fused.get("median_antecedent_reduction"),
                "error_increase": best_fused.get("median_error_increase"),
                "met": bool(
                    best_fused.get("median_antecedent_reduction") is not None
                    and best_fused["median_antecedent_reduction"] >= 0.30
                    and best_fused["median_error_increase"] <= 0.05
                ),
            },
            "near_forest": {
                "within": sum(v <= 0.15 for v in near_forest.values()),
                "of": len(near_forest),
                "met": sum(v <= 0.15 for v in near_forest.values()) * 2 >= len(near_forest),
            },
        }
    )
    return {
        "datasets": datasets,
        "methods": headline_methods,
        "per_dataset": per_dataset,
        "decreases": decreases,
        "band": band,
        "near_forest": near_forest,
        "sweep": sweep,
        "path_seconds": {m: float(np.mean(v)) for m, v in timing.items()},
        "not_converged_steps": nonconv,
        "targets": targets,
    }


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
            ax.plot(
                BUDGETS, [row[str(b)]["rel_forest"] for b in BUDGETS], marker="o", label=LABELS[m], color=COLORS.get(m)
            )
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
    w("# FIRE rule quality (issues 4 and 9)\n")
    w(
        f"Generated by `{command}` in {report['seconds'] / 60:.1f} min on this 2-core machine (shared with other "
        f"jobs); solver at commit `{report.get('solver_version') or 'unknown'}`.\n"
    )
    w("## Setup\n")
    w(f"- Datasets: {', '.join(s['datasets'])} (target = last column; abalone `Sex` one-hot).")
    w(
        f"- {cfg['n_splits']} seeded random splits each, train/validation/test 50/16/34; y standardized on "
        "train; all errors are test MSE on that scale."
    )
    w(
        f"- RandomForestRegressor({cfg['n_trees']} trees, max_features='sqrt', seeded), depth 3 for the "
        f"headline; depths {', '.join(map(str, cfg['depths']))} for the budget sweep."
    )
    w(
        f"- Paths: `fit_path`, n_lambdas={cfg['n_lambdas']}, lambda_min_ratio=1e-3, tol={cfg['tol']}, early "
        f"stop once a step passes {cfg['path_rules']} rules; each method takes the step with the lowest "
        "validation MSE among steps with at most 14 rules (< 15), scored once on test."
    )
    w(
        f"- imodels RuleFitRegressor: {cfg['rulefit_trees']} trees of its own (tree_size 4, linear terms "
        f"included as RuleFit does), cv=False, max_rules in {list(cfg['rulefit_grid'])} chosen on validation "
        "among fits with at most 14 non-zero terms (rules + linear terms); its 'antecedents' are the summed "
        "conditions of its rules (no sharing), as for SIRUS and GLRM."
    )
    w(
        f"- SIRUS (`sirus` package, SirusRegressor): num_rules=14, {cfg.get('sirus_trees')} trees (its default "
        "grows trees until the rule set is stable, minutes per fit), rules aggregated by its non-negative ridge."
    )
    w(
        f"- GLRM with debiasing (aix360 LinearRuleRegression, debias=True, FeatureBinarizer with negations): "
        f"lambda0={cfg.get('glrm_lambda0')}, lambda1=lambda0/10, on the first {cfg.get('glrm_splits')} split(s) "
        f"of each dataset and at most {cfg.get('glrm_max_rows')} training rows (column generation takes 30-90 s "
        "per fit on this machine); its terms are rules and linear terms."
    )
    w(
        "- Rules = non-zero leaf weights; antecedents = distinct internal nodes the selected leaves need "
        "(`TreeEnsemble.leaf_ancestors` / `count_antecedents`).\n"
    )

    w(f"## Headline ({cfg['n_trees']} trees of depth 3, < 15 rules)\n")
    w("| target | goal | result | met |")
    w("|---|---|---|---|")
    for name, _, goal in TARGETS:
        if name in t:
            w(
                f"| FIRE defaults: median test-error decrease vs {TARGET_LABELS[name]} | >= {_pct(goal)} | "
                f"{_pct(t[name]['value'])} | {'yes' if t[name]['met'] else '**no**'} |"
            )
    fusion = t["fusion_antecedents"]
    w(
        f"| readable setting vs MCP only, 10-15 rules: fewer antecedents at <= 5% more error | >= 30% fewer | "
        f"{_pct(fusion['reduction'])} fewer, error {_pct(fusion['error_increase'])} | "
        f"{'yes' if fusion['met'] else '**no**'} |"
    )
    w(
        f"| best-15-rule FIRE within 15% of the full forest | >= half the datasets | "
        f"{t['near_forest']['within']} of {t['near_forest']['of']} | {'yes' if t['near_forest']['met'] else '**no**'} |"
    )
    w("")
    w(
        "Median percent decrease of test error, (err_comp - err_method) / err_comp, over datasets x splits "
        "(IQR in brackets):\n"
    )
    comps = [c for c in COMPARISONS if any(c in row for row in s["decreases"].values())]
    w("| method | pairs | " + " | ".join(f"vs {c}" for c in comps) + " |")
    w("|---|---|" + "---|" * len(comps))
    for m, row in s["decreases"].items():
        cells = [
            f"{_pct(row[c]['median'])} [{_pct(row[c]['q25'])}, {_pct(row[c]['q75'])}]" if c in row else "-"
            for c in comps
        ]
        w(
            f"| {m}: {LABELS.get(m, m)} | {row['l1']['n'] if 'l1' in row else row['fire']['n']} | "
            + " | ".join(cells)
            + " |"
        )
    w("")
    w(
        f"(Methods below `fire_lf01` are the defaults investigation, run on the first {cfg['investigate_splits']} "
        "splits of every dataset only; 'vs fire' compares with the main configuration on the same splits.)\n"
    )

    w("## Per dataset: mean test MSE (standardized y), < 15 rules, depth 3\n")
    main_cols = [*MAIN_METHODS, *BASELINES, "forest"]
    main_cols = [c for c in main_cols if c in s["methods"]]
    w("| dataset | " + " | ".join(main_cols) + " | FIRE / forest - 1 |")
    w("|---|" + "---|" * (len(main_cols) + 1))
    for name in s["datasets"]:
        row = s["per_dataset"][name]
        w(
            f"| {name} | "
            + " | ".join(f"{row[c]['test']:.3f}" for c in main_cols)
            + f" | {_pct(s['near_forest'][name])} |"
        )
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
        w(
            f"| {m}: {LABELS.get(m, m)} | {row['pairs']} | {'-' if ma is None else f'{ma:.1f}'} | "
            f"{_pct(row['median_antecedent_reduction'])} | {_pct(row['median_error_increase'])} |"
        )
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
    parser.add_argument(
        "--out", default=None, help="markdown report (default bench/results/quality.md; --quick: a temporary directory)"
    )
    parser.add_argument("--json", default=None, help="also dump the raw records here")
    parser.add_argument("--notes", default=None, help="markdown file appended to the report")
    parser.add_argument(
        "--render", default=None, metavar="JSON", help="no evaluation: re-render the report and plot from a --json dump"
    )
    args = parser.parse_args(argv)

    cfg = Config()
    if args.quick:
        cfg = Config(
            datasets=QUICK_DATASETS, n_splits=1, n_trees=100, rulefit_trees=50, rulefit_grid=(5, 14), investigate=False
        )
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
        report["summary"] = summarize(
            report["records"],
            Config(
                **{
                    k: (tuple(v) if isinstance(v, list) else v)
                    for k, v in report["config"].items()
                    if k in Config.__dataclass_fields__ and k != "data_dir"
                }
            ),
        )
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
