"""A model's drift on its own training rows, over every table under ../shared/datasets (issue 37, item 1): a model
sent the rows it was trained on must flag nothing.

For each table (every ``*.csv.gz`` under the folder and its subfolders: regression at the top, classification,
multiclass, counts, survival; the target is the last column, a survival table ends with ``time`` and ``event``), as
shipped and with its numeric feature columns standardised (as the issue's three tables were: every value then has
17 significant digits):

1. the client reads the file with pandas (its floats are the rows it holds) and writes it as CSV text, every float
   with 17 significant digits;
2. the text is parsed as an upload is (``app.core.table_parsing.parse_table`` and ``app.core.tables.validate_table``:
   the task by folder, a text column with more levels than FIRE_MAX_CATEGORIES dropped, as the upload's 422 says to);
3. a small model is trained with the library, as a path job trains it (``fit_rules``: a 100-tree forest of depth
   3, the task's default loss, at most 15 rules) and profiled as promotion profiles it
   (``app.core.drift.training_profile`` on every row);
4. the client sends the rows it holds as JSON text (MLflow's ``dataframe_records``, each float as ``repr`` writes
   it, a missing value null), which goes through the scoring body's parser and ``score_rows`` (``app.api.scoring``,
   ``app.core.model_scoring``) to the rows drift counts, binned by ``app.core.drift.Binning``;
5. the counts are compared with the profile (``drift_figures``, the default thresholds).

Reported per table: the largest PSI of a column (target: below 0.01), the columns and rules flagged (target: none),
and the largest |log(live rate / training rate)| of a rule. Beside them, "before": the same rows with the parsing
and edges this release replaced (pandas' default CSV float parser, the training deciles themselves as edges),
the same model.

    PYTHONPATH=. python bench/drift_self.py [--datasets ../shared/datasets] [--out bench/results/drift_self.md]
"""

from __future__ import annotations

import argparse
import datetime
import io
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
# bench/ holds a solver.py (the speed benchmark): make sure "solver" is the package, not that script
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != REPO / "bench"]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from app.api.scoring import parse_body  # noqa: E402
from app.core.config import Settings  # noqa: E402
from app.core.datasets import TASK_LOSSES  # noqa: E402
from app.core.drift import (  # noqa: E402
    Binning,
    DriftThresholds,
    TrainingProfile,
    drift_figures,
    training_profile,
)
from app.core.model_scoring import ScoringModel, score_rows  # noqa: E402
from app.core.table_parsing import parse_table  # noqa: E402
from app.core.tables import validate_table  # noqa: E402
from bench.machine import cpu_model, solver_commit  # noqa: E402
from solver import RuleEnsemble  # noqa: E402
from solver.encoding import TableEncoding  # noqa: E402
from solver.fitting import fit_rules  # noqa: E402
from solver.spec import ForestSpec, PathSpec  # noqa: E402

TASKS = {"classification": "classification", "multiclass": "multiclass", "counts": "count", "survival": "survival"}
FOREST = ForestSpec(n_estimators=100, max_depth=3, max_features="sqrt", random_state=0)


class _Kept:
    """The encoded rows ``score_rows`` hands to drift counting (its RowCounter), kept to be binned."""

    def __init__(self):
        self.X: np.ndarray | None = None

    def record(self, scoring, X):
        self.X = X

    def record_unseen(self, scoring, column, n_rows):
        raise AssertionError(f"{n_rows} training rows refused for an unseen level of {column}")


def _task_of(path: Path, root: Path) -> str:
    folder = path.relative_to(root).parts[0] if len(path.relative_to(root).parts) > 1 else ""
    return TASKS.get(folder, "regression")


def _client_table(path: Path, settings: Settings) -> pd.DataFrame:
    """The table as the client reads it, less the text columns the service would refuse (too many levels)."""
    frame = pd.read_csv(path)
    refused = [
        name
        for name in frame.columns[:-1]
        if frame[name].dtype == object and frame[name].nunique() > settings.max_categories
    ]
    return frame.drop(columns=refused)


def _standardised(frame: pd.DataFrame, task: str) -> pd.DataFrame:
    """The table with each numeric feature column as (x - mean) / sd, as the client computes it."""
    targets = [name for name in _fields(frame, task) if name is not None]
    frame = frame.copy()
    for name in frame.columns:
        if name not in targets and frame[name].dtype != object and frame[name].std() > 0:
            frame[name] = (frame[name] - frame[name].mean()) / frame[name].std()
    return frame


def _fields(frame: pd.DataFrame, task: str) -> tuple[str, str | None]:
    """(target, event) column names."""
    return (frame.columns[-2], frame.columns[-1]) if task == "survival" else (frame.columns[-1], None)


def _uploaded(frame: pd.DataFrame, task: str, settings: Settings, default_parser: bool = False):
    """(encoding, X, y, classes) of the table's CSV text parsed as an upload is (``default_parser``: by pandas'
    default float parser, as before issue 37)."""
    data = frame.to_csv(index=False, float_format="%.17g").encode()
    if default_parser:
        parsed = pd.read_csv(io.BytesIO(data))
    else:
        _, parsed = parse_table(data, "text/csv", "table.csv", None, settings)
    target, event = _fields(frame, task)
    encoding, X, y, _, classes, _ = validate_table(parsed, target, settings, task, event=event)
    return encoding, X, y, classes


def _sent_back(frame: pd.DataFrame, task: str, scoring: ScoringModel) -> np.ndarray:
    """The client's rows as a JSON scoring body, through the service's body parser to the rows drift counts."""
    features = frame.drop(columns=[name for name in _fields(frame, task) if name is not None])
    rows = [
        {name: None if isinstance(value, float) and math.isnan(value) else value for name, value in row.items()}
        for row in features.to_dict(orient="records")
    ]
    body = json.dumps({"dataframe_records": rows}).encode()
    kept = _Kept()
    score_rows(scoring, parse_body(body, "application/json").read_table, False, len(rows), counter=kept)
    assert kept.X is not None
    return kept.X


def _before_profile(ensemble: RuleEnsemble, encoding: TableEncoding, X: np.ndarray) -> TrainingProfile:
    """The profile as the release before issue 37 took it: the training deciles themselves as edges."""
    profile = training_profile(ensemble, encoding, X)
    position = 0
    for column, spec in zip(profile.columns, encoding.columns):
        if spec.kind == "numeric":
            values = X[:, position]
            present = values[~np.isnan(values)]
            column.edges = np.unique(np.quantile(present, np.linspace(0.1, 0.9, 9))).tolist() if len(present) else []
            bins = np.searchsorted(column.edges, values, side="left")
            column.bins = [str(k) for k in range(len(column.edges) + 1)] + ["missing"]
            column.rows = np.bincount(
                np.where(np.isnan(values), len(column.edges) + 1, bins), minlength=len(column.bins)
            ).tolist()
            position += 1
        else:
            position += len(spec.categories)
    return profile.model_copy(update={"version": 1})


def _figures(profile: TrainingProfile, ensemble: RuleEnsemble, encoding: TableEncoding, X_live: np.ndarray) -> dict:
    counts = Binning(ensemble, encoding, profile).count(X_live)
    figures = drift_figures(profile, counts, DriftThresholds())
    psis = {column.column: column.psi or 0.0 for column in figures.columns}
    worst = max(psis, key=psis.get) if any(psis.values()) else "-"  # "-": every PSI is 0
    log_ratios = [
        abs(math.log(rule.ratio)) if rule.ratio else math.inf for rule in figures.rules if rule.training_rate > 0
    ]
    return {
        "max_psi": max(psis.values(), default=0.0),
        "max_psi_column": worst,
        "flagged_columns": [column.column for column in figures.columns if column.drifted],
        "flagged_rules": [rule.rule for rule in figures.rules if rule.drifted],
        "max_abs_log_ratio": max(log_ratios, default=0.0),
    }


def measure(path: Path, root: Path, settings: Settings, standardised: bool) -> dict:
    task = _task_of(path, root)
    started = time.perf_counter()
    frame = _client_table(path, settings)
    if standardised:
        frame = _standardised(frame, task)
    encoding, X, y, classes = _uploaded(frame, task, settings)
    spec = PathSpec(loss=TASK_LOSSES[task], max_rules=15, n_lambdas=20)
    ensemble = fit_rules(X, y, spec, forest=FOREST, encoding=encoding, classes=classes).rules
    scoring = ScoringModel("bench", path.name, 1, "bench", ensemble, encoding, classes=classes)
    X_live = _sent_back(frame, task, scoring)
    profile = training_profile(ensemble, encoding, X)
    _, X_before, _, _ = _uploaded(frame, task, settings, default_parser=True)
    return {
        "table": str(path.relative_to(root)).removesuffix(".csv.gz") + (" (standardised)" if standardised else ""),
        "task": task,
        "rows": len(X),
        "columns": len(encoding.columns),
        "numeric": sum(column.kind == "numeric" for column in encoding.columns),
        "rules": len(ensemble.rules),
        "live_rows_equal_training": bool(np.array_equal(X_live, X, equal_nan=True)),
        "after": _figures(profile, ensemble, encoding, X_live),
        "before": _figures(_before_profile(ensemble, encoding, X_before), ensemble, encoding, X_live),
        "seconds": time.perf_counter() - started,
    }


def _row(result: dict) -> str:
    after, before = result["after"], result["before"]
    return (
        f"| {result['table']} | {result['task']} | {result['rows']} | {result['numeric']}/{result['columns']} "
        f"| {result['rules']} | {'yes' if result['live_rows_equal_training'] else 'NO'} "
        f"| {after['max_psi']:.2g} ({after['max_psi_column']}) | {len(after['flagged_columns'])} "
        f"| {len(after['flagged_rules'])} | {after['max_abs_log_ratio']:.2g} "
        f"| {before['max_psi']:.3g} ({before['max_psi_column']}) | {len(before['flagged_columns'])} "
        f"| {len(before['flagged_rules'])} | {before['max_abs_log_ratio']:.2g} |"
    )


def report(results: list[dict], seconds: float) -> str:
    met = all(r["after"]["max_psi"] < 0.01 and not r["after"]["flagged_columns"] for r in results) and all(
        not r["after"]["flagged_rules"] for r in results
    )
    flagged_before = [r for r in results if r["before"]["flagged_columns"]]
    worst_run = max(results, key=lambda r: r["before"]["max_psi"])
    worst = worst_run["before"]
    rules_before = sum(len(r["before"]["flagged_rules"]) for r in results)
    lines = [
        "# A model's drift on its own training rows, every shared table (bench/drift_self.py)",
        "",
        f"{datetime.date.today().isoformat()}, solver commit {solver_commit()}, {cpu_model()}, {seconds:.0f} s.",
        "",
        "Each table, as shipped and with its numeric feature columns standardised, is written as CSV text (floats",
        "with 17 significant digits), parsed as an upload, a small model trained with the library (100 trees of",
        "depth 3, the task's loss, at most 15 rules) and profiled as at promotion; the rows the client holds are",
        "sent back as a JSON scoring body (`repr` floats) through the service's parser and binned (default",
        "thresholds: PSI 0.25, firing ratio 2 with p < 0.001, 100 rows).",
        "`X equal`: the rows drift counted are bit for bit the uploaded rows. *Before*: the same model and rows with",
        "the parsing and bins replaced by issue 37 (pandas' default float parser, the training deciles as edges).",
        "",
        f"Target (every PSI < 0.01, nothing flagged on any table): **{'met' if met else 'NOT met'}**.",
        "",
        f"Before: {len(flagged_before)} of {len(results)} runs flagged a column of the model's own training rows",
        f"({', '.join(r['table'] for r in flagged_before) or 'none'}); the largest PSI was {worst['max_psi']:.3g},",
        f"{worst['max_psi_column']} of {worst_run['table']}. Rules flagged before: {rules_before}"
        + (
            " (a rule compares in float32, where a unit in the last place of a float64 rarely shows)."
            if not rules_before
            else "."
        ),
        "",
        "| table | task | rows | numeric/columns | rules | X equal | max PSI (column) | flagged columns "
        "| flagged rules | max abs log ratio | before: max PSI (column) | before: flagged columns "
        "| before: flagged rules | before: max abs log ratio |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        *(_row(result) for result in results),
        "",
        "    PYTHONPATH=. python bench/drift_self.py",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=Path, default=REPO.parent / "shared" / "datasets")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "drift_self.md")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON here")
    parser.add_argument("--tables", nargs="*", help="only these tables (names without .csv.gz)")
    args = parser.parse_args()
    settings = Settings()
    started = time.perf_counter()
    results = []
    for path in sorted(args.datasets.rglob("*.csv.gz")):
        if args.tables and path.name.removesuffix(".csv.gz") not in args.tables:
            continue
        for standardised in (False, True):
            result = measure(path, args.datasets, settings, standardised)
            results.append(result)
            after = result["after"]
            print(
                f"{result['table']:50s} max PSI {after['max_psi']:.2g}, flagged {len(after['flagged_columns'])} "
                f"columns {len(after['flagged_rules'])} rules; before {result['before']['max_psi']:.3g} "
                f"({result['seconds']:.1f} s)",
                flush=True,
            )
    args.out.write_text(report(results, time.perf_counter() - started))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
