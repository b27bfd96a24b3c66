"""Amounts with many zeros, measured: FIRE's Tweedie and Gamma losses against their L1 paths, squared-loss FIRE and
glum.

Quality (``quality``): the tables of bench/data/amounts (README there: medical expenses, rainfall, tobacco budget
shares; target last; text columns one-hot by ``TableEncoding``, a text column with more distinct values than it
one-hot encodes, rain_ibk's ``date``, dropped, as its error message says; missing values kept: scikit-learn's
forests route them). ``--splits`` seeded random splits train / validation / test 50 / 16 / 34: one random forest
(``--trees`` trees of depth ``--depth``, max_features sqrt, squared error, what ``solver.fitting.train_forest``
trains for these losses) on the training part only; every FIRE variant then runs through
``solver.fitting.fit_rules`` on that forest with the validation part as its held-out rows (``rows=``: rows the
forest never saw, as fit_rules' own ``holdout_split`` gives when it trains the forest itself), picks its step by
its own validation loss among steps with at most ``BUDGET`` terms (rules + linear terms: fewer than 15) and is
scored once on the test part.

- Tweedie (every row, variance power ``POWER``): FIRE (the library's defaults: MCP + fusion, linear terms), the L1
  path on the same candidates (``penalty="l1"``, ``fusion_ratio=0``), squared-loss FIRE (defaults, polish on)
  read as an amount, and the full forest. Test mean Tweedie deviance.
- Gamma (the positive rows of each part, with a forest of their own): the same four. Test mean Gamma deviance.

A predicted amount below ``FLOOR`` times the training rows' mean is raised to that floor before a deviance is taken
(squared-loss rules can predict negative amounts; a Gamma or Tweedie deviance needs a positive mean); how many
test rows were raised is reported. Targets (the median over tables x splits of 1 - FIRE's test deviance / the
other's): FIRE at least 10% below its L1 path, at least 5% below squared-loss FIRE.

Speed (``speed``): the L1 paths of the Tweedie, Gamma and Poisson losses beside glum's
``GeneralizedLinearRegressor(l1_ratio=1)`` on the same columns and lambdas, as bench/classes_and_counts.py times
Poisson: ``--speed-rows`` rows drawn with replacement from rand_hie (a synthetic table made by resampling a real
one; the Gamma case from its positive rows; Poisson reads the medical expenses as a rate), a forest of
``--speed-trees`` trees of depth 3 trained on 20,000 of them, and its leaf matrix on every row with unit-norm
columns (``LeafMatrix.unit_columns``: the columns our default ``scaling="unit"`` solves on) given to ``fit_path``
(``scaling="leaf_value"``, ``min_support=0``, no linear terms, no polish) and to glum as that scipy.sparse matrix.
Lambdas: ``SPEED_LAMBDAS`` geometric steps from our lambda_max down to ``SPEED_MIN_RATIO`` of it; glum's
``alpha = lambda / n`` (glum minimises the mean of half the deviance plus ``alpha ||w||_1``; ours the sum of the
negative log-likelihoods, half the deviance up to a constant, plus ``lambda ||w||_1``), its own warm-started path
(``alpha_search=True``). Both solutions are scored on one objective at every step, so that the two are seen to
solve the same problem; the headline is glum's seconds over ours (target: at least 3x).

    PYTHONPATH=. python bench/amounts.py [--splits 5] [--trees 500] [--only quality|speed] [--tables ...]
        [--quick] [--write]

prints the report; ``--write`` writes it to bench/results/amounts.md.
``--quick``: 1 split, 100 trees, at most 2000 rows a table, 20,000 speed rows.
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
from sklearn.metrics import mean_gamma_deviance, mean_tweedie_deviance

REPO = Path(__file__).resolve().parents[1]
# bench/ holds a solver.py (the speed benchmark): make sure "solver" is the package, not that script
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != REPO / "bench"]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.machine import cpu_model, solver_commit  # noqa: E402
from solver import PathSpec, TableEncoding, TreeEnsemble, fit_path, leaf_matrix  # noqa: E402
from solver.encoding import DEFAULT_MAX_CATEGORIES  # noqa: E402
from solver.fitting import fit_rules  # noqa: E402
from solver.path import lambda_grid  # noqa: E402

DATA = REPO / "bench" / "data" / "amounts"
RESULTS = REPO / "bench" / "results"
TABLES = ("rand_hie", "rain_ibk", "tobacco")
BUDGET = 14  # "fewer than 15 terms" (rules + linear terms)
POWER = 1.5  # the Tweedie variance power: PathSpec's default, the usual start for claim amounts
FLOOR = 0.01  # a predicted amount below this share of the training mean is raised to it before a deviance
TASKS = ("tweedie", "gamma")
METHODS = {  # PathSpec settings on top of the task's loss and the library's defaults
    "fire": {},
    "l1": {"penalty": "l1", "fusion_ratio": 0.0},
    "squared": {"loss": "squared"},
}
LABELS = {
    "fire": "FIRE (defaults: MCP + fusion)",
    "l1": "L1 path (no fusion)",
    "squared": "squared-loss FIRE read as an amount",
    "forest": "full forest",
}
TARGETS = (("l1", 0.10), ("squared", 0.05))  # (competitor, how much lower FIRE's median test deviance must be)
SPEED_LAMBDAS = 20
SPEED_MIN_RATIO = 0.02
SPEED_FIT_ROWS = 20_000  # rows the speed forest is trained on


def load(path: Path, max_rows: int | None = None):
    """(X encoded, y, dropped text columns) of a table whose target is its last column; at most ``max_rows`` rows
    drawn with seed 0."""
    frame = pd.read_csv(path)
    if max_rows is not None and len(frame) > max_rows:
        frame = frame.sample(n=max_rows, random_state=0).sort_index()
    features, target = frame.iloc[:, :-1], frame.iloc[:, -1]
    text = features.select_dtypes(exclude="number")
    dropped = [c for c in text.columns if text[c].nunique() > DEFAULT_MAX_CATEGORIES]
    features = features.drop(columns=dropped)
    encoding = TableEncoding.infer(features)
    return encoding.encode_frame(features), target.to_numpy(dtype=np.float64), encoding, dropped


def split(n: int, seed: int):
    """Train / validation / test rows, 50 / 16 / 34, seeded."""
    order = np.random.default_rng(1000 + seed).permutation(n)
    a, b = round(0.50 * n), round(0.66 * n)
    return order[:a], order[a:b], order[b:]


def deviance(task: str, y, mean) -> float:
    return float(mean_tweedie_deviance(y, mean, power=POWER) if task == "tweedie" else mean_gamma_deviance(y, mean))


def run_fire(task, method, X, y, parts, forest, encoding, seed):
    """One FIRE fit through fit_rules on the forest's training rows and the validation rows: its test mean (before
    the floor), terms, linear terms, antecedents, seconds."""
    tr, va, te = parts
    rows = np.concatenate([tr, va])
    spec = PathSpec(loss=task, power=POWER, max_rules=BUDGET, random_state=seed).replace(**METHODS[method])
    started = time.perf_counter()
    fit = fit_rules(
        X[rows],
        y[rows],
        spec,
        forest=forest,
        rows=(np.arange(len(tr)), len(tr) + np.arange(len(va))),
        encoding=encoding,
    )
    seconds = time.perf_counter() - started
    rules = fit.rules
    mean = rules.predict(X[te]) if spec.loss == "squared" else rules.predict_mean(X[te])
    return mean, {
        "terms": len(rules.rules) + len(rules.linear),
        "linear": len(rules.linear),
        "antecedents": sum(len(rule.conditions) for rule in rules.rules),
        "seconds": seconds,
        "steps": len(fit.path.steps),
    }


def quality(cfg, log):
    records = []
    for name in cfg["tables"]:
        X_all, y_all, encoding, dropped = load(cfg["data_dir"] / f"{name}.csv.gz", cfg["max_rows"])
        if dropped:
            log(f"{name}: text columns dropped (more than {DEFAULT_MAX_CATEGORIES} values): {dropped}")
        for seed in range(cfg["splits"]):
            parts_all = split(len(y_all), seed)
            for task in TASKS:
                # Gamma: the positive rows of each part
                parts = parts_all if task == "tweedie" else tuple(p[y_all[p] > 0] for p in parts_all)
                tr, _, te = parts
                started = time.perf_counter()
                rf = RandomForestRegressor(
                    n_estimators=cfg["trees"],
                    max_depth=cfg["depth"],
                    max_features="sqrt",
                    random_state=seed,
                    n_jobs=cfg["n_jobs"],
                ).fit(X_all[tr], y_all[tr])
                forest = TreeEnsemble.from_sklearn(rf)
                floor = FLOOR * float(np.mean(y_all[tr]))
                rec = {"task": task, "table": name, "split": seed, "rows": [len(p) for p in parts], "floor": floor}
                rec["forest_s"] = time.perf_counter() - started
                means = {"forest": rf.predict(X_all[te])}
                for method in METHODS:
                    means[method], rec[method] = run_fire(task, method, X_all, y_all, parts, forest, encoding, seed)
                rec["forest"] = {"terms": None, "linear": None, "antecedents": None}
                for method, mean in means.items():
                    rec[method]["deviance"] = deviance(task, y_all[te], np.maximum(mean, floor))
                    rec[method]["floored"] = int(np.count_nonzero(mean < floor))
                records.append(rec)
                log(
                    f"{task} {name} split {seed}: "
                    + ", ".join(
                        f"{m} {rec[m]['deviance']:.4g} ({rec[m]['terms']} terms, {rec[m]['antecedents']} antecedents)"
                        for m in METHODS
                    )
                    + f", forest {rec['forest']['deviance']:.4g}"
                )
    return records


def _median(values):
    values = [v for v in values if v is not None]
    return float(np.median(values)) if values else None


def summarize(records):
    """Per task: per table and method the medians over splits; per competitor the median over tables x splits of
    1 - FIRE's test deviance / its test deviance, and whether the target is met."""
    out = {}
    for task in TASKS:
        recs = [r for r in records if r["task"] == task]
        if not recs:
            continue
        tables = list(dict.fromkeys(r["table"] for r in recs))
        per_table = {
            table: {
                method: {
                    key: _median([r[method][key] for r in recs if r["table"] == table])
                    for key in ("deviance", "terms", "linear", "antecedents", "floored")
                }
                for method in (*METHODS, "forest")
            }
            for table in tables
        }
        targets = {}
        for other, goal in TARGETS:
            gains = [1 - r["fire"]["deviance"] / r[other]["deviance"] for r in recs]
            per = {t: _median([g for g, r in zip(gains, recs) if r["table"] == t]) for t in tables}
            targets[other] = {"goal": goal, "median": _median(gains), "per_table": per}
            targets[other]["met"] = targets[other]["median"] >= goal
        out[task] = {"per_table": per_table, "targets": targets}
    return out


# ----------------------------------------------------------------------------------------------------- speed


def negative_log_likelihood(loss: str, X, y, w, b) -> float:
    """sum_i of the loss's negative log-likelihood (log link; half its deviance up to a constant) at eta = b + X w:
    exp(eta) - y eta (Poisson), y exp(-eta) + eta (Gamma), exp((2-p) eta) / (2-p) - y exp((1-p) eta) / (1-p)
    (Tweedie, p = ``POWER``)."""
    eta = b + X @ w
    if loss == "poisson":
        return float(np.sum(np.exp(eta) - y * eta))
    if loss == "gamma":
        return float(np.sum(y * np.exp(-eta) + eta))
    p = POWER
    return float(np.sum(np.exp((2 - p) * eta) / (2 - p) - y * np.exp((1 - p) * eta) / (1 - p)))


def _glum_family(loss: str):
    from glum import TweedieDistribution

    return TweedieDistribution(POWER) if loss == "tweedie" else loss


def glum_path(loss: str, csc, y, lambdas):
    """glum's L1 path along ``alpha = lambda / n``: ([(w, b) per step], seconds of the one call)."""
    from glum import GeneralizedLinearRegressor

    n = len(y)
    started = time.perf_counter()
    model = GeneralizedLinearRegressor(
        family=_glum_family(loss),
        link="log",
        l1_ratio=1.0,
        alpha=[lam / n for lam in lambdas],
        alpha_search=True,
        fit_intercept=True,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence warnings: the objectives below show any gap
        model.fit(csc, y)
    seconds = time.perf_counter() - started
    return [(model.coef_path_[k].copy(), float(model.intercept_path_[k])) for k in range(len(lambdas))], seconds


def speed_case(loss: str, rows: int, trees: int, n_jobs: int, path: Path, seed: int = 0):
    """(unit-column LeafMatrix, y) of ``rows`` rows resampled from the table at ``path`` (its positive rows for
    Gamma)."""
    X, y, _, _ = load(path)
    if loss == "gamma":
        X, y = X[y > 0], y[y > 0]
    draw = np.random.default_rng(seed).integers(0, len(y), rows)
    X, y = X[draw], y[draw]
    rf = RandomForestRegressor(n_estimators=trees, max_depth=3, max_features="sqrt", random_state=seed, n_jobs=n_jobs)
    rf.fit(X[:SPEED_FIT_ROWS], y[:SPEED_FIT_ROWS])
    return leaf_matrix(TreeEnsemble.from_sklearn(rf), X).unit_columns()[0], y


def _warm_up(loss: str):
    """Load the numba kernels of ``loss`` (cached on disk) on a tiny problem, so that no timing includes it."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = rng.gamma(1.0, 1.0, 300) * (rng.random(300) < 0.7 if loss == "tweedie" else 1.0)
    rf = RandomForestRegressor(n_estimators=3, max_depth=2, random_state=0).fit(X, y)
    fit_path(leaf_matrix(TreeEnsemble.from_sklearn(rf), X), y, loss=loss, power=POWER, n_lambdas=3, penalty="l1")


def speed(cfg, log):
    out = []
    for loss in ("tweedie", "gamma", "poisson"):
        _warm_up(loss)
        path = cfg["data_dir"] / f"{cfg['speed_table']}.csv.gz"
        M, y = speed_case(loss, cfg["speed_rows"], cfg["speed_trees"], cfg["n_jobs"], path)
        n, csc = len(y), M.to_csc()
        started = time.perf_counter()
        ours = fit_path(
            M,
            y,
            loss=loss,
            power=POWER,
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
        solutions, glum_s = glum_path(loss, csc, y, lambdas)
        steps = []
        for k, (w_g, b_g) in enumerate(solutions):
            w_o, b_o = ours.coef(k), float(ours.intercepts[k])
            penalty_o, penalty_g = lambdas[k] * np.abs(w_o).sum(), lambdas[k] * np.abs(w_g).sum()
            steps.append(
                {
                    "ratio": lambdas[k] / ours.lambda_max,
                    "rules_ours": int(np.count_nonzero(w_o)),
                    "rules_glum": int(np.count_nonzero(w_g)),
                    "ours_obj": negative_log_likelihood(loss, csc, y, w_o, b_o) + penalty_o,
                    "glum_obj": negative_log_likelihood(loss, csc, y, w_g, b_g) + penalty_g,
                }
            )
        rec = {
            "loss": loss,
            "rows": n,
            "columns": M.shape[1],
            "ours_s": ours_s,
            "glum_s": glum_s,
            "speedup": glum_s / ours_s,
            "not_converged": int(sum(not s.converged for s in ours.steps)),
            "steps": steps,
            # the worst relative excess of our objective over glum's along the path (<= 0: ours as low or lower)
            "worst_gap": max((s["ours_obj"] - s["glum_obj"]) / abs(s["glum_obj"]) for s in steps),
        }
        out.append(rec)
        log(
            f"speed {loss}: {n:,} rows x {M.shape[1]} columns, ours {ours_s:.2f}s, glum {glum_s:.2f}s, "
            f"x{rec['speedup']:.2f}; worst objective gap {rec['worst_gap']:+.2e}"
        )
    return out


# ----------------------------------------------------------------------------------------------------- report


def _fmt(x, spec=".4g"):
    return "n/a" if x is None else format(x, spec)


def render(report) -> str:
    cfg = report["config"]
    out = []
    w = out.append
    w("# Amounts with many zeros: Tweedie and Gamma FIRE, their L1 paths, squared-loss FIRE and glum\n")
    w(
        f"Generated by `{report['command']}` on {report['date']} in {report['seconds'] / 60:.1f} min; machine: "
        f"{report['machine']} (shared with other sessions' jobs: timings are indicative); solver at commit "
        f"{report['solver_version']}.\n"
    )
    if "quality" in report:
        w("## Quality\n")
        w(
            f"Tables of bench/data/amounts ({', '.join(cfg['tables'])}), {cfg['splits']} random splits train / "
            f"validation / test 50 / 16 / 34; a random forest of {cfg['trees']} trees of depth {cfg['depth']} on the "
            f"training part; every FIRE variant through `fit_rules` on that forest, its step by its own validation "
            f"loss among steps with at most {BUDGET} terms (rules + linear terms); Tweedie power {POWER}; Gamma on the "
            f"positive rows only. Test mean deviance, a predicted amount floored at {FLOOR:g} x the training mean. "
            "Medians over splits; antecedents (conditions of the selected rules) beside every figure.\n"
        )
        for task, summary in report["quality"].items():
            w(f"### {task.capitalize()}\n")
            for other, t in summary["targets"].items():
                status = "met" if t["met"] else "missed"
                per = ", ".join(f"{k} {100 * v:.1f}%" for k, v in t["per_table"].items())
                w(
                    f"- FIRE vs {LABELS[other]}: median test deviance {100 * t['median']:.1f}% lower (target "
                    f">= {100 * t['goal']:.0f}%: **{status}**); per table: {per}"
                )
            w("")
            w("| table | method | test deviance | terms | linear | antecedents | floored rows |")
            w("|---|---|---|---|---|---|---|")
            for table, methods in summary["per_table"].items():
                for method, m in methods.items():
                    w(
                        f"| {table} | {LABELS[method]} | {_fmt(m['deviance'])} | {_fmt(m['terms'], '.0f')} | "
                        f"{_fmt(m['linear'], '.0f')} | {_fmt(m['antecedents'], '.0f')} | {_fmt(m['floored'], '.0f')} |"
                    )
            w("")
    if "speed" in report:
        w("## Speed: L1 paths against glum\n")
        w(
            f"{cfg['speed_rows']:,} rows drawn with replacement from {cfg['speed_table']} (synthetic rows from a real "
            "table; Gamma from its positive rows; Poisson reads the expenses as a rate), a forest of "
            f"{cfg['speed_trees']} trees of depth 3 trained on {SPEED_FIT_ROWS:,} of them; its leaf matrix on every "
            "row with unit-norm columns, the same scipy.sparse matrix for both; "
            f"{SPEED_LAMBDAS} lambdas from lambda_max to {SPEED_MIN_RATIO:g} of it, glum's alpha = lambda / n. "
            "Worst gap: the largest (ours - glum's) / glum's objective over the steps (<= 0: ours as low or lower). "
            "Target: glum's time / ours >= 3.\n"
        )
        w("| loss | rows | columns | glum / ours | target | worst objective gap | last step rules (ours, glum) |")
        w("|---|---|---|---|---|---|---|")
        for r in report["speed"]:
            last = r["steps"][-1]
            w(
                f"| {r['loss']} | {r['rows']:,} | {r['columns']} | {r['speedup']:.2f}x | "
                f"{'met' if r['speedup'] >= 3 else 'missed'} | {r['worst_gap']:+.1e} | "
                f"{last['rules_ours']}, {last['rules_glum']} |"
            )
        w("")
    return "\n".join(out) + "\n"


def evaluate(cfg, log=print):
    """The report of ``cfg`` (quality and speed as ``cfg["only"]`` says): its config, records and summaries."""
    report = {"config": {k: str(v) if isinstance(v, Path) else v for k, v in cfg.items()}}
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
    parser.add_argument("--speed-rows", type=int, default=100_000)
    parser.add_argument("--speed-trees", type=int, default=100)
    parser.add_argument("--quick", action="store_true", help="1 split, 100 trees, <= 2000 rows, 20,000 speed rows")
    parser.add_argument("--write", action="store_true", help="write the report to bench/results/amounts.md")
    args = parser.parse_args(argv)
    cfg = {
        "splits": args.splits,
        "trees": args.trees,
        "depth": args.depth,
        "tables": tuple(args.tables),
        "max_rows": None,
        "only": args.only,
        "speed_rows": args.speed_rows,
        "speed_trees": args.speed_trees,
        "n_jobs": 2,
        "data_dir": DATA,
        "speed_table": "rand_hie",
    }
    if args.quick:
        cfg.update(splits=1, trees=100, max_rows=2000, speed_rows=20_000)
    shown = " ".join(argv if argv is not None else sys.argv[1:])
    report = evaluate(cfg)
    report.update(
        command=f"PYTHONPATH=. python bench/amounts.py {shown}".strip(),
        date=datetime.date.today().isoformat(),
        machine=f"{os.cpu_count()} cores ({cpu_model()})",
        solver_version=solver_commit(),
    )
    markdown = render(report)
    print(markdown)
    if args.write:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "amounts.md").write_text(markdown)
        print(f"wrote {RESULTS / 'amounts.md'}")


if __name__ == "__main__":
    main()
