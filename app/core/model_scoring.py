"""Scoring with a model: rows in the training table's original columns, encoded as it was, into predictions,
probabilities of a classifier's classes, and the rules (and linear terms) that explain each row."""

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol

import numpy as np

from app.core.errors import FieldFault, Invalid, TooLarge
from app.core.tables import (
    EXPOSURE_RANGE,
    MAX_ABS_VALUE,
    MAX_ROWS_NAMED,
    exposure_in_range,
    max_offset,
    table_invalid,
)
from solver import RuleEnsemble, probability
from solver.encoding import TableEncoding, TableError
from solver.rules import INVERSE_LINKS


@dataclass
class Rows:
    """Rows to score as an entrance read them: each column's values, how many rows, the field that holds them
    (faults name ``{location}.{column}``), and the column names as sent (``names``: a name twice where it was sent
    twice; None: the table's keys)."""

    table: Mapping[str, Sequence]
    n_rows: int
    location: str
    names: Sequence[str] | None = None


# the column names in the model's order -> the rows
TableReader = Callable[[list[str]], Rows]


@dataclass
class ScoringModel:
    id: str
    name: str
    version: int
    tenant: str
    ensemble: RuleEnsemble
    encoding: TableEncoding
    checked_at: float = 0.0  # when the stored model was last seen to exist (time.monotonic)
    classes: list | None = None  # a classifier's labels (binary: its rules add log-odds of classes[1])
    exposure: str | None = None  # the exposure column of a rate model: a row that has it gets rate x exposure
    offset: str | None = None  # the offset column: a row that has it gets it added to its score (before the link)

    @property
    def row_columns(self) -> list[str]:
        """The columns scored rows may hold beside the features: the exposure and offset columns, where named."""
        return [column for column in (self.exposure, self.offset) if column is not None]


class RowCounter(Protocol):
    """What counts scored rows for drift (app.core.monitoring.FiringMonitor)."""

    def record(self, scoring: ScoringModel, X: np.ndarray) -> None: ...

    def record_unseen(self, scoring: ScoringModel, column: str, n_rows: int) -> None: ...


@dataclass
class Scores:
    # the fields /predict answers where they are set (predictions always)
    ANSWERED: ClassVar[tuple[str, ...]] = (
        "probabilities",
        "classes",
        "explanations",
        "contributions",
        "linear_contributions",
        "times",
        "survival",
    )
    # numbers (regression), rates (counts), or labels (a binary classifier: classes[1] where its log-odds are > 0;
    # K classes: the class of the largest score, the first on ties)
    predictions: list
    explanations: list[list[int]] | None  # indices of the rules that fired, per row, where asked for
    # what each of those rules adds: to the score (log-odds for a binary classifier, log rate for counts), or a
    # list of K amounts, one per class
    contributions: list[list] | None = None
    # a binary classifier's: of classes[1] (solver.probability of the log-odds); K classes: a row of K per row
    probabilities: list[float] | list[list[float]] | None = None
    classes: list | None = None
    # a model with linear terms, where explanations were asked for: what each linear term adds, per row, in the
    # order of the model's linear terms (with the rules' contributions, the score minus the intercept)
    linear_contributions: list[list] | None = None
    # a Cox model's, where times were asked for: S(t | x) per row at each of times (RuleEnsemble.predict_survival)
    times: list[float] | None = None
    survival: list[list[float]] | None = None


def check_times(scoring: ScoringModel, times: Sequence[float] | None, field: str) -> None:
    """Survival times to score at: only for a Cox model (its rules keep a baseline hazard), at least one, each in
    [0, the last follow-up time of the model's training rows] (the library's check, ``RuleEnsemble.survival_times``).
    A time past the last follow-up is refused, not answered with the last value: no training row was at risk there,
    so S(t | x) was never estimated (scikit-survival's step functions raise there too; lifelines repeats the last
    value)."""
    if times is None:
        return
    baseline = scoring.ensemble.baseline_hazard
    if baseline is None:
        raise Invalid(
            "Only survival models (Cox loss) have survival curves.",
            [FieldFault(field, "times for a model without a baseline hazard", "leave times out for this model")],
        )
    last = float(baseline[0][-1])
    if not times:
        raise Invalid(
            "Survival times are a non-empty list.", [FieldFault(field, "empty", f"send times from 0 to {last:g}")]
        )
    try:
        scoring.ensemble.survival_times(times)
    except ValueError as error:
        raise Invalid(
            f"Survival times are from 0 to {last:g}, the last follow-up time of the model's training rows.",
            [
                FieldFault(
                    field,
                    str(error),
                    f"ask for times from 0 to {last:g}: past it no training row was at risk, so S(t | x) is not "
                    "estimated there",
                )
            ],
        ) from error


def score_rows(
    scoring: ScoringModel,
    read_table: TableReader,
    explain: bool,
    max_rows: int,
    times: Sequence[float] | None = None,
    counter: RowCounter | None = None,
) -> Scores:
    """Predictions for rows in the training table's original columns. ``read_table(column_names)`` gives
    (column -> values, n_rows, the field holding the rows, which faults name as ``{field}.{column}``); more than
    ``max_rows`` rows (FIRE_MAX_SCORING_ROWS) are refused. ``times`` (a Cox model, checked by :func:`check_times`):
    each row's survival curve at these times beside its hazard ratio. A rate model with an exposure column
    (``scoring.exposure``) multiplies the rate of a row by its exposure where the rows hold that column; a model
    with an offset column (``scoring.offset``) adds a row's offset to its score before the inverse link
    (``FireRegressor.predict(X, offset=)``) where the rows hold that column. ``counter``: counts the encoded rows
    for drift, and the rows refused for a level training never had."""
    row_columns = scoring.row_columns
    rows = read_table([*scoring.encoding.column_names, *row_columns])
    table, n_rows, location = rows.table, rows.n_rows, rows.location
    check_columns(scoring, list(table) if rows.names is None else rows.names, location)
    exposure = offset = None
    if scoring.exposure is not None and scoring.exposure in table:  # not a feature: the rows' rate multiplier
        exposure = _exposures(table[scoring.exposure], n_rows, f"{location}.{scoring.exposure}")
    if scoring.offset is not None and scoring.offset in table:  # not a feature: added to the rows' scores
        limit = max_offset(scoring.ensemble.link)
        offset = _offsets(table[scoring.offset], n_rows, f"{location}.{scoring.offset}", limit)
    if row_columns:
        table = {name: values for name, values in table.items() if name not in row_columns}
    if n_rows > max_rows:
        raise TooLarge(
            f"{n_rows} rows in one request, more than the limit of {max_rows}.",
            [
                FieldFault(
                    location,
                    f"{n_rows} rows",
                    "split the rows over several requests or raise FIRE_MAX_SCORING_ROWS",
                )
            ],
        )
    check_numeric_values(scoring.encoding, table, location)
    try:
        X = scoring.encoding.encode(table, n_rows, location)
    except TableError as error:
        if counter is not None:
            for column in error.unseen_columns:
                counter.record_unseen(scoring, column, n_rows)
        raise table_invalid(error) from error
    outside = np.abs(X) > MAX_ABS_VALUE
    if outside.any():
        names = sorted({scoring.encoding.feature_names[j] for j in np.flatnonzero(outside.any(axis=0))})
        raise Invalid(
            "Some values are infinite or out of range.",
            [
                FieldFault(
                    f"{location}.{name.split('=')[0]}",
                    f"infinite or beyond ±{MAX_ABS_VALUE:.3g}",
                    "send finite numbers in range, or null for a missing value",
                )
                for name in names
            ],
        )
    if counter is not None:
        counter.record(scoring, X)
    explanations = contributions = linear_contributions = None
    if explain:
        # per row the rules that fired, then every linear term ({"linear": id}); a contribution is a list of K
        # amounts for K classes
        explained = scoring.ensemble.explain(X)
        explanations = [[entry["id"] for entry in row if "id" in entry] for row in explained]
        contributions = [[entry["contribution"] for entry in row if "id" in entry] for row in explained]
        if scoring.ensemble.linear:
            linear_contributions = [[entry["contribution"] for entry in row if "linear" in entry] for row in explained]
    ensemble = scoring.ensemble
    scores = ensemble.predict(X)  # (n,), or (n, K) per class
    check_finite(scores, location, "score")
    if ensemble.link == "softmax":  # K classes: the label of the largest score, as FireClassifier.predict
        classes = list(ensemble.classes or ())  # the model's classes: those of its rules
        labels = [classes[k] for k in np.argmax(scores, axis=1).tolist()]
        probabilities = INVERSE_LINKS["softmax"](scores)  # RuleEnsemble.predict_mean of these scores
        return Scores(labels, explanations, contributions, probabilities.tolist(), classes, linear_contributions)
    if scoring.classes is None:  # the prediction, or the rate exp(score) of counts (predict_mean)
        with np.errstate(over="ignore"):  # a prediction past float64's range is refused just below, not warned of
            mean = INVERSE_LINKS[ensemble.link](scores if offset is None else scores + offset)
            if exposure is not None:
                mean = mean * exposure
        check_finite(mean, location, "prediction")
        survival = None if times is None else ensemble.predict_survival(X, np.asarray(times, dtype=np.float64))
        return Scores(
            mean.tolist(),
            explanations,
            contributions,
            linear_contributions=linear_contributions,
            times=None if times is None else list(times),
            survival=None if survival is None else survival.tolist(),
        )
    labels = [scoring.classes[positive] for positive in (scores > 0.0).tolist()]
    return Scores(
        labels, explanations, contributions, probability(scores).tolist(), scoring.classes, linear_contributions
    )


def check_columns(scoring: ScoringModel, given: Sequence[str], location: str) -> None:
    """:func:`column_faults`, raised as one Invalid."""
    faults = column_faults(scoring, given, location)
    if faults:
        raise Invalid("The columns do not match the training table's.", faults)


def column_faults(
    scoring: ScoringModel, given: Sequence[str], location: str, also: Sequence[str] = ()
) -> list[FieldFault]:
    """The one rule of the columns of scored rows, whichever entrance brings them (``/predict``, ``/invocations``, a
    batch file's header): every column of the model's training table, once; its exposure and offset columns, and
    ``also`` (a batch's id column), at most once; no other column. A fault per column that breaks it
    (``{location}.{column}``)."""
    expected = scoring.encoding.column_names
    allowed = {*expected, *scoring.row_columns, *also}
    counts = Counter(given)
    faults = [
        FieldFault(f"{location}.{name}", f"given {count} times", "send each column once")
        for name, count in counts.items()
        if count > 1
    ]
    faults += [
        FieldFault(f"{location}.{name}", "missing column", "send every column of the training table")
        for name in expected
        if name not in counts
    ]
    faults += [
        FieldFault(
            f"{location}.{name}", "unknown column", f"remove it; the columns are {[*expected, *scoring.row_columns]}"
        )
        for name in counts
        if name not in allowed
    ]
    return faults


def check_finite(values: np.ndarray, location: str, what: str) -> None:
    """The guard behind the bounds on what is scored (features within ±MAX_ABS_VALUE, exposures and offsets within
    theirs: app.core.tables): a row whose ``what`` is not a finite number is refused, naming it, and never answered
    (JSON has no word for infinity or NaN)."""
    finite = np.isfinite(values)
    if finite.all():
        return
    bad = np.flatnonzero(~finite.reshape(len(values), -1).all(axis=1))
    named = ", ".join(str(row) for row in bad[:MAX_ROWS_NAMED]) + (", ..." if len(bad) > MAX_ROWS_NAMED else "")
    raise Invalid(
        f"The {what} of {len(bad)} row{'s' if len(bad) != 1 else ''} is not a finite number.",
        [
            FieldFault(
                location,
                f"rows {named}: {what} {float(np.ravel(values[bad[0]])[0])!r}",
                "send values nearer those of the training table (and offsets, exposures within their bounds)",
            )
        ],
    )


def check_numeric_values(encoding: TableEncoding, table: Mapping[str, Sequence], location: str) -> None:
    """Refuse booleans in numeric columns (JSON ``true`` is no number, though Python would read it as 1). A numpy
    array of numbers (a batch chunk's column) holds none: it is not read value by value."""
    faults = [
        FieldFault(f"{location}.{column.name}", "true/false in a numeric column", "send numbers (or null)")
        for column in encoding.columns
        if column.kind == "numeric"
        and column.name in table
        and not _holds_numbers_only(table[column.name])
        and any(isinstance(value, bool) for value in table[column.name])
    ]
    if faults:
        raise Invalid("Some values are not numbers.", faults)


def _holds_numbers_only(values: Sequence) -> bool:
    return isinstance(values, np.ndarray) and values.dtype.kind in "iuf"


def _row_numbers(values: Sequence, missing: float, what: str, field: str, fix: str) -> np.ndarray:
    """A scored column of row numbers (not a feature), a missing value counting ``missing``."""
    try:
        return np.array([missing if value is None else float(value) for value in values], dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise Invalid(
            f"The {what} column holds values that are not numbers.", [FieldFault(field, str(error), fix)]
        ) from error


def _offsets(values: Sequence, n_rows: int, field: str, limit: float) -> np.ndarray:
    """A scored offset column: numbers within ±``limit`` (``app.core.tables.max_offset`` of the model's link; a
    missing one, null or a CSV's empty cell, counts 0: the score itself)."""
    fix = f"send the rows' offsets as numbers within ±{limit:.4g} (null or 0 adds nothing), or leave the column out"
    offset = _row_numbers(values, 0.0, "offset", field, fix)
    offset[np.isnan(offset)] = 0.0
    bad = ~(np.abs(offset) <= limit)
    if len(offset) != n_rows or bad.any():
        row = int(np.flatnonzero(bad)[0]) if bad.any() else 0
        raise Invalid(
            f"Offsets are numbers within ±{limit:.4g}, one per row.",
            [FieldFault(field, f"row {row} has {values[row]!r}", fix)],
        )
    return offset


def _exposures(values: Sequence, n_rows: int, field: str) -> np.ndarray:
    """A scored exposure column: numbers in [MIN_EXPOSURE, MAX_EXPOSURE] (> 0, and a factor a rate can take without
    overflowing: app.core.tables; a missing one counts 1, the rate itself)."""
    fix = f"send the rows' exposures as numbers {EXPOSURE_RANGE}, or leave the column out"
    exposure = _row_numbers(values, 1.0, "exposure", field, fix)
    bad = ~exposure_in_range(exposure)
    if len(exposure) != n_rows or bad.any():
        row = int(np.flatnonzero(bad)[0]) if bad.any() else 0
        raise Invalid(
            f"Exposures are numbers {EXPOSURE_RANGE}, one per row.",
            [FieldFault(field, f"row {row} has {values[row]!r}", fix)],
        )
    return exposure
