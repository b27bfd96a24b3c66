"""Uploaded tables validated: the target and the task, the features, the event, exposure and offset columns; then
encoded. (Parsing them: ``app.core.table_parsing``.)

Numbers: the text of a number is read as the float64 nearest to it (correctly rounded, as Python's ``float`` reads
it), by every way a table enters the service, so that the same text is the same float wherever it is sent: an
upload here (a CSV by pandas' ``read_csv`` with ``float_precision="round_trip"``: its default parser is a unit in
the last place off for 46% of values written with ``%.17g`` and 36% of those written by ``repr``, measured on 10^5
numbers; a column of text by :func:`to_numbers`; JSON by Python's ``json``), a scoring body (JSON by pydantic's
parser; a CSV body's text by numpy's str -> float64 in ``TableEncoding.encode``), the Open Inference Protocol's
JSON (pydantic's parser) and a batch file (Arrow's string -> float64 cast). Each of those is correctly rounded:
tests/service/test_drift_exact.py sends hard cases (17 digits, subnormals, large exponents, ``+``, spaces) through
each entrance and compares the bits.
"""

import math
from typing import Literal, get_args

import numpy as np
import pandas as pd

from app.core.config import Settings
from app.core.errors import FieldFault, Invalid
from app.core.table_parsing import FORMULA_PREFIXES, formula_fault
from solver.encoding import TableEncoding, TableError
from solver.fitting import class_labels
from solver.losses.cox import signed_times

Task = Literal["classification", "regression", "multiclass", "count", "amount", "survival"]
TASKS: tuple[Task, ...] = get_args(Task)
# the tasks whose target is stored as class codes 0..K-1 of ``classes``
LABELLED_TASKS = ("classification", "multiclass")
# the tasks whose target is never negative, and the loss family that reads it (their faults say so)
NONNEGATIVE_TASKS = {"count": "a count or rate >= 0 (the Poisson loss)", "amount": "an amount >= 0 (Tweedie, Gamma)"}
MIN_MULTICLASS = 3
MAX_ROWS_NAMED = 10
# The tree learners compare features in float32: a value beyond its range would become infinite there.
MAX_ABS_VALUE = float(np.finfo(np.float32).max)
# Exposures and log-link offsets are factors of a rate: a log-link model answers exp(score + offset) × exposure, and
# its fit divides the target by exp(offset) × exposure and weights the row by them (the library's
# Loss.offset_target). Each such factor is held within [1/MAX_ABS_VALUE, MAX_ABS_VALUE], the range of every value of
# a table: its logarithm within ±MAX_LOG_FACTOR = ln(MAX_ABS_VALUE) ≈ 88.72. float64's exp is finite up to
# ln(float64's largest) ≈ 709.78, eight times that: a score, a fit's target or weight made of a few such factors
# cannot overflow (exposure 1e308 was a rate of inf; 1e-320 a target of inf; offset 800 a weight of inf).
MAX_LOG_FACTOR = math.log(MAX_ABS_VALUE)
MIN_EXPOSURE, MAX_EXPOSURE = 1.0 / MAX_ABS_VALUE, MAX_ABS_VALUE
EXPOSURE_RANGE = f"in [{MIN_EXPOSURE:.4g}, {MAX_EXPOSURE:.4g}]"


def table_invalid(error: TableError) -> Invalid:
    return Invalid(error.summary, [FieldFault(**fault) for fault in error.errors])


def to_numbers(column: pd.Series) -> np.ndarray:
    """A column's cells as float64: NaN where missing or not a number, text read correctly rounded (the module's
    docstring); ``pd.to_numeric`` only says which cells are numbers, as its parser is not correctly rounded."""
    if pd.api.types.is_numeric_dtype(column):
        return column.to_numpy(dtype=np.float64, na_value=np.nan)
    numbers = pd.to_numeric(column, errors="coerce").notna().to_numpy()
    values = np.full(len(column), np.nan)
    values[numbers] = column.to_numpy(dtype=object)[numbers].astype(np.float64)
    return values


def _rows(mask: np.ndarray) -> str:
    rows = np.flatnonzero(mask)
    shown = ", ".join(str(r) for r in rows[:MAX_ROWS_NAMED])
    return f"{len(rows)} rows ({shown}{', ...' if len(rows) > MAX_ROWS_NAMED else ''}; 0-based data rows)"


def _out_of_range(values: np.ndarray) -> np.ndarray:
    """Infinite values and finite ones beyond ±MAX_ABS_VALUE (NaN is a missing value, not out of range)."""
    return np.abs(values) > MAX_ABS_VALUE


def check_task(task: str | None) -> None:
    if task is not None and task not in TASKS:
        raise Invalid(
            f"Unknown task '{task}'.",
            [
                FieldFault(
                    "task",
                    f"unknown task {task[:40]!r}",
                    f"use one of {list(TASKS)}, or leave it out to detect it from the target",
                )
            ],
        )


def _label(value) -> str | bool | int | float:
    """A class label as a JSON value (numpy scalars unwrapped; anything else as its text)."""
    value = value.item() if isinstance(value, np.generic) else value
    return value if isinstance(value, (str, bool, int, float)) else str(value)


def target_task(column: pd.Series, target: str, task: str | None, max_classes: int) -> str:
    """The task of a target column: as declared, or detected: exactly two distinct values (text, booleans or
    numbers) is classification, text labels (none of them a number) are multiclass, any other target with
    numbers regression (its non-numeric rows are then faults of their own). A count is never detected: it is
    declared (``task=count``), as are integer class codes (``task=multiclass``). Invalid where the target cannot
    be the task: a classification without two labels, a multiclass target with fewer than 3 or more than
    ``max_classes`` (FIRE_MAX_CLASSES) labels."""
    try:
        n_labels = int(column.nunique(dropna=True))
    except TypeError:  # objects or lists in JSON records: no labels, and no numbers either (named as such)
        return "regression" if task is None else task
    numbers = pd.to_numeric(column, errors="coerce").notna()
    if task is None:  # more than two values, some of them numbers: a numeric target whose other rows are named
        task = "classification" if n_labels == 2 else "regression" if numbers.any() else "multiclass"
    shown = [str(label) for label in column.dropna().unique()[:5]]
    values = f"{n_labels} distinct values {shown}"
    if task == "classification" and n_labels != 2:
        raise Invalid(
            f"The target '{target}' has {n_labels} distinct values: classification needs exactly two.",
            [
                FieldFault(
                    f"columns.{target}",
                    values,
                    f"use task=multiclass for 3 to {max_classes} labels (FIRE_MAX_CLASSES), task=regression for a "
                    "numeric target, or a target with two labels",
                )
            ],
        )
    if task == "multiclass" and n_labels > max_classes:
        raise Invalid(
            f"The target '{target}' has {n_labels} distinct values, more than the {max_classes} classes "
            f"FIRE_MAX_CLASSES allows.",
            [
                FieldFault(
                    f"columns.{target}",
                    f"{values[:-1]}, ...]" if n_labels > len(shown) else values,
                    f"group the labels into at most {max_classes} classes, raise FIRE_MAX_CLASSES, or use "
                    "task=regression (or count) for a numeric target",
                )
            ],
        )
    if task == "multiclass" and n_labels < MIN_MULTICLASS:
        raise Invalid(
            f"The target '{target}' has {n_labels} distinct value{'' if n_labels == 1 else 's'}: multiclass needs "
            f"{MIN_MULTICLASS} to {max_classes}.",
            [
                FieldFault(
                    f"columns.{target}",
                    values,
                    "two labels: use task=classification (or leave task out)"
                    if n_labels == 2
                    else "send a target with at least two distinct labels",
                )
            ],
        )
    return task


def _classes(column: pd.Series, target: str, task: str, faults: list[FieldFault]) -> tuple[list, np.ndarray]:
    """(classes as JSON values, y the class codes 0..K-1 in their order; 0/1 for two labels, 1 = classes[1]):
    the library's class_labels. A multiclass target's text labels become export column names and keys: none may
    start like a spreadsheet formula."""
    values = column.to_numpy()
    try:
        classes, y = class_labels(values)
    except TypeError:  # labels of mixed types (text and numbers, objects) have no order
        faults.append(
            FieldFault(
                f"columns.{target}",
                "labels that cannot be ordered (text mixed with numbers, or objects)",
                "write every label the same way",
            )
        )
        return [], np.zeros(len(values))
    labels = [_label(label) for label in classes]
    if len({str(label) for label in labels}) < len(labels):
        faults.append(
            FieldFault(
                f"columns.{target}",
                "labels that read the same as text (such as 1 and '1')",
                "write every label the same way",
            )
        )
    if task == "multiclass":
        faults += [
            formula_fault(f"columns.{target}", label)
            for label in labels
            if isinstance(label, str) and label.startswith(FORMULA_PREFIXES)
        ][:20]
    return labels, y


def _numeric_target(
    column: pd.Series, target: str, task: str, missing: np.ndarray, faults: list[FieldFault]
) -> np.ndarray:
    """y of a regression or count target, its faults named: non-numeric rows, values out of range, and for a
    count, negative values or none above 0 (the Poisson loss needs counts or rates >= 0, some of them positive)."""
    y = to_numbers(column)
    non_numeric = np.isnan(y) & ~missing
    if non_numeric.any():
        faults.append(
            FieldFault(
                f"columns.{target}",
                f"non-numeric target in {_rows(non_numeric)}",
                f"a {task} target must be a number (labels: task=classification or task=multiclass)",
            )
        )
    if _out_of_range(y).any():
        faults.append(
            FieldFault(
                f"columns.{target}",
                f"infinite target or beyond ±{MAX_ABS_VALUE:.3g} in {_rows(_out_of_range(y))}",
                "drop these rows",
            )
        )
    if task in NONNEGATIVE_TASKS:
        negative = y < 0
        what = "counts" if task == "count" else "amounts"
        if negative.any():
            faults.append(
                FieldFault(
                    f"columns.{target}",
                    f"negative {what} in {_rows(negative)}",
                    f"a {task} target (task={task}) is {NONNEGATIVE_TASKS[task]}: fix these rows, or "
                    "use task=regression for a target that can be negative",
                )
            )
        elif not (y > 0).any() and not missing.any() and not non_numeric.any():
            faults.append(
                FieldFault(
                    f"columns.{target}",
                    f"every {what[:-1]} is 0",
                    f"a {task} target needs some rows above 0 (the loss has nothing to fit)",
                )
            )
    if task == "survival":
        bad = ~(y > 0) & ~missing & ~non_numeric
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            faults.append(
                FieldFault(
                    f"columns.{target}",
                    f"survival times must be > 0: row {row} has {y[row]:g} ({_rows(bad)})",
                    "drop these rows or fix their times (the time column holds each row's time to the event or "
                    "to censoring, > 0)",
                )
            )
    return y


def _first_bad(mask: np.ndarray, values) -> str:
    row = int(np.flatnonzero(mask)[0])
    return f"row {row} has {values[row]!r} ({_rows(mask)})"


def pop_event(frame: pd.DataFrame, event: str) -> np.ndarray:
    """The event column of a survival table, taken out of ``frame``: 0/1 or booleans (true where the event
    happened, false where the row was censored); Invalid naming the column and its first bad row otherwise."""
    if event not in frame.columns:
        raise Invalid(
            f"No column named '{event}'.",
            [FieldFault("event", "not a column", f"use one of {list(frame.columns)[:50]}")],
        )
    column = frame.pop(event)
    values = column.to_numpy(dtype=object)
    flags = [_event_flag(value) for value in values]
    good = np.array([flag is not None for flag in flags])
    if not good.all():  # most often another column picked as the event (a count, a 0/1 feature named last)
        first, n_bad = int(np.flatnonzero(~good)[0]), int((~good).sum())
        raise Invalid(
            f"The event column '{event}' must hold 0/1 or true/false.",
            [
                FieldFault(
                    "event",
                    f"column '{event}' is not 0/1 or true/false: row {first} has {values[first]!r}"
                    + (f", as do {n_bad - 1} other rows" if n_bad > 1 else ""),
                    "pick the event column: the one holding 1 (or true) where the event happened and 0 (or false) "
                    "where the row was censored",
                )
            ],
        )
    return np.array(flags, dtype=bool)


_EVENT_TEXT = {"0": False, "1": True, "true": True, "false": False, "0.0": False, "1.0": True}


def _event_flag(value) -> bool | None:
    """An event cell as a flag: 0/1, true/false (or their text, as a CSV column with one bad cell reads them);
    None for anything else."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if _is_number(value) and float(value) in (0.0, 1.0):
        return bool(value)
    if isinstance(value, str):
        return _EVENT_TEXT.get(value.strip().lower())
    return None


def pop_exposure(frame: pd.DataFrame, exposure: str) -> np.ndarray:
    """The exposure column (the rows' time at risk, or their sum insured), taken out of ``frame``: numbers in
    [MIN_EXPOSURE, MAX_EXPOSURE] (> 0, and a factor a rate can take without overflowing); Invalid naming the column
    and its first bad row otherwise. A path fits the rate target / exposure with the exposure as row weights."""
    return _pop_numbers(
        frame, exposure, "exposure", exposure_in_range, f"a number {EXPOSURE_RANGE}",
        "fill these rows with their exposure (> 0)",
    )  # fmt: skip


def pop_offset(frame: pd.DataFrame, offset: str) -> np.ndarray:
    """The offset column (a known part of each row's score: the log of an exposure, a prior model's score), taken
    out of ``frame``: a number within ±MAX_ABS_VALUE on every row (a log-link path asks for ±MAX_LOG_FACTOR: job
    submission checks it); Invalid naming the column and its first bad row otherwise. A path fits with it added to
    every row's score (the library's ``Loss.offset_target``)."""
    return _pop_numbers(
        frame, offset, "offset", lambda values: np.abs(values) <= MAX_ABS_VALUE,
        f"a number within ±{MAX_ABS_VALUE:.4g}", "fill these rows with their offset (0 adds nothing to the score)",
    )  # fmt: skip


def exposure_in_range(values: np.ndarray) -> np.ndarray:
    """Whether each exposure is in [MIN_EXPOSURE, MAX_EXPOSURE] (NaN is not)."""
    return (values >= MIN_EXPOSURE) & (values <= MAX_EXPOSURE)


def max_offset(link: str) -> float:
    """The largest offset, in absolute value, a model of ``link`` scores or fits with: MAX_LOG_FACTOR for the log link
    (the offset is the logarithm of a factor of the rate), else (squared: an amount added to the prediction) the range
    of every value of a table."""
    return MAX_LOG_FACTOR if link == "log" else MAX_ABS_VALUE


def _pop_numbers(frame: pd.DataFrame, column_name: str, field: str, valid, must_be: str, fill: str) -> np.ndarray:
    """Column ``column_name`` (the request's ``field``) taken out of ``frame`` as finite numbers that are ``valid`` (a
    test of the array; ``must_be`` says it in words); Invalid naming the column and its first bad row otherwise."""
    if column_name not in frame.columns:
        raise Invalid(
            f"No column named '{column_name}'.",
            [FieldFault(field, "not a column", f"use one of {list(frame.columns)[:50]}")],
        )
    column = frame.pop(column_name)
    values = to_numbers(column)
    finite = np.isfinite(values)
    bad = ~finite
    bad[finite] = ~valid(values[finite])
    if bad.any():
        raise Invalid(
            f"The {field} column '{column_name}' must be {must_be} on every row.",
            [
                FieldFault(
                    f"columns.{column_name}",
                    f"missing, non-numeric or not {must_be}: {_first_bad(bad, column.to_numpy(dtype=object))}",
                    f"{fill}, or drop them",
                )
            ],
        )
    return values


def _check_distinct_columns(target: str, **named: str | None) -> None:
    """The target, event, exposure and offset columns are different columns."""
    seen = {target: "target"}
    for field, column in named.items():
        if column is None:
            continue
        if column in seen:
            raise Invalid(
                f"The column '{column}' is named as both {seen[column]} and {field}.",
                [FieldFault(field, f"the {seen[column]} column", f"name another column as {field}, or leave it out")],
            )
        seen[column] = field


def _is_number(value) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def validate_table(
    frame: pd.DataFrame,
    target: str,
    settings: Settings,
    task: str | None = None,
    *,
    event: str | None = None,
    exposure: str | None = None,
    offset: str | None = None,
) -> tuple[TableEncoding, np.ndarray, np.ndarray, str, list | None, dict[str, np.ndarray]]:
    """(encoding, features float64 (n, p), y float64 (n,), task, classes, row arrays), or Invalid naming every
    fault; the row arrays hold "exposure" and "offset" (float64 (n,)) where those columns are named. Takes the
    target column (and the event, exposure and offset columns) out of ``frame`` (no
    copy of the table). ``task``: declared, or None to detect it (:func:`target_task`); ``classes`` is the labels
    of a classification or multiclass target (y then holds their codes 0..K-1: 0/1 for two labels), else None. A
    survival table (task=survival, declared) names its time column as ``target`` and its event column as
    ``event``: y holds the signed times (``solver.signed_times``: +time where the event happened, -time where
    censored). ``exposure``: a column of row exposures (> 0) kept beside y, not a feature; ``offset``: a column of
    row offsets (finite numbers added to the rows' scores) likewise."""
    if target not in frame.columns:
        raise Invalid(
            f"No column named '{target}'.",
            [FieldFault("target", "not a column", f"use one of {list(frame.columns)[:50]}")],
        )
    if (task == "survival") != (event is not None):
        raise Invalid(
            "A survival table names its time column (target) and its event column (event).",
            [
                FieldFault("event", "missing", "pass event=COLUMN (0/1 or true/false) with task=survival")
                if event is None
                else FieldFault("task", f"{task}, with an event column", "pass task=survival, or leave event out")
            ],
        )
    _check_distinct_columns(target, event=event, exposure=exposure, offset=offset)
    events = pop_event(frame, event) if event is not None else None
    rows: dict[str, np.ndarray] = {}
    if exposure is not None:
        rows["exposure"] = pop_exposure(frame, exposure)
    if offset is not None:
        rows["offset"] = pop_offset(frame, offset)
    if len(frame) < 2 or frame.shape[1] < 2:
        raise Invalid(
            "A dataset needs at least 2 rows and one feature column besides the target.",
            [FieldFault("file", f"{len(frame)} rows, {frame.shape[1]} columns", "send more data")],
        )
    target_column = frame.pop(target)
    task = target_task(target_column, target, task, settings.max_classes)
    faults: list[FieldFault] = []
    missing_target = target_column.isna().to_numpy()
    if missing_target.any():
        faults.append(
            FieldFault(
                f"columns.{target}", f"missing target in {_rows(missing_target)}", "drop these rows or fill the target"
            )
        )
    classes = None
    if task in LABELLED_TASKS:
        classes, y = (
            _classes(target_column, target, task, faults)
            if not missing_target.any()
            else ([], np.zeros(len(target_column)))
        )
    else:
        y = _numeric_target(target_column, target, task, missing_target, faults)
    try:
        encoding = TableEncoding.infer(frame, settings.categorical, settings.max_categories)
        faults += [
            formula_fault(f"columns.{column['name']}", category)
            for column in encoding.to_dict()
            for category in column.get("categories", ())
            if category.startswith(FORMULA_PREFIXES)
        ][:20]
        features = encoding.encode_frame(frame)
    except TableError as error:
        raise table_invalid(error) from error
    for name, column in zip(encoding.feature_names, features.T):
        outside = _out_of_range(column)
        if outside.any():
            faults.append(
                FieldFault(
                    f"columns.{name}",
                    f"infinite values or beyond ±{MAX_ABS_VALUE:.3g} in {_rows(outside)}",
                    "replace them with finite numbers in range or leave them empty (missing)",
                )
            )
    if faults:
        raise Invalid("The table does not validate.", faults)
    if events is not None:
        y = signed_times(y, events)
    return encoding, features, y, task, classes, rows
