"""Multiclass and count targets, measured (issue 17, points 6 and 7): rule quality and path speed.

Quality (``quality``): the tables of ../shared/datasets/multiclass (loans_grade, hpc_jobs) and
../shared/datasets/counts (doctor_visits, nmes1988_visits); text columns one-hot (``TableEncoding``; a text
column with more distinct values than it one-hot encodes, loans_grade's ``emp_title``, is dropped, as its error
message says), missing values kept (scikit-learn's forests route them). ``--splits`` seeded random splits
train / validation / test 50 / 16 / 34 (stratified by class for the class tables), as bench/quality.py: one
random forest (``--trees`` trees of depth ``--depth``, max_features sqrt; a classifier with K outputs for the class
tables, a regressor on the counts for the count tables) is trained on the training part only, gives M on the
three parts, and every FIRE variant runs on that same M; each picks its step by its own validation loss among
steps with fewer than 15 rules (the validation rows are rows the forest never saw) and is scored once on test.

- classes: FIRE multinomial (the library's defaults: group MCP gamma 1.1, per-class fusion 0.5 lambda_s, unit
  scaling, min_support 1%), MCP alone (``fusion_ratio=0``), the group-L1 path (``penalty="l1"``, no fusion, else
  the same), one-vs-rest binary FIRE (a default logistic path per class on the same M, the 14-rule budget split
  across the classes, each class's step by its own validation log loss, the K sigmoids normalised to sum to 1)
  and the full forest (``predict_proba``). Test log loss, accuracy, rules, antecedents.
- counts: FIRE Poisson (defaults: MCP + fusion), MCP alone, the L1-Poisson path (no fusion), squared-loss FIRE
  (defaults, polish on) read as a rate, and the full forest; a rate at or below ``CLIP`` is raised to ``CLIP``
  before its deviance is taken (squared-loss rules can predict negative counts; the forest's averages can be 0).
  Test mean Poisson deviance, MAE of the rate, rules, antecedents.

Speed (``speed``): one path each, on the columns our default ``scaling="unit"`` solves on (M with unit-norm
columns on the training rows, ``LeafMatrix.unit_columns``; given to every solver as that scipy.sparse matrix and
to ``fit_path`` with ``scaling="leaf_value", min_support=0`` so that all solve the same columns), along the
same lambdas (20 geometric steps from our lambda_max down to 2% of it):

- multinomial on loans_grade (the training rows of split 0, 500 trees of depth 3) and on a synthetic 1e5-row
  5-class table (100 trees of depth 3): our group-L1 path (no fusion) beside scikit-learn's multinomial
  ``LogisticRegression(solver="saga", l1_ratio=1)`` (the 1.8+ spelling of ``penalty="l1"``), warm-started with
  C = 1/lambda (its saga minimises C * sum_i loss_i + ||W||_1, entrywise; ours sum_i loss_i + lambda * sum_j
  ||W_j||_2, per rule); both solutions scored on both objectives; rules = rows of W with any nonzero.
- Poisson on nmes1988_visits (training rows of split 0, 500 trees) and a synthetic 1e5-row count table (100
  trees): our L1-Poisson path beside glum's ``GeneralizedLinearRegressor(family="poisson", l1_ratio=1)`` along
  ``alpha = lambda / n`` (glum minimises sum_i deviance_i / (2 n) + alpha ||w||_1, and deviance / 2 = exp(eta) -
  y eta + a constant: the same problem as ours, sum_i [exp(eta_i) - y_i eta_i] + lambda ||w||_1, divided by n);
  its own path (``alpha_search=True``: warm starts inside glum).

Every path (ours, saga's) stops after the step that passes ``REFERENCE_CAP_S``; the two are compared over the steps
both finished (seconds from the start of each path to the end of the last such step; glum's path is one call,
timed whole). The numba kernels are loaded on a tiny problem first, so that no timing includes it. The library's
default paths (MCP + fusion) are timed on the same lambdas, stopped after the step that passes ``DEFAULT_CAP_S``.
The forests use both cores (``n_jobs=2``); every path runs on one.

    PYTHONPATH=. python bench/classes_and_counts.py [--splits 5] [--trees 500] [--only quality|speed]
        [--tables loans_grade ...] [--loans-rows N] [--json raw.json]

writes bench/results/classes_and_counts.md (``--quick``: 1 split, 100 trees, small tables, into a temporary
directory).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import expit, logsumexp, xlogy
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
from sklearn.metrics import log_loss, mean_absolute_error, mean_poisson_deviance

REPO = Path(__file__).resolve().parents[1]
# bench/ holds a solver.py (the speed benchmark): make sure "solver" is the package, not that script
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != REPO / "bench"]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.machine import cpu_model, solver_commit  # noqa: E402
from solver import TableEncoding, TreeEnsemble, fit_path, leaf_matrix  # noqa: E402
from solver.encoding import DEFAULT_MAX_CATEGORIES  # noqa: E402
from solver.fitting import class_labels  # noqa: E402
from solver.leaf_matrix import count_antecedents  # noqa: E402
from solver.path import class_scores, lambda_grid  # noqa: E402

DATA = REPO.parent / "shared" / "datasets"
RESULTS = REPO / "bench" / "results"
MULTICLASS = ("loans_grade", "hpc_jobs")
COUNTS = ("doctor_visits", "nmes1988_visits")
BUDGET = 14  # "fewer than 15 rules"
CLIP = 0.01  # a predicted rate below this (visits) is raised to it before the deviance is taken
MAX_ROWS = {}  # table -> stratified row subsample per split (--loans-rows); none needed: every table fits the time
REFERENCE_CAP_S = 120  # a path (ours or a reference) stops after the step that passes this
DEFAULT_CAP_S = 60  # our default (MCP + fusion) path, timed beside them, stops after the step that passes this
SPEED_LAMBDAS = 20
SPEED_MIN_RATIO = 0.02

CLASS_METHODS = {  # fit_path keywords on top of loss="multinomial" and the library's defaults
    "fire": {},
    "mcp": {"fusion_ratio": 0.0},
    "l1": {"penalty": "l1", "fusion_ratio": 0.0},
}
COUNT_METHODS = {
    "fire": {"loss": "poisson"},
    "mcp": {"loss": "poisson", "fusion_ratio": 0.0},
    "l1": {"loss": "poisson", "penalty": "l1", "fusion_ratio": 0.0},
    "squared": {"loss": "squared"},
}
LABELS = {
    "fire": "FIRE (defaults: group MCP + per-class fusion)",
    "mcp": "MCP alone (no fusion)",
    "l1": "group-L1 path (no fusion)",
    "ovr": "one-vs-rest binary FIRE (same total budget)",
    "forest": "full forest",
}
COUNT_LABELS = {
    "fire": "FIRE Poisson (defaults: MCP + fusion)",
    "mcp": "Poisson MCP alone (no fusion)",
    "l1": "L1-Poisson path (no fusion)",
    "squared": "squared-loss FIRE as a rate (step by val. MSE)",
    "squared_dev": "squared-loss FIRE as a rate (step by val. deviance)",
    "forest": "full forest",
}
# (table kind, competitor, goal): the median over tables x splits of 1 - FIRE's test loss / the competitor's
TARGETS = (
    ("classes", "l1", 0.10),
    ("counts", "l1", 0.10),
    ("counts", "squared", 0.05),
)


# ----------------------------------------------------------------------------------------------------- data


def load(kind, name):
    """(X, y, classes or None, dropped text columns): the target is the last column."""
    frame = pd.read_csv(DATA / kind / f"{name}.csv.gz")
    features, target = frame.iloc[:, :-1], frame.iloc[:, -1]
    text = features.select_dtypes(exclude="number")
    dropped = [c for c in text.columns if text[c].nunique() > DEFAULT_MAX_CATEGORIES]
    features = features.drop(columns=dropped)
    X = TableEncoding.infer(features).encode_frame(features)
    if kind == "multiclass":
        classes, y = class_labels(target.to_numpy())
        return X, y, classes, dropped
    return X, target.to_numpy(dtype=np.float64), None, dropped


def split(y, seed, stratify, max_rows=None):
    """Train / validation / test 50 / 16 / 34, seeded; per class where ``stratify`` (every class in every part
    that has enough rows); a (stratified) subsample of ``max_rows`` rows first where given."""
    rng = np.random.default_rng(1000 + seed)
    groups = [np.flatnonzero(y == c) for c in np.unique(y)] if stratify else [np.arange(len(y))]
    if max_rows is not None and max_rows < len(y):
        groups = [rng.permutation(g)[: max(3, int(round(len(g) * max_rows / len(y))))] for g in groups]
    parts = ([], [], [])
    for g in groups:
        g = rng.permutation(g)
        a, b = int(round(0.50 * len(g))), int(round(0.66 * len(g)))
        for part, rows in zip(parts, (g[:a], g[a:b], g[b:])):
            part.append(rows)
    return tuple(rng.permutation(np.concatenate(p)) for p in parts)


def softmax(score):
    return np.exp(score - logsumexp(score, axis=1, keepdims=True))


# ----------------------------------------------------------------------------------------------------- quality


def _class_scores(p, y, n_classes):
    return {
        "log_loss": float(log_loss(y, np.clip(p, 1e-15, 1.0), labels=np.arange(n_classes))),
        "accuracy": float(np.mean(p.argmax(axis=1) == y)),
    }


def _count_scores(mu, y):
    clipped = np.maximum(mu, CLIP)
    return {
        "deviance": float(mean_poisson_deviance(y, clipped)),
        "mae": float(mean_absolute_error(y, mu)),
        "clipped": int(np.count_nonzero(mu < CLIP)),
    }


def run_multinomial(kwargs, mats, y, idx, ancestors, n_classes, trees):
    tr, va, te = idx
    started = time.perf_counter()
    result = fit_path(
        mats[0],
        y[tr],
        loss="multinomial",
        max_rules=BUDGET,
        val_matrix=mats[1],
        y_val=y[va],
        leaf_ancestors=ancestors,
        **kwargs,
    )
    k = result.select()
    step = result.steps[k]
    p = softmax(class_scores(mats[2], result.coef(k), result.intercepts[k]))
    return dict(
        _class_scores(p, y[te], n_classes),
        rules=step.n_rules,
        antecedents=step.n_antecedents,
        trees=step.n_trees,
        seconds=time.perf_counter() - started,
        not_converged=int(sum(not s.converged for s in result.steps)),
        steps=len(result.steps),
    )


def class_budgets(y, n_classes):
    """The 14-rule budget split across the classes: 14 // K each, one more for the most frequent 14 % K."""
    order = np.argsort(-np.bincount(y.astype(np.int64), minlength=n_classes), kind="stable")
    budgets = np.full(n_classes, BUDGET // n_classes)
    budgets[order[: BUDGET % n_classes]] += 1
    return budgets


def run_ovr(mats, y, idx, ancestors, n_classes):
    """One default logistic FIRE path per class (class k against the rest) on the same M, each within its share
    of the budget, its step by its own validation log loss; probabilities = the sigmoids normalised."""
    tr, va, te = idx
    started = time.perf_counter()
    budgets = class_budgets(y[tr], n_classes)
    scores, active, rules_sum, not_converged = [], np.zeros(mats[0].shape[1], dtype=bool), 0, 0
    for k in range(n_classes):
        result = fit_path(
            mats[0],
            (y[tr] == k).astype(float),
            loss="logistic",
            max_rules=int(budgets[k]),
            val_matrix=mats[1],
            y_val=(y[va] == k).astype(float),
        )
        j = result.select()
        w = result.coef(j)
        scores.append(result.intercepts[j] + mats[2].matvec(w))
        active |= w != 0
        rules_sum += result.steps[j].n_rules
        not_converged += int(sum(not s.converged for s in result.steps))
    p = expit(np.column_stack(scores))
    p /= p.sum(axis=1, keepdims=True)
    return dict(
        _class_scores(p, y[te], n_classes),
        rules=int(active.sum()),
        rules_sum=rules_sum,
        antecedents=count_antecedents(active, *ancestors),
        budgets=budgets.tolist(),
        seconds=time.perf_counter() - started,
        not_converged=not_converged,
    )


def run_count_path(kwargs, mats, y, idx, ancestors):
    """A Poisson path (rates exp(score)) or a squared-loss path (rates = the clipped score); the squared path also
    gives ``squared_dev``: its step with the lowest validation deviance of the clipped rate within the budget."""
    tr, va, te = idx
    started = time.perf_counter()
    result = fit_path(
        mats[0],
        y[tr],
        max_rules=BUDGET,
        val_matrix=mats[1],
        y_val=y[va],
        leaf_ancestors=ancestors,
        **kwargs,
    )
    seconds = time.perf_counter() - started
    poisson = kwargs["loss"] == "poisson"

    def scored(k):
        score = result.intercepts[k] + mats[2].matvec(result.coef(k))
        step = result.steps[k]
        return dict(
            _count_scores(np.exp(score) if poisson else score, y[te]),
            rules=step.n_rules,
            antecedents=step.n_antecedents,
            trees=step.n_trees,
            seconds=seconds,
            not_converged=int(sum(not s.converged for s in result.steps)),
            steps=len(result.steps),
        )

    out = {"main": scored(result.select())}
    if not poisson:
        eligible = [k for k, s in enumerate(result.steps) if s.n_terms <= BUDGET]  # the budget counts terms

        def val_deviance(k):
            mu = result.intercepts[k] + mats[1].matvec(result.coef(k))
            return mean_poisson_deviance(y[va], np.maximum(mu, CLIP))

        out["by_deviance"] = scored(min(eligible, key=lambda k: (val_deviance(k), k)))
    return out


def quality(cfg, log):
    records = []
    for kind in ("multiclass", "counts"):
        for name in cfg["tables"].get(kind, ()):
            X, y, classes, dropped = load(kind, name)
            for seed in range(cfg["splits"]):
                idx = split(y, seed, kind == "multiclass", cfg["max_rows"].get(name))
                tr, va, te = idx
                started = time.perf_counter()
                Forest = RandomForestClassifier if kind == "multiclass" else RandomForestRegressor
                rf = Forest(
                    n_estimators=cfg["trees"],
                    max_depth=cfg["depth"],
                    max_features="sqrt",
                    random_state=seed,
                    n_jobs=cfg["n_jobs"],
                ).fit(X[tr], y[tr])
                forest = TreeEnsemble.from_sklearn(rf)
                mats = tuple(leaf_matrix(forest, X[i]) for i in idx)
                ancestors = forest.leaf_ancestors
                rec = {
                    "kind": kind,
                    "table": name,
                    "seed": seed,
                    "n_train": len(tr),
                    "n_val": len(va),
                    "n_test": len(te),
                    "n_rows": len(y),
                    "dropped": dropped,
                    "forest_seconds": time.perf_counter() - started,
                }
                internal = forest.n_leaves - forest.n_trees  # binary trees: one internal node fewer than leaves
                if kind == "multiclass":
                    K = len(classes)
                    rec["classes"] = [str(c) for c in classes]
                    rec["forest"] = dict(
                        _class_scores(rf.predict_proba(X[te]), y[te], K), rules=forest.n_leaves, antecedents=internal
                    )
                    for m, kwargs in CLASS_METHODS.items():
                        rec[m] = run_multinomial(kwargs, mats, y, idx, ancestors, K, cfg["trees"])
                    rec["ovr"] = run_ovr(mats, y, idx, ancestors, K)
                    methods, key = (*CLASS_METHODS, "ovr", "forest"), "log_loss"
                else:
                    rec["forest"] = dict(_count_scores(rf.predict(X[te]), y[te]), rules=forest.n_leaves)
                    rec["forest"]["antecedents"] = internal
                    for m, kwargs in COUNT_METHODS.items():
                        out = run_count_path(kwargs, mats, y, idx, ancestors)
                        rec[m] = out["main"]
                        if "by_deviance" in out:
                            rec[f"{m}_dev"] = out["by_deviance"]
                    methods, key = (*COUNT_METHODS, "squared_dev", "forest"), "deviance"
                records.append(rec)
                log(
                    f"{name} split {seed} ({len(tr)} train rows): "
                    + ", ".join(
                        f"{m} {rec[m][key]:.4f} ({rec[m]['rules']} rules, {rec[m].get('seconds', 0):.1f}s)"
                        for m in methods
                    )
                )
    return records


def summarize(records):
    per_table, decreases, targets = {}, {}, {}
    for rec in records:
        per_table.setdefault(rec["table"], []).append(rec)
    metrics = {"multiclass": ("log_loss", "accuracy"), "counts": ("deviance", "mae")}
    tables = {}
    for name, rows in per_table.items():
        kind = rows[0]["kind"]
        methods = [m for m in rows[0] if isinstance(rows[0][m], dict) and "rules" in rows[0][m]]
        keys = (*metrics[kind], "rules", "antecedents", "seconds", "clipped", "rules_sum", "not_converged")
        tables[name] = {
            "kind": kind,
            "n_train": int(np.median([r["n_train"] for r in rows])),
            "n_rows": rows[0]["n_rows"],
            "splits": len(rows),
            "dropped": rows[0]["dropped"],
            "methods": {
                m: {k: float(np.median([r[m][k] for r in rows])) for k in keys if k in rows[0][m] and k != "seconds"}
                | ({"seconds": float(np.mean([r[m]["seconds"] for r in rows]))} if "seconds" in rows[0][m] else {})
                | (
                    {"not_converged_total": int(sum(r[m]["not_converged"] for r in rows))}
                    if "not_converged" in rows[0][m]
                    else {}
                )
                for m in methods
            },
        }
    for kind, comp, goal in TARGETS:
        key = metrics["multiclass" if kind == "classes" else "counts"][0]
        rows = [r for r in records if r["kind"] == ("multiclass" if kind == "classes" else "counts")]
        if not rows:
            continue
        d = [1 - r["fire"][key] / r[comp][key] for r in rows]
        per = {
            name: float(np.median([1 - r["fire"][key] / r[comp][key] for r in rows if r["table"] == name]))
            for name in dict.fromkeys(r["table"] for r in rows)
        }
        targets[f"{kind} vs {comp}"] = {
            "goal": goal,
            "median": float(np.median(d)),
            "per_table": per,
            "pairs": len(d),
            "met": bool(np.median(d) >= goal),
        }
    # the other comparisons, reported beside the targets
    for kind, comps in (("multiclass", ("mcp", "ovr", "forest")), ("counts", ("mcp", "squared_dev", "forest"))):
        key = metrics[kind][0]
        rows = [r for r in records if r["kind"] == kind]
        for comp in comps:
            if rows:
                decreases[f"{kind} vs {comp}"] = {
                    "median": float(np.median([1 - r["fire"][key] / r[comp][key] for r in rows])),
                    "per_table": {
                        name: float(np.median([1 - r["fire"][key] / r[comp][key] for r in rows if r["table"] == name]))
                        for name in dict.fromkeys(r["table"] for r in rows)
                    },
                }
    return {"tables": tables, "targets": targets, "other": decreases}


# ----------------------------------------------------------------------------------------------------- speed


def multinomial_objectives(X, y, W, b, lam):
    """(sum of log losses + lam * sum_j ||W_j||_2 (ours, per rule), the same + lam * sum_jk |W_jk| (saga's / C))."""
    Z = b[None, :] + np.asarray(X @ W)
    loss = float(np.sum(logsumexp(Z, axis=1) - Z[np.arange(len(y)), y.astype(np.int64)]))
    return loss + lam * float(np.linalg.norm(W, axis=1).sum()), loss + lam * float(np.abs(W).sum())


def poisson_objective(X, y, w, b, lam):
    """sum_i [exp(eta_i) - y_i eta_i + y_i log y_i - y_i] + lam ||w||_1, eta = b + X w: our objective plus the
    constant that makes its loss half the Poisson deviance (so that it is positive and relative gaps mean something)."""
    eta = b + X @ w
    return float(np.sum(np.exp(eta) - y * eta + xlogy(y, y) - y) + lam * np.abs(w).sum())


def _unit(M):
    """The columns our default scaling solves on: unit norm on these rows (zero columns stay zero)."""
    return M.unit_columns()[0]


def _synthetic_classes(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 20))
    logits = np.column_stack(
        [
            np.zeros(n),
            1.5 * X[:, 0] - (X[:, 1] > 0.5),
            X[:, 2] * X[:, 3] + 0.5,
            -1.0 * X[:, 0] + 2.0 * (X[:, 4] > 0),
            np.abs(X[:, 5]) - 1.0,
        ]
    )
    u = rng.random(n)[:, None]
    y = (softmax(logits).cumsum(axis=1) < u).sum(axis=1).astype(float)
    return X, np.minimum(y, 4)


def _synthetic_counts(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 20))
    rate = np.exp(0.3 + 0.5 * X[:, 0] - (X[:, 1] > 0.5) + 0.3 * X[:, 2] * X[:, 3])
    return X, rng.poisson(rate).astype(float)


def _speed_cases(trees_real, trees_synthetic, n_synthetic, n_jobs, quick):
    """(name, kind, unit-column LeafMatrix, y) for the four speed cases."""
    cases = []
    for kind, name in (("multiclass", "loans_grade"), ("counts", "nmes1988_visits")):
        X, y, _, _ = load(kind, name)
        tr = split(y, 0, kind == "multiclass", 2000 if quick else None)[0]
        Forest = RandomForestClassifier if kind == "multiclass" else RandomForestRegressor
        rf = Forest(n_estimators=trees_real, max_depth=3, max_features="sqrt", random_state=0, n_jobs=n_jobs)
        rf.fit(X[tr], y[tr])
        cases.append(
            (
                f"{name} ({len(tr):,} training rows, {trees_real} trees of depth 3)",
                "multinomial" if kind == "multiclass" else "poisson",
                _unit(leaf_matrix(TreeEnsemble.from_sklearn(rf), X[tr])),
                y[tr],
            )
        )
    for kind, make in (("multinomial", _synthetic_classes), ("poisson", _synthetic_counts)):
        X, y = make(n_synthetic)
        Forest = RandomForestClassifier if kind == "multinomial" else RandomForestRegressor
        rf = Forest(n_estimators=trees_synthetic, max_depth=3, max_features="sqrt", random_state=0, n_jobs=n_jobs)
        rf.fit(X[:20_000], y[:20_000])
        label = "5-class" if kind == "multinomial" else "count"
        cases.append(
            (
                f"synthetic {label} ({n_synthetic:,} rows, {trees_synthetic} trees of depth 3)",
                kind,
                _unit(leaf_matrix(TreeEnsemble.from_sklearn(rf), X)),
                y,
            )
        )
    order = {"multinomial": 0, "poisson": 1}
    return sorted(cases, key=lambda c: order[c[1]])


def _saga_path(csc, y, lambdas):
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(solver="saga", l1_ratio=1.0, warm_start=True, tol=1e-4, max_iter=1000)
    csr = csc.tocsr()
    solutions, times, started = [], [], time.perf_counter()
    for lam in lambdas:
        if time.perf_counter() - started > REFERENCE_CAP_S:
            break
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # ConvergenceWarning at max_iter: its objective shows it
            model.set_params(C=1.0 / lam).fit(csr, y)
        solutions.append((model.coef_.T.copy(), model.intercept_.copy(), int(np.max(model.n_iter_))))
        times.append(time.perf_counter() - started)
    return solutions, times


def _glum_path(csc, y, lambdas):
    from glum import GeneralizedLinearRegressor

    n = len(y)
    started = time.perf_counter()
    model = GeneralizedLinearRegressor(
        family="poisson", l1_ratio=1.0, alpha=[lam / n for lam in lambdas], alpha_search=True, fit_intercept=True
    )
    model.fit(csc, y)
    seconds = time.perf_counter() - started
    return [(model.coef_path_[k].copy(), float(model.intercept_path_[k])) for k in range(len(lambdas))], seconds


def _timed_path(M, y, cap, **settings):
    """A path that stops after the step that passes ``cap`` seconds: (result, seconds from the call to the end of
    each step)."""
    marks = []
    started = time.perf_counter()

    def stop(step):
        marks.append(time.perf_counter() - started)
        return marks[-1] > cap

    return fit_path(M, y, callback=stop, **settings), marks


def _warm_up(loss):
    """Load the numba kernels of ``loss`` (cached on disk) on a tiny problem, so that no timing includes it."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = rng.integers(0, 3, 300).astype(float) if loss == "multinomial" else rng.poisson(1.0, 300).astype(float)
    Forest = RandomForestClassifier if loss == "multinomial" else RandomForestRegressor
    M = leaf_matrix(TreeEnsemble.from_sklearn(Forest(n_estimators=3, max_depth=2, random_state=0).fit(X, y)), X)
    for settings in ({"penalty": "l1", "fusion_ratio": 0.0}, {}):
        fit_path(M, y, loss=loss, n_lambdas=3, **settings)


def speed(cfg, log):
    out = []
    cases = _speed_cases(
        cfg["speed_trees"], cfg["speed_trees_synthetic"], cfg["speed_rows"], cfg["n_jobs"], cfg["quick"]
    )
    for loss in ("multinomial", "poisson"):
        _warm_up(loss)
    for case, loss, M, y in cases:
        n = len(y)
        csc = M.to_csc()
        base = dict(loss=loss, scaling="leaf_value", min_support=0, polish=False)
        grid = dict(n_lambdas=SPEED_LAMBDAS, lambda_min_ratio=SPEED_MIN_RATIO)
        lasso, marks = _timed_path(M, y, REFERENCE_CAP_S, **base, **grid, penalty="l1", fusion_ratio=0.0)
        lambdas = [float(v) for v in lambda_grid(lasso.lambda_max, SPEED_LAMBDAS, SPEED_MIN_RATIO)]
        default, default_marks = _timed_path(M, y, DEFAULT_CAP_S, **base, lambdas=tuple(lambdas))  # MCP + fusion
        rec = {
            "case": case,
            "loss": loss,
            "n": n,
            "columns": M.shape[1],
            "lambda_max": lasso.lambda_max,
            "ours_steps": len(lasso.steps),
            "ours_s": marks[-1],
            "default_s": default_marks[-1],
            "default_steps": len(default.steps),
            "default_rules": [s.n_rules for s in default.steps],
            "default_not_converged": int(sum(not s.converged for s in default.steps)),
            "ours_not_converged": int(sum(not s.converged for s in lasso.steps)),
        }
        if loss == "multinomial":
            solutions, times = _saga_path(csc, y, lambdas)
            done = min(len(solutions), len(lasso.steps))
            steps = []
            for k in range(done):
                W_s, b_s, it = solutions[k]
                W_o, b_o = lasso.coef(k), lasso.intercepts[k]
                ours_group, ours_entry = multinomial_objectives(csc, y, W_o, b_o, lambdas[k])
                ref_group, ref_entry = multinomial_objectives(csc, y, W_s, b_s, lambdas[k])
                steps.append(
                    {
                        "ratio": lambdas[k] / lasso.lambda_max,
                        "rules_ours": int(np.count_nonzero(np.any(W_o != 0, axis=1))),
                        "rules_ref": int(np.count_nonzero(np.any(W_s != 0, axis=1))),
                        "entries_ours": int(np.count_nonzero(W_o)),
                        "entries_ref": int(np.count_nonzero(W_s)),
                        "ours_group": ours_group,
                        "ref_group": ref_group,
                        "ours_entry": ours_entry,
                        "ref_entry": ref_entry,
                        "ref_iter": it,
                        "ours_s": marks[k],
                        "ref_s": times[k],
                    }
                )
            ref_s = times[done - 1]
            rec.update(reference="scikit-learn saga", ref_steps=len(solutions), ref_total_s=times[-1])
        else:
            solutions, ref_s = _glum_path(csc, y, lambdas)
            done = min(len(solutions), len(lasso.steps))
            steps = []
            for k in range(done):
                w_g, b_g = solutions[k]
                w_o, b_o = lasso.coef(k), float(lasso.intercepts[k])
                steps.append(
                    {
                        "ratio": lambdas[k] / lasso.lambda_max,
                        "rules_ours": int(np.count_nonzero(w_o)),
                        "rules_ref": int(np.count_nonzero(w_g)),
                        "ours_obj": poisson_objective(csc, y, w_o, b_o, lambdas[k]),
                        "ref_obj": poisson_objective(csc, y, w_g, b_g, lambdas[k]),
                        "ours_s": marks[k],
                    }
                )
            rec.update(reference="glum", ref_steps=len(solutions), ref_total_s=ref_s)
            if done < len(solutions):  # glum runs its whole path in one call: no time for a part of it
                ref_s = float("nan")
        mine = marks[done - 1]
        rec.update(steps=steps, done=done, of=len(lambdas), ref_s=ref_s, ours_done_s=mine, speedup=ref_s / mine)
        out.append(rec)
        log(
            f"{case} {loss}: ours {mine:.2f}s ({done} of {len(lambdas)} steps), {rec['reference']} {ref_s:.2f}s, "
            f"x{ref_s / mine:.2f}; defaults (MCP + fusion) {rec['default_steps']} steps in {rec['default_s']:.1f}s"
        )
    return out


# ----------------------------------------------------------------------------------------------------- report


def _pct(x):
    return "n/a" if x is None else f"{100 * x:+.1f}%"


def _machine():
    model = cpu_model(platform.processor() or platform.machine())
    return f"{os.cpu_count()} cores ({model}), {platform.system()}, Python {platform.python_version()}"


def render(report):
    cfg = report["config"]
    out = []
    w = out.append
    w("# Multiclass and count targets: rule quality and path speed (issue 17, points 6 and 7)\n")
    w(
        f"Generated by `{report['command']}` on {report['date']} in {report['seconds'] / 60:.1f} min; machine: "
        f"{report['machine']} (shared with other sessions' jobs: timings are indicative); solver at commit "
        f"`{report['solver_version']}`. The protocol is in the script's docstring.\n"
    )
    if "quality" in report:
        q = report["quality"]
        w("## Quality: targets\n")
        w(
            f"{cfg['splits']} seeded splits per table (train / validation / test 50 / 16 / 34, the forest on train "
            f"only, every method's step by its own validation loss among steps with < 15 rules); "
            f"RandomForest{{Classifier,Regressor}}({cfg['trees']} trees, depth {cfg['depth']}, max_features sqrt), "
            "the same forest for every FIRE variant of a split. Decrease = 1 - FIRE's test loss / the "
            "competitor's, median over tables x splits (per table in brackets).\n"
        )
        w("| target | goal | median decrease (per table) | met |")
        w("|---|---|---|---|")
        names = {
            "classes vs l1": "multiclass: FIRE test log loss below the group-L1 path",
            "counts vs l1": "counts: FIRE Poisson test deviance below the L1-Poisson path",
            "counts vs squared": "counts: FIRE Poisson test deviance below squared-loss FIRE (as a rate)",
        }
        for key, t in q["targets"].items():
            per = ", ".join(f"{n} {_pct(v)}" for n, v in t["per_table"].items())
            w(
                f"| {names[key]} | >= {100 * t['goal']:.0f}% | {_pct(t['median'])} ({per}) | "
                f"{'met' if t['met'] else '**missed**'} |"
            )
        w("")
        w("Other comparisons (same decrease, not targets):\n")
        w("| comparison | median decrease (per table) |")
        w("|---|---|")
        for key, d in q["other"].items():
            kind, comp = key.split(" vs ")
            per = ", ".join(f"{n} {_pct(v)}" for n, v in d["per_table"].items())
            label = (LABELS if kind == "multiclass" else COUNT_LABELS)[comp]
            w(
                f"| {kind}: FIRE's test {'log loss' if kind == 'multiclass' else 'deviance'} below {label} | "
                f"{_pct(d['median'])} ({per}) |"
            )
        w("")
        for name, t in q["tables"].items():
            kind = t["kind"]
            sub = cfg["max_rows"].get(name)
            rows_note = f"{t['n_train']:,} training rows (of {t['n_rows']:,}" + (
                f"; a stratified subsample of {sub:,} rows per split)" if sub and sub < t["n_rows"] else ")"
            )
            drop = ", ".join(t["dropped"])
            drop = f"; dropped text column(s) {drop} (more than 64 distinct values)" if drop else ""
            w(f"### {name}: {rows_note}{drop}\n")
            if kind == "multiclass":
                w("| method | test log loss | accuracy | rules | antecedents | path s (mean) | steps not converged |")
                w("|---|---|---|---|---|---|---|")
                labels = LABELS
                for m, v in t["methods"].items():
                    rules = f"{v['rules']:.0f}"
                    if "rules_sum" in v:
                        rules += f" (sum over classes {v['rules_sum']:.0f})"
                    sec = f"{v['seconds']:.1f}" if "seconds" in v else "-"
                    nc = v.get("not_converged_total", "-")
                    w(
                        f"| {labels.get(m, m)} | {v['log_loss']:.4f} | {v['accuracy']:.3f} | {rules} | "
                        f"{v['antecedents']:.0f} | {sec} | {nc} |"
                    )
            else:
                w(
                    "| method | test Poisson deviance | MAE | rules | antecedents | test rates < "
                    f"{CLIP} (clipped) | path s (mean) | steps not converged |"
                )
                w("|---|---|---|---|---|---|---|---|")
                for m, v in t["methods"].items():
                    sec = f"{v['seconds']:.1f}" if "seconds" in v else "-"
                    nc = v.get("not_converged_total", "-")
                    w(
                        f"| {COUNT_LABELS.get(m, m)} | {v['deviance']:.4f} | {v['mae']:.3f} | {v['rules']:.0f} | "
                        f"{v['antecedents']:.0f} | {v['clipped']:.0f} | {sec} | {nc} |"
                    )
            w("")
        w(
            "Medians over the splits; rules = leaves with a nonzero weight (for any class), antecedents = distinct "
            "internal nodes they need (the full forest: all its internal nodes); one-vs-rest: rules = distinct leaves "
            "used by any class (the sum over classes in brackets, <= 14); 'steps not converged' sums over the splits "
            "the path steps that hit max_iter (10,000 passes).\n"
        )
    if "speed" in report:
        w("## Speed\n")
        w(
            f"One run each, {SPEED_LAMBDAS} lambdas from our lambda_max down to {SPEED_MIN_RATIO:g} of it; our paths "
            'with `scaling="leaf_value", min_support=0, polish=False` on M with unit-norm columns (what the default '
            '`scaling="unit"` solves on), the references on the same columns as scipy.sparse. Every path (ours and '
            f"saga's) stops after the step that passes {REFERENCE_CAP_S} s; times are compared over the steps both "
            "finished (seconds from the start of the path to the end of the last of them; glum's path is one call, "
            "timed whole). Objectives are sums over rows (our units). Our default path (group MCP + per-class "
            f"fusion, or MCP + fusion) is timed on the same lambdas, stopped after the step that passes "
            f"{DEFAULT_CAP_S} s.\n"
        )
        w(
            "| case | path | reference | steps compared | ours s | reference s | ours faster by | steps each reached "
            "(ours / reference, of 20) | our default path: steps, s |"
        )
        w("|---|---|---|---|---|---|---|---|---|")
        for r in report["speed"]:
            faster = r["speedup"]
            verdict = "n/a" if not np.isfinite(faster) else f"x{faster:.2f}" + ("" if faster >= 1 else " (**slower**)")
            w(
                f"| {r['case']} | {'group-L1 multinomial' if r['loss'] == 'multinomial' else 'L1 Poisson'} | "
                f"{r['reference']} | {r['done']} | {r['ours_done_s']:.2f} | {r['ref_s']:.2f} | {verdict} | "
                f"{r['ours_steps']} / {r['ref_steps']} | {r['default_steps']}, {r['default_s']:.1f} |"
            )
        slower = [r["case"].split(" (")[0] for r in report["speed"] if not r["speedup"] >= 1]
        w(
            f"\nTarget (ours faster than each reference): met on {len(report['speed']) - len(slower)} of "
            f"{len(report['speed'])}" + (f"; **missed** on {', '.join(slower)}." if slower else ".") + "\n"
        )
        for r in report["speed"]:
            w(f"### {r['case']}: {r['loss']} path beside {r['reference']}\n")
            if r["loss"] == "multinomial":
                w(
                    "Ours: sum of log losses + lambda * sum_j ||W_j||_2 (group, per rule). saga: C * sum of log "
                    "losses + sum_jk |W_jk| with C = 1/lambda, i.e. (1/C) x [sum of log losses + lambda * "
                    "sum_jk |W_jk|] (entrywise); both written here in the second form. Each solution scored on "
                    "both; rules = rows of W with any nonzero (nonzero entries in brackets).\n"
                )
                w(
                    "| lambda / lambda_max | rules ours | rules saga | ours on ours | saga on ours | "
                    "ours on saga's | saga on saga's | saga epochs | ours s (cumulative) | saga s (cumulative) |"
                )
                w("|---|---|---|---|---|---|---|---|---|---|")
                for s in r["steps"]:
                    w(
                        f"| {s['ratio']:.3f} | {s['rules_ours']} ({s['entries_ours']}) | {s['rules_ref']} "
                        f"({s['entries_ref']}) | {s['ours_group']:.4f} | {s['ref_group']:.4f} | "
                        f"{s['ours_entry']:.4f} | {s['ref_entry']:.4f} | {s['ref_iter']} | {s['ours_s']:.1f} | "
                        f"{s['ref_s']:.1f} |"
                    )
                gaps = [s["ref_group"] / s["ours_group"] - 1 for s in r["steps"]]
                own = [s["ours_entry"] / s["ref_entry"] - 1 for s in r["steps"]]
                if gaps:
                    w(
                        f"\nOn our objective saga's solutions are higher by {_pct(float(np.median(gaps)))} (median; "
                        f"worst {_pct(float(np.min(gaps)))} .. {_pct(float(np.max(gaps)))}); on saga's objective ours "
                        f"are higher by {_pct(float(np.median(own)))} (median): each solver wins its own problem, as "
                        "it should; the rule counts differ because the problems do (a per-entry penalty does not "
                        "remove a rule from every class at once).\n"
                    )
            else:
                w(
                    "Both solve sum_i [exp(eta_i) - y_i eta_i] + lambda ||w||_1 (glum with alpha = lambda / n): the "
                    "same problem; shown with the constant sum_i [y_i log y_i - y_i] added (the loss is then half the "
                    "Poisson deviance). Relative gap = glum's objective / ours - 1 (positive: ours lower).\n"
                )
                w("| lambda / lambda_max | rules ours | rules glum | ours | glum | relative gap | ours s (cumul.) |")
                w("|---|---|---|---|---|---|---|")
                for s in r["steps"]:
                    w(
                        f"| {s['ratio']:.3f} | {s['rules_ours']} | {s['rules_ref']} | {s['ours_obj']:.6f} | "
                        f"{s['ref_obj']:.6f} | {s['ref_obj'] / s['ours_obj'] - 1:+.2e} | "
                        f"{s['ours_s']:.2f} |"
                    )
                gaps = [s["ref_obj"] / s["ours_obj"] - 1 for s in r["steps"]]
                w(
                    f"\nRelative gap over the steps: median {float(np.median(gaps)):+.1e}, lowest {min(gaps):+.1e} "
                    f"(negative: glum's objective lower); {'within' if min(gaps) >= -1e-6 else '**not** within'} 1e-6 "
                    "at every step.\n"
                )
            w(
                f"Our default path (MCP + fusion) on the same lambdas: {r['default_steps']} steps in "
                f"{r['default_s']:.1f} s, rules per step {r['default_rules']}, {r['default_not_converged']} step(s) "
                f"not converged (max_iter); our L1 path: {r['ours_not_converged']} step(s) not converged.\n"
            )
    notes = report.get("notes")
    if notes:
        w(notes)
    return "\n".join(out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", type=int, default=5)
    parser.add_argument("--trees", type=int, default=500)
    parser.add_argument("--depth", type=int, default=3)
    parser.add_argument("--only", choices=("quality", "speed"))
    parser.add_argument("--tables", nargs="*", default=None, help="a subset of the quality tables")
    parser.add_argument("--loans-rows", type=int, default=None, help="loans_grade's row subsample (0: all)")
    parser.add_argument("--quick", action="store_true", help="1 split, 100 trees, small tables (a smoke run)")
    parser.add_argument("--out", default=None, help="markdown report (default bench/results/classes_and_counts.md)")
    parser.add_argument("--json", default=None, help="also dump the raw records here")
    parser.add_argument("--notes", default=None, help="markdown file appended to the report")
    parser.add_argument(
        "--render", default=None, metavar="JSON", help="no run: re-render the report from a --json dump"
    )
    args = parser.parse_args(argv)
    cfg = {
        "splits": args.splits,
        "trees": args.trees,
        "depth": args.depth,
        "max_rows": dict(MAX_ROWS),
        "tables": {"multiclass": MULTICLASS, "counts": COUNTS},
        "n_jobs": 2,
        "speed_trees": 500,
        "speed_trees_synthetic": 100,
        "speed_rows": 100_000,
        "quick": args.quick,
    }
    if args.quick:
        cfg.update(splits=1, trees=100, max_rows=dict.fromkeys((*MULTICLASS, *COUNTS), 2000))
        cfg.update(speed_trees=100, speed_trees_synthetic=30, speed_rows=10_000)
    if args.tables:
        cfg["tables"] = {kind: tuple(t for t in names if t in args.tables) for kind, names in cfg["tables"].items()}
    if args.loans_rows is not None:
        cfg["max_rows"]["loans_grade"] = args.loans_rows or None
    out = Path(args.out) if args.out else None
    if out is None:
        out = Path(tempfile.gettempdir()) / "classes_and_counts.md" if args.quick else RESULTS / "classes_and_counts.md"
    shown, skip = [], False  # the command as run, less where its outputs went
    for arg in argv if argv is not None else sys.argv[1:]:
        if not skip and arg.split("=")[0] in ("--out", "--json", "--notes"):
            skip = "=" not in arg
            continue
        if not skip:
            shown.append(arg)
        skip = False
    command = " ".join(["PYTHONPATH=. python bench/classes_and_counts.py", *shown])
    if args.render:
        report = json.loads(Path(args.render).read_text())
        if args.notes:
            report["notes"] = Path(args.notes).read_text()
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(render(report))
        print(f"wrote {out}")
        return
    started = time.perf_counter()
    report = {
        "config": cfg,
        "command": command,
        "date": datetime.date.today().isoformat(),
        "machine": _machine(),
        "solver_version": solver_commit(),
    }
    log = lambda msg: print(msg, flush=True)  # noqa: E731
    if args.only != "speed":
        records = quality(cfg, log)
        report["quality"] = summarize(records)
        report["records"] = records
        print(json.dumps(report["quality"]["targets"], indent=1))
    if args.only != "quality":
        report["speed"] = speed(cfg, log)
    report["seconds"] = time.perf_counter() - started
    if args.notes:
        report["notes"] = Path(args.notes).read_text()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(report))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1, default=float))
    print(f"wrote {out} in {report['seconds']:.0f}s")


if __name__ == "__main__":
    main()
