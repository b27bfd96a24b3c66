"""FIRE against InterpretML's Explainable Boosting Machine (issue 39, item 7): test error, terms, and the numbers a
person must read, on the shared regression, binary and count tables.

Protocol: each table (at most ``--max-rows`` rows, drawn once with seed 0: every number is then about that
subsample, "the table"; regression targets standardized on it, so an MSE of 1 is the error of the mean; counts kept
as counts) is cut ``--splits`` times into train / validation / test (60 / 20 / 20, split k seeded by k). Every method
gets the same train + validation rows (80%) and is scored once on the test rows:

- FIRE through ``solver.fitting.fit_rules`` (squared, logistic or Poisson loss) with ``rows=(train, validation)``:
  its forest and path on the train rows, its step chosen on the split's validation rows (a fit's own holdout, the
  split's 20% in place of a random 20% of the 80%). ``fire14``: the defaults at <= 14 terms (``PathSpec(
  max_rules=14)``, ``ForestSpec()``); ``fire30``: at <= 30 terms; ``fire_gb30``: <= 30 terms from a gradient-boosted
  forest (``ForestSpec(kind="gradient_boosting")``, otherwise the defaults; its trees take no missing value, so
  on a table with missing values they are filled with the column's median on the train rows, train and test);
- the EBM (``interpret-core``, n_jobs=1, seeded by the split) on the raw columns (its own binning of text columns
  and missing values; it splits its own 15% off for early stopping): ``ebm_gam`` without interactions (a GAM),
  ``ebm`` with its defaults (pairs on), ``ebm_top14``: its 14 most important terms (``term_importances()`` of the
  ``ebm`` fit) fitted again alone (``interactions`` = those pairs, ``exclude`` = the other mains);
  counts with ``objective="poisson_deviance"``. EBM has no survival objective: the survival tables are left out;
- ``hgb``: scikit-learn's HistGradientBoosting with its defaults on the encoded columns (counts: ``loss="poisson"``,
  as its default squared loss can predict a negative count), a ceiling.

Per fit: test error (MSE of standardized y; log loss; mean Poisson deviance with the predicted mean raised to
``CLIP``), terms (FIRE: rules + linear terms; EBM: shape functions, mains and pairs), the numbers a person reads
(FIRE: one threshold per condition, one contribution per rule, a linear term's coefficient and clipping bounds,
plus its fill where the column has missing values, and the intercept; EBM: every score of every shape function,
``sum(term_scores_[k].size)``, a pair's table counting its cells, its missing and unknown bins included, and the
intercept) and fit seconds (one thread: FIRE_NUM_THREADS=1, n_jobs=1). The summary gives per table the median
over splits of each method, and of the per-split ratios FIRE / EBM (error, numbers read, seconds); per task the
median of those across tables; and issue 39's targets on them (``TARGETS``).

    PYTHONPATH=. FIRE_NUM_THREADS=1 OMP_NUM_THREADS=1 python bench/ebm.py [--datasets ...] [--splits 3]
        [--max-rows 4000] [--out-dir bench/results]

writes bench/results/ebm.json and ebm.md (after every table, so a run cut short keeps what it measured). The
committed results ran ``--splits 5 --max-rows 4000 --jobs 2`` on the 14 tables, the largest first (70 minutes on
two cores shared with other work: an EBM with its defaults takes 15 s to 6 minutes a fit single-threaded, FIRE about
a second); the report's first lines give the command. ``hgb`` is scikit-learn's defaults, untuned, the issue's
"ceiling": no bound, on small tables its log loss or deviance can be the worst of all and the EBM's error below its.
Numbers read leave out the medians ``fire_gb30`` fills missing values with (one per such column).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import expit
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
from sklearn.metrics import log_loss, mean_poisson_deviance

REPO_ROOT = Path(__file__).resolve().parents[1]
# bench/ holds a solver.py (the speed benchmark): make sure "solver" is the package, not that script
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != REPO_ROOT / "bench"]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.machine import cpu_model, solver_commit  # noqa: E402
from bench.stability import BINARY_TABLES, REGRESSION_TABLES  # noqa: E402
from solver import ForestSpec, PathSpec, TableEncoding, binary_labels  # noqa: E402
from solver.fitting import fit_rules  # noqa: E402

DATA_DIR = REPO_ROOT.parent / "shared" / "datasets"
RESULTS_DIR = REPO_ROOT / "bench" / "results"
COUNT_TABLES = ("doctor_visits", "nmes1988_visits")  # in DATA_DIR / "counts"
SUBDIRS = {"classification": "binary", "counts": "counts"}  # other tables: binary where the target has two values
LOSSES = {"regression": "squared", "binary": "logistic", "counts": "poisson"}
CLIP = 0.01  # a predicted count below this is raised to it before the deviance is taken (bench/classes_and_counts.py)
TOP_TERMS = 14
# FIRE's methods: (terms at most, ForestSpec settings on top of the defaults)
FIRE_METHODS = {"fire14": (14, {}), "fire30": (30, {}), "fire_gb30": (30, {"kind": "gradient_boosting"})}
EBM_METHODS = ("ebm_gam", "ebm", "ebm_top14")
METHODS = (*FIRE_METHODS, *EBM_METHODS, "hgb")
EBM_SETTINGS: dict = {"n_jobs": 1}  # on top of interpret's defaults (the smoke test makes them small)
# issue 39's accuracy targets: (task, FIRE method, EBM method, at most this ratio of test errors)
TARGETS = (
    ("regression", "fire14", "ebm_gam", 1.0),
    ("regression", "fire30", "ebm", 1.3),
    ("binary", "fire14", "ebm", 1.0),
)
READ_RATIO = 1 / 20  # "a person reads at most 1/20 of the numbers of the model compared"
# the ratios the summary gives per task: FIRE method / EBM method
PAIRS = tuple((f, e) for f in FIRE_METHODS for e in EBM_METHODS)


def table_path(name: str, data_dir: Path) -> tuple[Path, str | None]:
    """The table's file and its task where its folder says it (``classification/``, ``counts/``), else None."""
    for sub, task in ((None, None), *SUBDIRS.items()):
        path = (data_dir if sub is None else data_dir / sub) / f"{name}.csv.gz"
        if path.exists():
            return path, task
    raise FileNotFoundError(f"no table {name!r} in {data_dir} or its {', '.join(SUBDIRS)} folders")


def load_table(name: str, data_dir: Path = DATA_DIR, max_rows: int | None = None) -> dict:
    """The table's raw feature frame (the EBM's input), its encoding and encoded X (FIRE's and the ceiling's), y
    (0/1 of ``classes`` for a binary target, counts for a count table, else standardized on these rows) and task.
    At most ``max_rows`` rows, drawn with seed 0, as bench/stability.py draws them."""
    path, task = table_path(name, data_dir)
    frame = pd.read_csv(path)
    if max_rows is not None and len(frame) > max_rows:
        rows = np.sort(np.random.default_rng(0).permutation(len(frame))[:max_rows])
        frame = frame.iloc[rows].reset_index(drop=True)
    features, target = frame.iloc[:, :-1], frame.iloc[:, -1].to_numpy()
    encoding = TableEncoding.infer(features)
    table = {"name": name, "features": features, "X": encoding.encode_frame(features), "encoding": encoding}
    if task == "binary" or (task is None and len(pd.unique(target)) == 2):
        classes, y = binary_labels(target)
        return {**table, "y": y, "task": "binary", "classes": classes}
    y = target.astype(np.float64)
    if task == "counts":
        return {**table, "y": y, "task": "counts", "classes": None}
    return {**table, "y": (y - y.mean()) / y.std(), "task": "regression", "classes": None}


def split_rows(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Train / validation / test rows, 60 / 20 / 20, seeded."""
    perm = np.random.default_rng(seed).permutation(n)
    a, b = int(round(0.6 * n)), int(round(0.8 * n))
    return perm[:a], perm[a:b], perm[b:]


def test_error(task: str, y: np.ndarray, mean: np.ndarray) -> float:
    """MSE (regression), log loss (binary: ``mean`` the probability of class 1), mean Poisson deviance (counts)."""
    if task == "regression":
        return float(np.mean((mean - y) ** 2))
    if task == "binary":
        return float(log_loss(y, np.clip(mean, 1e-15, 1 - 1e-15), labels=[0, 1]))
    return float(mean_poisson_deviance(y, np.maximum(mean, CLIP)))


def fire_numbers(rules, X_train: np.ndarray) -> int:
    """The numbers a person reads in a RuleEnsemble: a threshold per condition, a contribution per rule, a linear
    term's coefficient, lower and upper bound (and its fill where its column misses values), the intercept."""
    linear = sum(3 + bool(np.isnan(X_train[:, t.feature_index]).any()) for t in rules.linear)
    return sum(len(rule.conditions) + 1 for rule in rules.rules) + linear + 1


def ebm_numbers(model) -> int:
    """The numbers a person reads in an EBM: every score of every shape function (a pair's every cell) and the
    intercept."""
    return int(sum(scores.size for scores in model.term_scores_)) + int(np.size(model.intercept_))


def fit_fire(method: str, table: dict, train: np.ndarray, val: np.ndarray, seed: int) -> tuple:
    """(the probability / mean of each row of X, the RuleEnsemble, its training rows as it saw them) of one FIRE
    fit on train + validation."""
    budget, forest_settings = FIRE_METHODS[method]
    task, X, y = table["task"], table["X"], table["y"]
    rows = np.concatenate([train, val])
    spec = PathSpec(loss=LOSSES[task], max_rules=budget, random_state=seed)
    forest = ForestSpec(random_state=seed).replace(**forest_settings)
    fill = None
    if forest.kind == "gradient_boosting" and np.isnan(X).any():  # its trees take no missing value
        fill = np.nan_to_num(np.nanmedian(X[train], axis=0))  # a column all missing on train: 0
        X = np.where(np.isnan(X), fill, X)
    local = (np.arange(len(train)), np.arange(len(train), len(rows)))  # rows of X[rows]
    fit = fit_rules(
        X[rows], y[rows], spec, forest=forest, rows=local, encoding=table["encoding"], classes=table["classes"]
    )
    rules = fit.rules

    # a logistic fit's rules add log-odds under the identity link (the documents it has always written); a Poisson
    # fit's link is the log, its predict_mean the rate
    mean = (lambda Z: expit(rules.predict(Z))) if task == "binary" else rules.predict_mean

    def predict(Z):
        return mean(Z if fill is None else np.where(np.isnan(Z), fill, Z))

    return predict, rules, X[train]


def _ebm(task: str, seed: int, **settings):
    from interpret.glassbox import ExplainableBoostingClassifier, ExplainableBoostingRegressor

    settings = {**EBM_SETTINGS, "random_state": seed, **settings}
    if task == "binary":
        return ExplainableBoostingClassifier(**settings)
    return ExplainableBoostingRegressor(**settings, **({"objective": "poisson_deviance"} if task == "counts" else {}))


def top_terms(model, k: int = TOP_TERMS) -> dict:
    """EBM settings that fit only the ``k`` most important terms of ``model``: its pairs as ``interactions``, its
    other mains in ``exclude``."""
    order = np.argsort(-np.asarray(model.term_importances()), kind="stable")[:k]
    kept = [tuple(int(i) for i in model.term_features_[t]) for t in order]
    mains = {term[0] for term in kept if len(term) == 1}
    n_features = len(model.feature_names_in_)
    return {
        "interactions": [term for term in kept if len(term) > 1],
        "exclude": [(i,) for i in range(n_features) if i not in mains],
    }


def ebm_mean(model, task: str):
    return (lambda Z: model.predict_proba(Z)[:, 1]) if task == "binary" else model.predict


def run_split(table: dict, seed: int, log) -> list[dict]:
    """One record per method of one split of a table."""
    task, X, y, features = table["task"], table["X"], table["y"], table["features"]
    train, val, test = split_rows(len(y), seed)
    rows = np.concatenate([train, val])
    records = []

    def record(method, mean, terms, numbers, seconds):
        error = test_error(task, y[test], np.asarray(mean))
        records.append(
            {"table": table["name"], "task": task, "split": seed, "rows": len(y), "method": method, "error": error,
             "terms": terms, "numbers": numbers, "seconds": seconds}
        )  # fmt: skip

    for method in FIRE_METHODS:
        started = time.perf_counter()
        predict, rules, X_train = fit_fire(method, table, train, val, seed)
        seconds = time.perf_counter() - started
        record(method, predict(X[test]), len(rules.rules) + len(rules.linear), fire_numbers(rules, X_train), seconds)
    ebm_models = {}
    for method in EBM_METHODS:
        settings = {"interactions": 0} if method == "ebm_gam" else {}
        if method == "ebm_top14":
            settings = top_terms(ebm_models["ebm"])
        started = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # interpret warns of its own choices (missing values, few samples)
            model = _ebm(task, seed, **settings).fit(features.iloc[rows], y[rows])
        seconds = time.perf_counter() - started
        ebm_models[method] = model
        record(
            method, ebm_mean(model, task)(features.iloc[test]), len(model.term_features_), ebm_numbers(model), seconds
        )
    started = time.perf_counter()
    if task == "binary":
        hgb = HistGradientBoostingClassifier(random_state=seed).fit(X[rows], y[rows])
        mean = hgb.predict_proba(X[test])[:, 1]
    else:
        loss = {"loss": "poisson"} if task == "counts" else {}
        mean = HistGradientBoostingRegressor(random_state=seed, **loss).fit(X[rows], y[rows]).predict(X[test])
    record("hgb", mean, None, None, time.perf_counter() - started)
    log(
        f"{table['name']} ({task}, {len(y)} rows) split {seed}: "
        + ", ".join(f"{r['method']} {r['error']:.3f}/{r['numbers']}/{r['seconds']:.0f}s" for r in records)
    )
    return records


def _median(values) -> float | None:
    values = [v for v in values if v is not None]
    return float(np.median(values)) if values else None


def _ratio(a, b) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def summarize(records: list[dict]) -> dict:
    """Per table: each method's medians over splits and the median per-split ratios of ``PAIRS``; per task: the
    medians of those across tables; the targets."""
    by_fit = {(r["table"], r["split"], r["method"]): r for r in records}
    tables = list(dict.fromkeys(r["table"] for r in records))
    task_of = {r["table"]: r["task"] for r in records}
    per_table = {}
    for t in tables:
        splits = sorted({r["split"] for r in records if r["table"] == t})
        rows = {m: [by_fit[t, s, m] for s in splits if (t, s, m) in by_fit] for m in METHODS}
        methods = {
            m: {key: _median([r[key] for r in fits]) for key in ("error", "terms", "numbers", "seconds")}
            for m, fits in rows.items()
            if fits
        }
        ratios = {}
        for f, e in PAIRS:
            pairs = [(by_fit[t, s, f], by_fit[t, s, e]) for s in splits if (t, s, f) in by_fit and (t, s, e) in by_fit]
            ratios[f"{f}/{e}"] = {
                key: _median([_ratio(a[key], b[key]) for a, b in pairs]) for key in ("error", "numbers", "seconds")
            }
            ratios[f"{f}/{e}"]["fire_better"] = sum(a["error"] < b["error"] for a, b in pairs)
            ratios[f"{f}/{e}"]["splits"] = len(pairs)
        per_table[t] = {"task": task_of[t], "splits": len(splits), "methods": methods, "ratios": ratios}
    per_task = {}
    for task in ("regression", "binary", "counts"):
        names = [t for t in tables if task_of[t] == task]
        if not names:
            continue
        methods = {
            m: {
                key: _median([per_table[t]["methods"][m][key] for t in names if m in per_table[t]["methods"]])
                for key in ("error", "terms", "numbers", "seconds")
            }
            for m in METHODS
        }
        ratios = {
            pair: {
                key: _median([per_table[t]["ratios"][pair][key] for t in names])
                for key in ("error", "numbers", "seconds")
            }
            | {
                "fire_better": sum(per_table[t]["ratios"][pair]["fire_better"] for t in names),
                "splits": sum(per_table[t]["ratios"][pair]["splits"] for t in names),
            }
            for pair in (f"{f}/{e}" for f, e in PAIRS)
        }
        per_task[task] = {"tables": names, "methods": methods, "ratios": ratios}
    targets = []
    for task, fire, ebm, bound in TARGETS:
        if task not in per_task:
            continue
        ratio = per_task[task]["ratios"][f"{fire}/{ebm}"]
        targets.append(
            {"task": task, "fire": fire, "ebm": ebm, "bound": bound, "error_ratio": ratio["error"],
             "met": ratio["error"] is not None and ratio["error"] <= bound, "numbers_ratio": ratio["numbers"],
             "numbers_met": ratio["numbers"] is not None and ratio["numbers"] <= READ_RATIO}
        )  # fmt: skip
    return {"tables": tables, "per_table": per_table, "per_task": per_task, "targets": targets}


def _fmt(value, digits=3) -> str:
    if value is None:
        return "—"
    return f"{value:,.0f}" if digits == 0 else f"{value:.{digits}f}"


LABELS = {
    "fire14": "FIRE, defaults, ≤ 14 terms",
    "fire30": "FIRE, defaults, ≤ 30 terms",
    "fire_gb30": "FIRE on a gradient-boosted forest, ≤ 30 terms",
    "ebm_gam": "EBM without interactions (a GAM)",
    "ebm": "EBM, defaults",
    "ebm_top14": "EBM, its 14 most important terms refitted",
    "hgb": "histogram gradient boosting (a ceiling)",
}
ERRORS = {"regression": "test MSE (standardized y)", "binary": "test log loss", "counts": "test Poisson deviance"}


def render_markdown(report: dict) -> str:
    s, cfg = report["summary"], report["config"]
    lines = [
        "# FIRE against the Explainable Boosting Machine (issue 39, item 7)",
        "",
        f"Generated by `{report['command']}` ({report['seconds']:.0f} s, solver {report['solver']}, interpret-core "
        f"{report['interpret']}, {report['machine']}, one thread: FIRE_NUM_THREADS=1, EBM n_jobs=1; the machine's two "
        "cores shared with other work, so seconds are rough).",
        "",
        f"Tables: {', '.join(s['tables'])}; at most {cfg['max_rows']} rows each (drawn once, seed 0); {cfg['splits']} "
        "split(s) 60/20/20, every method fitted on train + validation and scored on test; FIRE's step chosen on the "
        "validation rows, the EBM's early stopping on its own 15% of them. Survival tables: none (EBM has no survival "
        'objective). Counts: EBM with `objective="poisson_deviance"`, FIRE with the Poisson loss, the ceiling with '
        '`loss="poisson"`. The protocol and how numbers read are counted: `bench/ebm.py`\'s docstring.',
        "",
        "## Targets (issue 39)",
        "",
        "Medians across tables of each table's median over splits of the per-split ratio FIRE / EBM.",
        "",
        "| task | FIRE / EBM | test error ratio | bound | met | numbers read ratio | ≤ 1/20 |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {t['task']} | {t['fire']} / {t['ebm']} | {_fmt(t['error_ratio'])} | {t['bound']} | "
        f"{'met' if t['met'] else 'missed'} | {_fmt(t['numbers_ratio'], 4)} | "
        f"{'met' if t['numbers_met'] else 'missed'} |"
        for t in s["targets"]
    ]
    for task, rows in s["per_task"].items():
        lines += [
            "",
            f"## {task.capitalize()} ({', '.join(rows['tables'])})",
            "",
            "Medians across tables of each table's median over splits.",
            "",
            f"| model | {ERRORS[task]} | terms | numbers a person reads | fit seconds |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {LABELS[m]} | {_fmt(row['error'], 4)} | {_fmt(row['terms'], 1)} | {_fmt(row['numbers'], 0)} | "
            f"{_fmt(row['seconds'], 1)} |"
            for m, row in rows["methods"].items()
        ]
        lines += [
            "",
            "| FIRE / EBM | test error ratio | numbers read ratio | seconds ratio | FIRE better (splits) |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {pair} | {_fmt(r['error'])} | {_fmt(r['numbers'], 4)} | {_fmt(r['seconds'])} | "
            f"{r['fire_better']} of {r['splits']} |"
            for pair, r in rows["ratios"].items()
        ]
    lines += [
        "",
        "## Per table",
        "",
        "Test error / numbers read per method (medians over splits), and FIRE14 / GAM, FIRE30 / EBM test error ratios.",
        "",
        "| table | " + " | ".join(METHODS) + " | fire14 / ebm_gam | fire30 / ebm |",
        "|---|" + "---|" * (len(METHODS) + 2),
    ]
    for t, row in s["per_table"].items():
        cells = [
            f"{_fmt(row['methods'][m]['error'])} / {_fmt(row['methods'][m]['numbers'], 0)}"
            if m in row["methods"]
            else "—"
            for m in METHODS
        ]
        ratios = [_fmt(row["ratios"][pair]["error"]) for pair in ("fire14/ebm_gam", "fire30/ebm")]
        lines.append(f"| {t} | " + " | ".join(cells + ratios) + " |")
    return "\n".join(lines) + "\n"


def write_report(report: dict, out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "ebm.json").write_text(json.dumps(report, indent=1))
    markdown = out_dir / "ebm.md"
    markdown.write_text(render_markdown(report))
    return markdown


def say(message: str) -> None:
    print(message, flush=True)


def run_table(name: str, splits: int, data_dir: Path, max_rows: int | None, log=say) -> list[dict]:
    """The records of every split of one table."""
    table = load_table(name, data_dir, max_rows)
    return [record for seed in range(splits) for record in run_split(table, seed, log)]


def evaluate(datasets, splits, data_dir=DATA_DIR, max_rows=4000, out_dir=None, command="", log=print, jobs=1) -> dict:
    """Records of every table and split and their summary; written to ``out_dir`` after every table where given.
    ``jobs`` > 1 runs that many tables at once, each in its own process (each still one thread)."""
    import interpret

    started = time.perf_counter()
    records: list[dict] = []
    report: dict = {}

    def add(table_records):
        nonlocal report
        records.extend(table_records)
        records.sort(key=lambda r: list(datasets).index(r["table"]))  # the report lists tables in the order asked
        report = {
            "config": {"datasets": list(datasets), "splits": splits, "max_rows": max_rows, "jobs": jobs},
            "command": command,
            "solver": solver_commit(),
            "interpret": interpret.__version__,
            "machine": cpu_model(),
            "seconds": time.perf_counter() - started,
            "summary": summarize(records),
            "records": records,
        }
        if out_dir is not None:
            write_report(report, out_dir)

    if jobs == 1:
        for name in datasets:
            add(run_table(name, splits, data_dir, max_rows, log))
        return report
    # spawned, not forked: a child starts with no numba threads or interpret state copied from this process
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(run_table, name, splits, data_dir, max_rows) for name in datasets]
        for future in as_completed(futures):
            add(future.result())
    return report


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="*", default=[*REGRESSION_TABLES, *BINARY_TABLES, *COUNT_TABLES])
    parser.add_argument("--splits", type=int, default=3, help="60/20/20 splits per table, seeded 0, 1, ...")
    parser.add_argument("--max-rows", type=int, default=4000, help="subsample larger tables to this many rows")
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR)
    parser.add_argument("--out-dir", type=Path, default=RESULTS_DIR)
    parser.add_argument("--jobs", type=int, default=1, help="tables run at once, one process each")
    args = parser.parse_args()
    command = "PYTHONPATH=. FIRE_NUM_THREADS=1 OMP_NUM_THREADS=1 python bench/ebm.py " + " ".join(sys.argv[1:])
    report = evaluate(
        args.datasets,
        args.splits,
        args.data_dir,
        args.max_rows,
        args.out_dir,
        command.strip(),
        log=say,
        jobs=args.jobs,
    )
    print(f"wrote {args.out_dir / 'ebm.md'} in {report['seconds']:.0f}s")


if __name__ == "__main__":
    main()
