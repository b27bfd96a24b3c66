"""Binary classification, measured: rule quality on ../shared/datasets/classification and path speed.

Quality (``quality``): each of the five tables (text columns one-hot encoded by ``TableEncoding``, missing
values kept: scikit-learn's forests route them) is split 60/20/20 into train/validation/test, five seeds.
On the training rows one ``RandomForestClassifier`` (``--trees`` trees, depth 3, max_features sqrt) gives M;
FIRE (MCP gamma 1.1, the default fusion 0.5 lambda_s, unit scaling, min_support, polish: the library's defaults)
and the L1-logistic path on the same M each pick their step by validation log loss among steps with fewer
than 15 rules. Beside them, with their own trees, on the same rows: imodels ``RuleFitClassifier`` (scored on its
decision values through the sigmoid: its ``predict_proba`` applies a softmax to (1 - f, f)), max_rules on a
grid picked by validation log loss under 15 terms; SIRUS's ``SirusClassifier`` (14 rules); and the forest
itself. Test log loss, AUC and antecedents; medians over the splits.

Speed (``speed``): one logistic path on churn (M of a 500-tree depth-3 forest on its 3,000 training rows)
and on a synthetic 1e5-row table, beside scikit-learn's ``LogisticRegression`` L1 path (saga, warm-started) and skglm's
logistic L1 and MCP, all on the same columns and the same lambdas; each step's objective is computed by one
function for all, and a reference counts as matched where ours is no higher (1e-6 relative) at every step.
A reference path stops once it has run ``REFERENCE_CAP_S``; it is compared over the steps it finished, with
our time for the same steps.

    PYTHONPATH=. python bench/classification.py [--splits 5] [--trees 500] [--only quality|speed]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import expit
from sklearn.ensemble import RandomForestClassifier
from sklearn.metrics import log_loss, roc_auc_score

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from solver import PathSpec, TableEncoding, TreeEnsemble, binary_labels, fit_path, leaf_matrix  # noqa: E402

DATA_DIR = REPO.parent / "shared" / "datasets" / "classification"
TABLES = ("attrition", "churn", "credit_data", "hmda", "spam7")
BUDGET = 14  # "fewer than 15 rules"
RULEFIT_GRID = (5, 10, 14, 20, 30)
REFERENCE_CAP_S = 120  # a reference path stops after the step that passes this; compared over its finished steps
RESULTS = REPO / "bench" / "results"


def load(name):
    frame = pd.read_csv(DATA_DIR / f"{name}.csv.gz")
    features, target = frame.iloc[:, :-1], frame.iloc[:, -1]
    classes, y = binary_labels(target.to_numpy())
    X = TableEncoding.infer(features).encode_frame(features)
    return X, y, classes


def split(n, seed):
    order = np.random.default_rng(seed).permutation(n)
    a, b = int(0.6 * n), int(0.8 * n)
    return order[:a], order[a:b], order[b:]


def _scores(p, y):
    p = np.clip(p, 1e-15, 1 - 1e-15)
    return {"log_loss": float(log_loss(y, p, labels=[0, 1])), "auc": float(roc_auc_score(y, p))}


def run_fire(penalty, mats, y, idx):
    tr, va, te = idx
    started = time.perf_counter()
    spec = PathSpec(loss="logistic", penalty=penalty, max_rules=BUDGET)
    result = fit_path(mats[0], y[tr], spec, val_matrix=mats[1], y_val=y[va], leaf_ancestors=mats[3])
    k = result.select()
    step = result.steps[k]
    score = result.intercepts[k] + mats[2].matvec(result.coef(k))
    return dict(
        _scores(expit(score), y[te]),
        rules=step.n_rules,
        antecedents=step.n_antecedents,
        seconds=time.perf_counter() - started,
    )


def run_rulefit(X, y, idx, seed):
    from imodels import RuleFitClassifier

    tr, va, te = idx
    started = time.perf_counter()
    best = None
    for max_rules in RULEFIT_GRID:
        model = RuleFitClassifier(max_rules=max_rules, cv=False, random_state=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.fit(X[tr], y[tr])
        coef = np.asarray(model.coef, dtype=float)
        nonzero = np.abs(coef) > 1e-8
        terms = int(nonzero.sum())
        rules = [r for r, nz in zip(model.rules_without_feature_names_, nonzero[X.shape[1] :]) if nz]
        val = _scores(expit(model._predict_continuous_output(X[va])), y[va])["log_loss"]
        if terms <= BUDGET and (best is None or val < best[0]):
            best = (val, model, terms, sum(len(str(r).split(" and ")) for r in rules))
    if best is None:
        return None
    _, model, terms, conditions = best
    return dict(
        _scores(expit(model._predict_continuous_output(X[te])), y[te]),
        rules=terms,
        antecedents=conditions,
        seconds=time.perf_counter() - started,
    )


def run_sirus(X, y, idx, seed):
    from sirus import SirusClassifier

    tr, _, te = idx
    started = time.perf_counter()
    model = SirusClassifier(num_rules=BUDGET, num_trees=1000, random_state=seed, n_jobs=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(X[tr], y[tr])
    used = [rule for rule, weight in zip(model.rules_, model.rule_weights_) if weight != 0]
    return dict(
        _scores(model.predict_proba(X[te])[:, 1], y[te]),
        rules=len(used),
        antecedents=sum(len(rule.conditions) for rule in used),
        seconds=time.perf_counter() - started,
    )


def quality(splits, trees, log):
    records = []
    for name in TABLES:
        X, y, classes = load(name)
        X_imputed = np.where(np.isnan(X), np.nanmedian(X, axis=0), X)  # RuleFit and SIRUS take no NaN
        for seed in range(splits):
            idx = split(len(y), seed)
            tr, _va, te = idx
            rf = RandomForestClassifier(
                n_estimators=trees, max_depth=3, max_features="sqrt", random_state=seed, n_jobs=1
            ).fit(X[tr], y[tr])
            forest = TreeEnsemble.from_sklearn(rf)
            mats = (*tuple(leaf_matrix(forest, X[i]) for i in idx), forest.leaf_ancestors)
            rec = {
                "table": name,
                "seed": seed,
                "positive": str(classes[1]),
                "n": len(y),
                "forest": dict(_scores(rf.predict_proba(X[te])[:, 1], y[te]), rules=forest.n_leaves),
                "fire": run_fire("mcp", mats, y, idx),
                "l1": run_fire("l1", mats, y, idx),
                "rulefit": run_rulefit(X_imputed, y, idx, seed),
                "sirus": run_sirus(X_imputed, y, idx, seed),
            }
            records.append(rec)
            log(
                f"{name} split {seed}: "
                + ", ".join(
                    f"{m} {rec[m]['log_loss']:.4f}/{rec[m]['auc']:.3f}"
                    for m in ("fire", "l1", "rulefit", "sirus", "forest")
                    if rec[m]
                )
            )
    return records


def summarize(records):
    methods = ("fire", "l1", "rulefit", "sirus", "forest")
    per_table = {}
    for name in TABLES:
        rows = [r for r in records if r["table"] == name]
        per_table[name] = {
            m: {
                k: float(np.median([r[m][k] for r in rows if r[m]]))
                for k in ("log_loss", "auc", "rules", "antecedents")
                if k in rows[0][m]
            }
            for m in methods
        }
    decreases = {}
    for comp in ("l1", "rulefit", "sirus"):
        d = [1 - r["fire"]["log_loss"] / r[comp]["log_loss"] for r in records if r[comp]]
        decreases[comp] = float(np.median(d))
    auc_gap = {name: per_table[name]["forest"]["auc"] - per_table[name]["fire"]["auc"] for name in TABLES}
    return {
        "per_table": per_table,
        "median_logloss_decrease": decreases,
        "auc_gap_to_forest": auc_gap,
        "tables_within_0.03_auc": int(sum(g <= 0.03 for g in auc_gap.values())),
    }


def logistic_objective(X, y, penalty, g, w, b, lam):
    """The logistic FIRE objective (sum of log losses + L1 or MCP with concavity ``g``) at (w, b, lam)."""
    score = b + X @ w
    a = np.abs(w)
    if penalty == "l1":
        pen = lam * a.sum()
    else:
        pen = np.where(a <= g * lam, lam * a - a**2 / (2 * g), 0.5 * g * lam**2).sum()
    return float(np.sum(np.logaddexp(0, score) - y * score) + pen)


def speed(log):
    """Logistic L1 and MCP paths: ours against sklearn saga (L1) and skglm (L1, MCP) at the same lambdas."""
    from skglm.datafits import Logistic
    from skglm.penalties import L1, MCPenalty
    from skglm.solvers import AndersonCD
    from sklearn.linear_model import LogisticRegression

    out = {}
    X, y, _ = load("churn")
    tr = split(len(y), 0)[0]  # the 3,000 training rows of split 0
    rf = RandomForestClassifier(n_estimators=500, max_depth=3, max_features="sqrt", random_state=0, n_jobs=1).fit(
        X[tr], y[tr]
    )
    rng = np.random.default_rng(0)
    Xs = rng.normal(size=(100_000, 20))
    ys = (rng.random(100_000) < expit(Xs[:, 0] - 2 * (Xs[:, 1] > 0.5) + Xs[:, 2] * Xs[:, 3])).astype(float)
    rfs = RandomForestClassifier(n_estimators=100, max_depth=3, max_features="sqrt", random_state=0, n_jobs=1).fit(
        Xs[:20_000], ys[:20_000]
    )
    cases = {
        "churn (3,000 rows, 500 trees depth 3)": (leaf_matrix(TreeEnsemble.from_sklearn(rf), X[tr]), y[tr]),
        "synthetic (100,000 rows, 100 trees depth 3)": (leaf_matrix(TreeEnsemble.from_sklearn(rfs), Xs), ys),
    }
    for case, (M, yy) in cases.items():
        n = len(yy)
        csc = M.to_csc()
        for penalty in ("l1", "mcp"):
            gamma = 3.0
            spec = PathSpec(
                loss="logistic",
                penalty=penalty,
                gamma=gamma / n,
                mcp_scaling="plain",
                fusion_ratio=0,
                scaling="leaf_value",
                min_support=0,
                polish=False,
                n_lambdas=20,
                lambda_min_ratio=0.02,
            )
            started = time.perf_counter()
            ours = fit_path(M, yy, spec)
            t_ours = time.perf_counter() - started
            lambdas = [s.lambda_s for s in ours.steps]

            objective = partial(logistic_objective, csc, yy, penalty, gamma / n)
            f_ours = [objective(ours.coef(k), ours.intercepts[k], lam) for k, lam in enumerate(lambdas)]
            refs = {}
            coef = np.zeros(csc.shape[1] + 1)
            coef[-1] = np.log(yy.mean() / (1 - yy.mean()))
            started = time.perf_counter()
            f_ref = []
            for lam in lambdas:
                if time.perf_counter() - started > REFERENCE_CAP_S:
                    break
                pen = L1(lam / n) if penalty == "l1" else MCPenalty(lam / n, gamma)
                coef, *_ = AndersonCD(fit_intercept=True, warm_start=True, tol=1e-6, max_iter=200).solve(
                    csc, 2 * yy - 1, Logistic(), pen, w_init=coef, Xw_init=csc @ coef[:-1] + coef[-1]
                )
                f_ref.append(objective(coef[:-1], coef[-1], lam))
            refs["skglm"] = (time.perf_counter() - started, f_ref)
            if penalty == "l1":
                model = LogisticRegression(penalty="l1", solver="saga", warm_start=True, tol=1e-4, max_iter=1000)
                started = time.perf_counter()
                f_ref = []
                for lam in lambdas:
                    if time.perf_counter() - started > REFERENCE_CAP_S:
                        break
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        model.set_params(C=1.0 / lam).fit(csc, yy)
                    f_ref.append(objective(model.coef_.ravel(), model.intercept_[0], lam))
                refs["sklearn saga"] = (time.perf_counter() - started, f_ref)
            for ref, (seconds, f_ref) in refs.items():  # over the steps the reference finished within its cap
                done = len(f_ref)
                # the whole fit_path call (its setup included) less the steps the reference did not reach
                mine = t_ours - sum(step.seconds for step in ours.steps[done:])
                gaps = np.array(f_ours[:done]) / np.array(f_ref) - 1
                out[f"{case} | {penalty} vs {ref}"] = {
                    "steps": done,
                    "of": len(lambdas),
                    "ours_s": mine,
                    "ref_s": seconds,
                    "speedup": seconds / mine,
                    "worst_rel_gap": float(gaps.max()),
                    "median_rel_gap": float(np.median(gaps)),
                    "matched": bool(gaps.max() <= 1e-6),
                }
                log(
                    f"{case} {penalty} vs {ref}, {done} of {len(lambdas)} steps: ours {mine:.1f}s, {ref} "
                    f"{seconds:.1f}s, x{seconds / mine:.1f}, objective gap median {np.median(gaps):.2e} "
                    f"worst {gaps.max():.2e}",
                    flush=True,
                )
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", type=int, default=5)
    parser.add_argument("--trees", type=int, default=500)
    parser.add_argument("--only", choices=("quality", "speed"))
    args = parser.parse_args()
    report = {"splits": args.splits, "trees": args.trees}
    if args.only != "speed":
        report["quality"] = summarize(quality(args.splits, args.trees, print))
        print(json.dumps(report["quality"], indent=1))
    if args.only != "quality":
        report["speed"] = speed(print)
        print(json.dumps(report["speed"], indent=1))
    RESULTS.mkdir(exist_ok=True)
    name = "classification.json" if args.only is None else f"classification_{args.only}.json"
    (RESULTS / name).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
