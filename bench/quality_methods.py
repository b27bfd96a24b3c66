"""The methods ``bench/quality.py`` compares (its docstring gives the protocol) and how each runs: the data and
splits, one path of a FIRE method on its candidate terms, imodels RuleFit, SIRUS and GLRM, and one split of a table
with all of them (``run_split``, a record per split)."""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestRegressor

from solver import PathSpec, TableEncoding, TreeEnsemble, fit_path
from solver.fitting import candidate_terms
from solver.spec import READABLE

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = REPO_ROOT.parent / "shared" / "datasets"
DATASETS = ("abalone", "california_housing", "elevators", "kin8nm", "stock", "wind", "wine_quality")
QUICK_DATASETS = ("stock", "abalone")
BUDGETS = (5, 10, 15, 25, 50)
HEADLINE_BUDGET = 14  # "fewer than 15 terms" (rules + linear terms)
BAND = (10, 15)  # the older fusion-vs-MCP comparison: best step with 10..15 terms

# name -> fit_path keyword arguments (depth-3 forest) on top of PathSpec's defaults; "path_rules" stops the path
# earlier than Config.path_rules
PAPER = dict(scaling="leaf_value", min_support=0, polish=False)  # the problem as the paper states it
NODES_LEN2 = dict(candidates="nodes", max_rule_length=2, linear_terms=True)
MAIN_METHODS = {
    "fire": dict(),  # the library's defaults: leaves + linear terms
    "fire_leaves": dict(candidates="leaves", linear_terms=False),  # the former defaults
    "fire_nodes": dict(candidates="nodes", linear_terms=True),  # every node, uncapped
    "fire_nodes_len2": dict(NODES_LEN2),  # every node, at most two conditions (the capped comparison)
    "fire_nodes_len2_nolinear": dict(NODES_LEN2, linear_terms=False),
    "fire_readable": dict(READABLE),  # the documented readable setting
    "mcp": dict(PAPER, fusion_ratio=0.0, candidates="leaves", linear_terms=False),  # the paper's "MCP only"
    # RuleFit's selection problem on the same forest
    "l1": dict(PAPER, penalty="l1", fusion_ratio=0.0, candidates="leaves", linear_terms=False),
}
# one more setting each, on the first splits only; only the < 15 term and 10-15 term steps: paths stop after 16
INVESTIGATE_METHODS = {
    "fire_nodes_nolinear": dict(candidates="nodes", linear_terms=False, path_rules=16),
    "fire_nodes_len1": dict(candidates="nodes", max_rule_length=1, linear_terms=True, path_rules=16),
    "fire_readable_r1": dict(READABLE, fusion_ratio=1.0, path_rules=16),
}
SWEEP_METHODS = ("fire", "fire_leaves", "fire_nodes", "fire_readable", "mcp", "l1")
BASELINES = ("rulefit", "sirus", "glrm")  # rule learners with their own trees, run once per split
# depths 5 and 7 (time budget): the defaults, every node uncapped and capped at two conditions (short rules from
# deep forests), the paper's MCP only and L1
DEEP_SWEEP_METHODS = {m: MAIN_METHODS[m] for m in ("fire", "fire_nodes", "fire_readable", "mcp", "l1")}


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
    glrm_splits: int = 5  # GLRM on the first splits (its column generation now takes 1-2 s per fit: all five),
    glrm_max_rows: int = 1500  # on at most this many training rows,
    glrm_lambda0: float = 0.2  # with this rule penalty (lambda1 = lambda0 / 10): about 10-15 terms
    investigate: bool = True
    investigate_splits: int = 2  # the defaults investigation runs on the first splits only (time budget)
    n_jobs: int = 2
    max_rows: int | None = None  # subsample rows (smoke tests only)
    data_dir: Path = DATA_DIR
    extra: dict = field(default_factory=dict)


def load_dataset(name, data_dir=DATA_DIR):
    """(X float64, y float64, feature names, TableEncoding): target is the last column, text columns one-hot (the
    library's TableEncoding, as the estimator and the service encode them; it also tells linear terms which
    features are numeric columns)."""
    frame = pd.read_csv(Path(data_dir) / f"{name}.csv.gz")
    target = frame.columns[-1]
    features = frame.drop(columns=[target])
    encoding = TableEncoding.infer(features)
    return (
        encoding.encode_frame(features),
        frame[target].to_numpy(dtype=np.float64),
        encoding.feature_names,
        encoding,
    )


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


def method_spec(kwargs, cfg):
    """(PathSpec of a method's settings, its path_rules): PathSpec's defaults under ``kwargs``."""
    kwargs = dict(kwargs)
    path_rules = kwargs.pop("path_rules", cfg.path_rules)
    kwargs.setdefault("n_lambdas", cfg.n_lambdas)
    return PathSpec().replace(tol=cfg.tol, max_rules=path_rules, **kwargs), path_rules


class CandidateCache:
    """The candidate terms and their train / validation / test matrices of one forest and split, per candidate
    setting (methods that differ only in the penalty share them)."""

    def __init__(self, forest, leaves, X, rows, encoding):
        self.forest, self.leaves, self.X, self.rows, self.encoding = forest, leaves, X, rows, encoding
        self._cache = {}

    def get(self, spec):
        key = (spec.candidates, spec.max_rule_length, spec.linear_terms, spec.linear_quantile)
        if key not in self._cache:
            started = time.perf_counter()
            tr = self.rows[0]
            c = candidate_terms(self.forest, spec, self.X[tr], None, self.encoding)
            mats = tuple(c.matrix(self.leaves[i], self.X[i]) for i in self.rows)
            self._cache[key] = (c, mats, time.perf_counter() - started)
        return self._cache[key]


def step_terms(result, k, candidates):
    """The terms of step ``k`` of a path on ``candidates`` (solver.fitting.candidate_terms): rules (terms: rules +
    linear terms), linear terms, antecedents and the longest rule's conditions."""
    step, coef = result.steps[k], result.coef(k)
    rule_cols = np.flatnonzero(coef[: candidates.n_rules])
    return {
        "rules": step.n_rules,
        "linear": int(np.count_nonzero(coef[candidates.n_rules :])),
        "antecedents": step.n_antecedents,
        "longest": int(candidates.depths[rule_cols].max()) if len(rule_cols) else 0,
    }


def run_path(kwargs, cache, y_train, y_val, y_test, cfg, budgets):
    """One path on the method's candidate terms; per budget the validation-selected step: terms, linear terms,
    antecedents, longest rule, val and test MSE."""
    spec, _ = method_spec(kwargs, cfg)
    c, (tr, va, te), build_seconds = cache.get(spec)
    started = time.perf_counter()
    result = fit_path(
        tr,
        y_train,
        spec,
        val_matrix=va,
        y_val=y_val,
        leaf_ancestors=c.ancestors,
        column_trees=c.trees,
    )
    seconds = time.perf_counter() - started
    out = {
        "seconds": seconds,
        "candidates_seconds": build_seconds,
        "n_candidates": c.n_rules,
        "n_linear_candidates": c.n_linear,
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
                **step_terms(result, k, c),
                "trees": step.n_trees,
                "val": step.val_loss,
                "test": _mse(pred, y_test),
            }
        return test_cache[k]

    for budget in budgets:
        out["budgets"][str(budget)] = record(result.select(max_rules=budget))
    band = [s for s in result.steps if BAND[0] <= s.n_terms <= BAND[1]]  # terms, as the budget counts them
    out["band"] = record(min(band, key=lambda s: (s.val_loss, s.index)).index) if band else None
    return out


def _conditions(rule_text, separator):
    return len(str(rule_text).split(separator))


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
        lengths = [_conditions(r, " and ") for r, nz in zip(rules, nonzero[n_features:]) if nz]
        val = _mse(model.predict(X[va]), y[va])
        entry = {
            "max_rules": max_rules,
            "terms": n_terms,
            "linear": int(nonzero[:n_features].sum()),
            "conditions": int(sum(lengths)),
            "longest": max(lengths, default=0),
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
        "linear": 0,
        "conditions": sum(len(rule.conditions) for rule in used),
        "longest": max((len(rule.conditions) for rule in used), default=0),
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
    # FeatureBinarizer maps a column with two values on the training rows as a binary one, and a third value on the
    # test rows fails its transform (elevators): such a test value takes the nearest training value
    X_test = X[te].copy()
    for j in range(X.shape[1]):
        seen = np.unique(X[tr, j])
        if len(seen) <= 2:
            X_test[:, j] = seen[np.abs(X_test[:, j, None] - seen[None, :]).argmin(axis=1)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(binarizer.fit_transform(pd.DataFrame(X[tr], columns=columns)), y[tr])
        test = _mse(model.predict(binarizer.transform(pd.DataFrame(X_test, columns=columns))), y[te])
    terms = [rule for rule in model.explain()["rule"] if rule != "(intercept)"]
    # a linear term is a bare column name; a rule has comparisons ("x0 <= 1.09 AND x2 > 0.86", "x3 == 1")
    rules = [rule for rule in terms if any(op in rule for op in ("<", ">", "=", " not "))]
    lengths = [_conditions(rule, " AND ") for rule in rules]
    return {
        "terms": len(terms),
        "linear": len(terms) - len(rules),
        "conditions": sum(lengths),
        "longest": max(lengths, default=0),
        "test": test,
        "over_budget": len(terms) > HEADLINE_BUDGET,
        "seconds": time.perf_counter() - started,
    }


def run_split(name, X, y, encoding, seed, cfg, log):
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
        cache = CandidateCache(forest, forest.apply(X), X, (tr, va, te), encoding)
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
        done = {}  # a method whose settings equal one run already (READABLE = fire_nodes_len2) copies its result
        for method, kwargs in methods.items():
            spec, path_rules = method_spec(kwargs, cfg)
            key = (spec, path_rules)
            if key in done:
                entry["methods"][method] = dict(entry["methods"][done[key]], same_as=done[key])
                continue
            entry["methods"][method] = run_path(kwargs, cache, ys[tr], ys[va], ys[te], cfg, (HEADLINE_BUDGET, *BUDGETS))
            done[key] = method
        record["depths"][str(depth)] = entry
        log(
            f"  {name} split {seed} depth {depth}: forest {fit_seconds:.1f}s, paths "
            + ", ".join(
                f"{m} {v['seconds'] + v['candidates_seconds']:.1f}s"
                for m, v in entry["methods"].items()
                if "same_as" not in v
            )
        )
    record["rulefit"] = run_rulefit(X, ys, (tr, va, te), seed, cfg)
    record["sirus"] = run_sirus(X, ys, (tr, va, te), seed, cfg)
    if seed < cfg.glrm_splits:
        try:
            record["glrm"] = run_glrm(X, ys, (tr, va, te), cfg)
        except (ValueError, KeyError) as error:
            # aix360 fails on a table it cannot binarize: the split has no GLRM pair
            record["glrm_error"] = f"{type(error).__name__}: {error}"
            log(f"  {name} split {seed}: GLRM failed ({record['glrm_error'][:120]})")
    log(
        f"  {name} split {seed} baselines: "
        + ", ".join(f"{m} {record[m]['seconds']:.1f}s" for m in BASELINES if m in record)
    )
    return record
