"""Survival targets, measured: FIRE's Cox loss against its L1 path, scikit-survival's linear Coxnet and the full
forests, and the L1 path's speed against Coxnet.

Quality (``quality``): the tables of ../shared/datasets/survival (whas500, gbsg2, aids, veterans_lung_cancer; the last
two columns are ``time`` and ``event``; ``--sksurv`` builds the same tables from scikit-survival's bundled copies,
which is what the shared files are), text columns one-hot (``TableEncoding``). ``--splits`` seeded random splits
train / validation / test 50 / 16 / 34, stratified by event. Two forests of ``--trees`` trees of depth ``--depth``
(max_features sqrt) on the training part only:

- ``martingale``: scikit-learn's ``RandomForestRegressor`` on the martingale residuals of the model without rules
  (``Cox.forest_target``), the forest ``solver.fitting.train_forest`` trains for ``loss="cox"`` (our service's);
- ``rsf``: scikit-survival's ``RandomSurvivalForest`` (its trees read by ``solver.sklearn_adapters``).

On each, FIRE through ``solver.fitting.fit_rules`` with the validation part as its held-out rows (rows the forest
never saw, as fit_rules' own ``holdout_split`` gives where it trains the forest itself), its step among those with
at most ``BUDGET`` terms (rules + linear terms: fewer than 15): ``fire`` (the library's defaults: for Cox L1 +
fusion, linear terms; step by validation deviance), ``fire_cindex`` (the same, step by validation C-index),
``fire_mcp`` (MCP + fusion, every other loss's default penalty and Cox's before) and ``l1`` (the L1-Cox path on the
same candidates: ``penalty="l1"``, ``fusion_ratio=0``). Beside them the full forests (the
regression forest's predicted residual and the survival forest's ``predict``, each a risk score) and
``CoxnetSurvivalAnalysis(l1_ratio=1)`` on the encoded columns (missing values filled with the training median,
standardised on the training part), its own alpha path, the alpha of the highest validation C-index among those
with at most ``BUDGET`` nonzero coefficients. Scored once on the test part: Harrell's C-index (scikit-survival's
``concordance_index_censored``) and the partial-likelihood deviance per row (Breslow, the test rows' own risk sets;
``Cox.mean_loss``). Targets (medians over tables x splits): FIRE (martingale forest, step by validation deviance)
at least 10% lower test deviance than the L1 path; its test C-index above Coxnet's (the median of the
differences per split, and the median C-index against Coxnet's) and within 0.02 of the survival forest's; a rule with
a condition in every fit (issue 39: FIRE's defaults keep at least one rule).

Speed (``speed``): the L1-Cox path beside Coxnet on the same columns and penalties: ``--speed-rows`` rows drawn
with replacement from gbsg2 (a synthetic table made by resampling a real one, each time multiplied by a factor
exp(N(0, 0.05^2)) so that the copies do not all tie), a martingale forest of ``--speed-trees`` trees of depth 3
trained on 20,000 of them, its leaf matrix on every row with unit-norm columns (``LeafMatrix.unit_columns``: the
columns our default ``scaling="unit"`` solves on) given to ``fit_path`` (``scaling="leaf_value"``,
``min_support=0``, no polish) and, dense, to Coxnet (``normalize=False``). Lambdas: ``SPEED_LAMBDAS`` geometric steps
from our lambda_max down to ``SPEED_MIN_RATIO`` of it; Coxnet's ``alphas = lambda / n`` (it minimises the negative
log partial likelihood over n plus ``alpha ||w||_1``; ours the sum plus ``lambda ||w||_1``). Both solutions are
scored on our objective at every step; the headline is Coxnet's seconds over ours (target: at least 3x).

    PYTHONPATH=. python bench/survival.py [--splits 5] [--trees 500] [--only quality|speed] [--tables ...]
        [--sksurv] [--quick] [--write]

prints the report; ``--write`` writes it to bench/results/survival.md. ``--quick``: 1 split, 100 trees, 20,000
speed rows.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestRegressor
from sklearn.preprocessing import StandardScaler

REPO = Path(__file__).resolve().parents[1]
# bench/ holds a solver.py (the speed benchmark): make sure "solver" is the package, not that script
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != REPO / "bench"]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.machine import cpu_model, solver_commit  # noqa: E402
from solver import PathSpec, TableEncoding, TreeEnsemble, fit_path, leaf_matrix  # noqa: E402
from solver.fitting import fit_rules  # noqa: E402
from solver.losses import get_loss  # noqa: E402
from solver.losses.cox import signed_times, split_times  # noqa: E402
from solver.path import lambda_grid  # noqa: E402

DATA = REPO.parent / "shared" / "datasets" / "survival"
RESULTS = REPO / "bench" / "results"
TABLES = ("whas500", "gbsg2", "aids", "veterans_lung_cancer")
BUDGET = 14  # "fewer than 15 terms" (rules + linear terms)
COX = get_loss("cox")
FIRE_METHODS = {  # PathSpec settings on top of loss="cox" and the library's defaults
    "fire": {},
    "fire_cindex": {"selection": "cindex"},
    "fire_mcp": {"penalty": "mcp"},
    "l1": {"penalty": "l1", "fusion_ratio": 0.0},
}
FORESTS = ("martingale", "rsf")
LABELS = {
    "fire": "FIRE (defaults: L1 + fusion; step by val. deviance)",
    "fire_cindex": "FIRE (defaults; step by val. C-index)",
    "fire_mcp": "FIRE (MCP + fusion; step by val. deviance)",
    "l1": "L1-Cox path (no fusion)",
    "forest": "full forest",
    "coxnet": "Coxnet (linear L1, raw columns)",
}
FOREST_LABELS = {"martingale": "regression forest on martingale residuals", "rsf": "random survival forest"}
SPEED_LAMBDAS = 20
SPEED_MIN_RATIO = 0.02
SPEED_FIT_ROWS = 20_000  # rows the speed forest is trained on
SPEED_TABLE = "gbsg2"
TIME_JITTER = 0.05  # sd of the log factor each resampled time is multiplied by


# ----------------------------------------------------------------------------------------------------- data


def sksurv_frame(name: str) -> pd.DataFrame:
    """The table as scikit-survival ships it, laid out as the shared files: features, then ``time`` and ``event``."""
    from sksurv import datasets

    X, y = getattr(datasets, f"load_{name}")()
    event_field, time_field = y.dtype.names
    frame = X.copy()
    for column in frame.select_dtypes("category").columns:
        frame[column] = frame[column].astype(str)
    frame["time"], frame["event"] = y[time_field].astype(float), y[event_field].astype(int)
    return frame.reset_index(drop=True)


def load(name: str, data_dir: Path | None):
    """(X encoded, signed times, encoding) of a table: its CSV under ``data_dir``, or scikit-survival's copy."""
    frame = sksurv_frame(name) if data_dir is None else pd.read_csv(data_dir / f"{name}.csv.gz")
    features = frame.iloc[:, :-2]
    encoding = TableEncoding.infer(features)
    y = signed_times(frame["time"].to_numpy(float), frame["event"].to_numpy(int))
    return encoding.encode_frame(features), y, encoding


def split(y, seed: int):
    """Train / validation / test rows 50 / 16 / 34, seeded, stratified by event."""
    rng = np.random.default_rng(1000 + seed)
    parts = ([], [], [])
    for group in (np.flatnonzero(y > 0), np.flatnonzero(y < 0)):
        group = rng.permutation(group)
        a, b = round(0.50 * len(group)), round(0.66 * len(group))
        for part, rows in zip(parts, (group[:a], group[a:b], group[b:])):
            part.append(rows)
    return tuple(rng.permutation(np.concatenate(p)) for p in parts)


def structured(y):
    """scikit-survival's structured target of signed times."""
    from sksurv.util import Surv

    time, event = split_times(y)
    return Surv.from_arrays(event, time)


# ----------------------------------------------------------------------------------------------------- quality


def scores(y, risk) -> dict:
    """Test C-index (scikit-survival's) and partial-likelihood deviance per row of risk scores ``risk``."""
    from sksurv.metrics import concordance_index_censored

    time, event = split_times(y)
    return {
        "cindex": float(concordance_index_censored(event, time, risk)[0]),
        "deviance": COX.mean_loss(y, risk),
    }


def train_forests(X, y, seed: int, trees: int, depth: int, n_jobs: int) -> dict:
    """name -> (risk-score predict, TreeEnsemble) of the two forests trained on these rows."""
    from sksurv.ensemble import RandomSurvivalForest

    common = dict(n_estimators=trees, max_depth=depth, max_features="sqrt", random_state=seed, n_jobs=n_jobs)
    regression = RandomForestRegressor(**common).fit(X, COX.forest_target(y))
    survival = RandomSurvivalForest(**common).fit(X, structured(y))
    return {
        "martingale": (regression.predict, TreeEnsemble.from_sklearn(regression)),
        "rsf": (survival.predict, TreeEnsemble.from_sklearn(survival)),
    }


def run_fire(method, X, y, parts, forest, encoding, seed):
    """One FIRE fit through fit_rules on the forest's training rows and the validation rows: its test scores and
    terms, linear terms, antecedents, seconds."""
    tr, va, te = parts
    rows = np.concatenate([tr, va])
    spec = PathSpec(loss="cox", max_rules=BUDGET, random_state=seed).replace(**FIRE_METHODS[method])
    started = time.perf_counter()
    fit = fit_rules(
        X[rows],
        y[rows],
        spec,
        forest=forest,
        rows=(np.arange(len(tr)), len(tr) + np.arange(len(va))),
        encoding=encoding,
    )
    rules = fit.rules
    return dict(
        scores(y[te], rules.predict(X[te])),
        terms=len(rules.rules) + len(rules.linear),
        linear=len(rules.linear),
        antecedents=sum(len(rule.conditions) for rule in rules.rules),
        seconds=time.perf_counter() - started,
    )


def run_coxnet(X, y, parts):
    """Coxnet (l1_ratio 1) on the raw encoded columns: its alpha of the highest validation C-index among those with
    at most BUDGET nonzero coefficients, scored on test."""
    from sksurv.linear_model import CoxnetSurvivalAnalysis
    from sksurv.metrics import concordance_index_censored

    tr, va, te = parts
    fill = np.nanmedian(X[tr], axis=0)
    scaler = StandardScaler().fit(np.where(np.isnan(X[tr]), fill, X[tr]))

    def prepared(rows):
        return scaler.transform(np.where(np.isnan(X[rows]), fill, X[rows]))

    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence warnings on the smallest alphas: never selected there
        model = CoxnetSurvivalAnalysis(l1_ratio=1.0, alpha_min_ratio=0.01).fit(prepared(tr), structured(y[tr]))
    time_va, event_va = split_times(y[va])
    candidates = [k for k in range(len(model.alphas_)) if np.count_nonzero(model.coef_[:, k]) <= BUDGET]
    val_cindex = {
        k: concordance_index_censored(event_va, time_va, prepared(va) @ model.coef_[:, k])[0] for k in candidates
    }
    best = min(candidates, key=lambda k: (-val_cindex[k], k))
    coef = model.coef_[:, best]
    return dict(
        scores(y[te], prepared(te) @ coef),
        terms=int(np.count_nonzero(coef)),
        linear=int(np.count_nonzero(coef)),
        antecedents=0,
        seconds=time.perf_counter() - started,
    )


def quality(cfg, log):
    records = []
    for name in cfg["tables"]:
        X, y, encoding = load(name, cfg["data_dir"])
        for seed in range(cfg["splits"]):
            parts = split(y, seed)
            tr, _, te = parts
            forests = train_forests(X[tr], y[tr], seed, cfg["trees"], cfg["depth"], cfg["n_jobs"])
            rec = {"table": name, "split": seed, "rows": [len(p) for p in parts], "coxnet": run_coxnet(X, y, parts)}
            for forest_name, (predict, ensemble) in forests.items():
                # a forest predicts residuals or expected events, no log hazard ratios: a C-index, no deviance
                cindex = scores(y[te], predict(X[te]))["cindex"]
                rec[forest_name] = {"forest": dict(cindex=cindex, deviance=None, terms=None, antecedents=None)}
                methods = FIRE_METHODS if forest_name == "martingale" else ("fire", "l1")
                for method in methods:
                    rec[forest_name][method] = run_fire(method, X, y, parts, ensemble, encoding, seed)
            records.append(rec)
            fire = rec["martingale"]["fire"]
            log(
                f"{name} split {seed}: FIRE C {fire['cindex']:.3f} deviance {fire['deviance']:.4g} "
                f"({fire['terms']} terms, {fire['antecedents']} antecedents); L1 deviance "
                f"{rec['martingale']['l1']['deviance']:.4g}; Coxnet C {rec['coxnet']['cindex']:.3f}; RSF C "
                f"{rec['rsf']['forest']['cindex']:.3f}; martingale forest C {rec['martingale']['forest']['cindex']:.3f}"
            )
    return records


def _median(values):
    values = [v for v in values if v is not None]
    return float(np.median(values)) if values else None


def models_of(record):
    """(forest, method, result) of every model of a split's record."""
    yield "", "coxnet", record["coxnet"]
    for forest in FORESTS:
        for method, result in record[forest].items():
            yield forest, method, result


def summarize(records):
    """Medians per table and model, and the targets over tables x splits (FIRE = the martingale forest's ``fire``)."""
    tables = list(dict.fromkeys(r["table"] for r in records))
    keys = ("cindex", "deviance", "terms", "antecedents")
    per_table = {}
    for table in tables:
        recs = [r for r in records if r["table"] == table]
        models = [(forest, method) for forest, method, _ in models_of(recs[0])]
        results = {model: [res for r in recs for f, m, res in models_of(r) if (f, m) == model] for model in models}
        per_table[table] = [
            {"forest": f, "method": m, **{k: _median([res[k] for res in results[f, m]]) for k in keys}}
            for f, m in models
        ]
    fire = [r["martingale"]["fire"] for r in records]
    gain = _median([1 - f["deviance"] / r["martingale"]["l1"]["deviance"] for f, r in zip(fire, records)])
    over_coxnet = _median([f["cindex"] - r["coxnet"]["cindex"] for f, r in zip(fire, records)])
    below_rsf = _median([r["rsf"]["forest"]["cindex"] - f["cindex"] for f, r in zip(fire, records)])
    medians = _median([f["cindex"] for f in fire]), _median([r["coxnet"]["cindex"] for r in records])
    with_rule = sum(f["terms"] > f["linear"] for f in fire)
    targets = [
        ("test deviance vs the L1-Cox path", f"{100 * gain:.1f}% lower", "at least 10% lower", gain >= 0.10),
        ("test C-index vs Coxnet, median of the differences", f"{over_coxnet:+.3f}", "higher", over_coxnet > 0),
        (
            "median test C-index vs Coxnet's",
            f"{medians[0]:.3f} vs {medians[1]:.3f}",
            "at least Coxnet's",
            medians[0] >= medians[1],
        ),
        ("fits with a rule (a condition)", f"{with_rule} of {len(fire)}", "every fit", with_rule == len(fire)),
        ("test C-index below the survival forest's", f"{below_rsf:+.3f}", "at most 0.020", below_rsf <= 0.02),
    ]
    forests = {
        forest: {
            "forest_cindex": _median([r[forest]["forest"]["cindex"] for r in records]),
            "fire_cindex": _median([r[forest]["fire"]["cindex"] for r in records]),
            "fire_deviance": _median([r[forest]["fire"]["deviance"] for r in records]),
            "fire_antecedents": _median([r[forest]["fire"]["antecedents"] for r in records]),
        }
        for forest in FORESTS
    }
    return {"per_table": per_table, "targets": targets, "forests": forests}


# ----------------------------------------------------------------------------------------------------- speed


def speed_case(rows: int, trees: int, n_jobs: int, data_dir: Path | None, seed: int = 0):
    """(unit-column LeafMatrix, signed times) of ``rows`` rows resampled from SPEED_TABLE, times jittered."""
    X, y, _ = load(SPEED_TABLE, data_dir)
    rng = np.random.default_rng(seed)
    draw = rng.integers(0, len(y), rows)
    X, y = X[draw], y[draw] * np.exp(rng.normal(0.0, TIME_JITTER, rows))
    rf = RandomForestRegressor(n_estimators=trees, max_depth=3, max_features="sqrt", random_state=seed, n_jobs=n_jobs)
    rf.fit(X[:SPEED_FIT_ROWS], COX.forest_target(y[:SPEED_FIT_ROWS]))
    return leaf_matrix(TreeEnsemble.from_sklearn(rf), X).unit_columns()[0], y


def coxnet_path(dense, y, lambdas):
    """Coxnet's L1 path along ``alpha = lambda / n``: (coefficients (columns, steps), seconds of the one call)."""
    from sksurv.linear_model import CoxnetSurvivalAnalysis

    target = structured(y)
    started = time.perf_counter()
    model = CoxnetSurvivalAnalysis(l1_ratio=1.0, alphas=[lam / len(y) for lam in lambdas], normalize=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence warnings: the objectives below show any gap
        model.fit(dense, target)
    return model.coef_, time.perf_counter() - started


def _warm_up():
    """Load the Cox kernels (numba, cached on disk) on a tiny problem, so that no timing includes it."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = signed_times(rng.exponential(1.0, 300), rng.random(300) < 0.6)
    rf = RandomForestRegressor(n_estimators=3, max_depth=2, random_state=0).fit(X, COX.forest_target(y))
    fit_path(leaf_matrix(TreeEnsemble.from_sklearn(rf), X), y, loss="cox", n_lambdas=3, penalty="l1")


def speed(cfg, log):
    _warm_up()
    M, y = speed_case(cfg["speed_rows"], cfg["speed_trees"], cfg["n_jobs"], cfg["data_dir"])
    csc = M.to_csc()
    started = time.perf_counter()
    ours = fit_path(
        M,
        y,
        loss="cox",
        penalty="l1",
        fusion_ratio=0.0,
        scaling="leaf_value",
        min_support=0,
        polish=False,
        n_lambdas=SPEED_LAMBDAS,
        lambda_min_ratio=SPEED_MIN_RATIO,
    )
    ours_s = time.perf_counter() - started
    lambdas = [float(v) for v in lambda_grid(ours.lambda_max, SPEED_LAMBDAS, SPEED_MIN_RATIO)]
    coef, coxnet_s = coxnet_path(csc.toarray(), y, lambdas)
    ones = np.ones(len(y))
    steps = []
    for k, lam in enumerate(lambdas):
        w_o, w_c = ours.coef(k), coef[:, k]
        steps.append(
            {
                "ratio": lam / ours.lambda_max,
                "rules_ours": int(np.count_nonzero(w_o)),
                "rules_coxnet": int(np.count_nonzero(w_c)),
                "ours_obj": COX.loss_total(y, csc @ w_o, ones) + lam * np.abs(w_o).sum(),
                "coxnet_obj": COX.loss_total(y, csc @ w_c, ones) + lam * np.abs(w_c).sum(),
            }
        )
    rec = {
        "rows": len(y),
        "events": int(np.count_nonzero(y > 0)),
        "columns": M.shape[1],
        "ours_s": ours_s,
        "coxnet_s": coxnet_s,
        "speedup": coxnet_s / ours_s,
        "not_converged": int(sum(not s.converged for s in ours.steps)),
        "steps": steps,
        # the worst relative excess of our objective over Coxnet's along the path (<= 0: ours as low or lower)
        "worst_gap": max((s["ours_obj"] - s["coxnet_obj"]) / abs(s["coxnet_obj"]) for s in steps),
    }
    log(
        f"speed cox: {len(y):,} rows x {M.shape[1]} columns, ours {ours_s:.2f}s, Coxnet {coxnet_s:.2f}s, "
        f"x{rec['speedup']:.2f}; worst objective gap {rec['worst_gap']:+.2e}"
    )
    return rec


# ----------------------------------------------------------------------------------------------------- report


def _fmt(x, spec=".3f"):
    return "n/a" if x is None else format(x, spec)


def render(report) -> str:
    cfg = report["config"]
    out = []
    w = out.append
    w("# Survival: Cox FIRE, its L1 path, Coxnet and the full forests\n")
    w(
        f"Generated by `{report['command']}` on {report['date']} in {report['seconds'] / 60:.1f} min; machine: "
        f"{report['machine']} (shared with other sessions' jobs: timings are indicative); solver at commit "
        f"{report['solver_version']}.\n"
    )
    if "quality" in report:
        summary = report["quality"]
        w("## Quality\n")
        w(
            f"Tables {', '.join(cfg['tables'])} ({cfg['source']}); {cfg['splits']} random splits train / validation / "
            f"test 50 / 16 / 34 stratified by event; forests of {cfg['trees']} trees of depth {cfg['depth']} on the "
            f"training part; every FIRE fit through `fit_rules` on its forest with at most {BUDGET} terms (rules + "
            "linear terms); Coxnet with at most as many nonzero coefficients, alpha by validation C-index. Test "
            "C-index (Harrell's) and partial-likelihood deviance per row; medians; antecedents beside every "
            "figure (the forests predict residuals or expected events, not log hazard ratios: no deviance). FIRE "
            "below: from the martingale forest (what the service trains), step by validation deviance.\n"
        )
        w("| target | median over tables x splits | goal | status |")
        w("|---|---|---|---|")
        for what, value, goal, met in summary["targets"]:
            w(f"| {what} | {value} | {goal} | **{'met' if met else 'missed'}** |")
        w("")
        w("Both forests, and FIRE from each (medians over tables x splits):\n")
        w("| forest | forest C-index | FIRE C-index | FIRE deviance | FIRE antecedents |")
        w("|---|---|---|---|---|")
        for forest, f in summary["forests"].items():
            w(
                f"| {FOREST_LABELS[forest]} | {_fmt(f['forest_cindex'])} | {_fmt(f['fire_cindex'])} | "
                f"{_fmt(f['fire_deviance'], '.4g')} | {_fmt(f['fire_antecedents'], '.0f')} |"
            )
        w("")
        w("| table | forest | model | test C-index | test deviance | terms | antecedents |")
        w("|---|---|---|---|---|---|---|")
        for table, rows in summary["per_table"].items():
            for r in rows:
                forest = FOREST_LABELS.get(r["forest"], "-")
                w(
                    f"| {table} | {forest} | {LABELS[r['method']]} | {_fmt(r['cindex'])} | "
                    f"{_fmt(r['deviance'], '.4g')} | {_fmt(r['terms'], '.0f')} | {_fmt(r['antecedents'], '.0f')} |"
                )
        w("")
    if "speed" in report:
        r = report["speed"]
        last = r["steps"][-1]
        w("## Speed: the L1-Cox path against Coxnet\n")
        w(
            f"{r['rows']:,} rows ({r['events']:,} events) drawn with replacement from {SPEED_TABLE} (synthetic rows "
            f"from a real table, times jittered by exp(N(0, {TIME_JITTER}²))), a martingale forest of "
            f"{cfg['speed_trees']} trees of depth 3 trained on {SPEED_FIT_ROWS:,} of them; its leaf matrix on every "
            f"row with unit-norm columns ({r['columns']}), dense for Coxnet; {SPEED_LAMBDAS} lambdas from "
            f"lambda_max to {SPEED_MIN_RATIO:g} of it, Coxnet's alpha = lambda / n.\n"
        )
        w(
            f"- Coxnet's time / ours: **{r['speedup']:.2f}x** (target >= 3x: "
            f"**{'met' if r['speedup'] >= 3 else 'missed'}**); worst objective gap (ours - Coxnet's) / Coxnet's "
            f"over the steps {r['worst_gap']:+.1e} (<= 0: ours as low or lower); rules at the last step: ours "
            f"{last['rules_ours']}, Coxnet {last['rules_coxnet']}; our steps not converged: {r['not_converged']}.\n"
        )
    return "\n".join(out) + "\n"


def evaluate(cfg, log=print):
    """The report of ``cfg`` (quality and speed as ``cfg["only"]`` says): its config, records and summaries."""
    report = {"config": {k: str(v) if isinstance(v, Path) else v for k, v in cfg.items()}}
    report["config"]["source"] = "scikit-survival's copies" if cfg["data_dir"] is None else str(cfg["data_dir"])
    started = time.perf_counter()
    if cfg.get("only") != "speed":
        report["records"] = quality(cfg, log)
        report["quality"] = summarize(report["records"])
    if cfg.get("only") != "quality":
        report["speed"] = speed(cfg, log)
    report["seconds"] = time.perf_counter() - started
    return report


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", type=int, default=5)
    parser.add_argument("--trees", type=int, default=500)
    parser.add_argument("--depth", type=int, default=3)
    parser.add_argument("--tables", nargs="*", default=list(TABLES))
    parser.add_argument("--only", choices=("quality", "speed"))
    parser.add_argument("--sksurv", action="store_true", help="scikit-survival's copies of the tables")
    parser.add_argument("--speed-rows", type=int, default=100_000)
    parser.add_argument("--speed-trees", type=int, default=100)
    parser.add_argument("--quick", action="store_true", help="1 split, 100 trees, 20,000 speed rows")
    parser.add_argument("--write", action="store_true", help="write the report to bench/results/survival.md")
    args = parser.parse_args(argv)
    cfg = {
        "splits": args.splits,
        "trees": args.trees,
        "depth": args.depth,
        "tables": tuple(args.tables),
        "only": args.only,
        "speed_rows": args.speed_rows,
        "speed_trees": args.speed_trees,
        "n_jobs": 2,
        "data_dir": None if args.sksurv else DATA,
    }
    if args.quick:
        cfg.update(splits=1, trees=100, speed_rows=20_000)
    shown = " ".join(argv if argv is not None else sys.argv[1:])
    report = evaluate(cfg)
    report.update(
        command=f"PYTHONPATH=. python bench/survival.py {shown}".strip(),
        date=datetime.date.today().isoformat(),
        machine=f"{os.cpu_count()} cores ({cpu_model()})",
        solver_version=solver_commit(),
    )
    markdown = render(report)
    print(markdown)
    if args.write:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "survival.md").write_text(markdown)
        print(f"wrote {RESULTS / 'survival.md'}")


if __name__ == "__main__":
    main()
