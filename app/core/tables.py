"""Uploaded tables: detect the format, parse it, validate the target and the features, encode them.

Parsing is bounded before it is costly: a gzipped upload inflates up to ``max_inflated_bytes`` (checked as it
inflates, into a temporary file: never whole in memory), and so does a Parquet file once read (its metadata says
how much: :func:`parquet_inflated_bytes`); a CSV's or Parquet file's header is checked (column count, repeated
names) before its rows are read, and no more than ``max_rows + 1`` rows are parsed.

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

import csv
import io
import json
import math
import tempfile
from collections import Counter
from collections.abc import Collection, Iterator
from typing import IO, TYPE_CHECKING, Literal, get_args

import numpy as np
import pandas as pd

from app.core.config import Settings
from app.core.errors import FieldFault, Invalid, TooLarge, Unsupported
from solver.encoding import TableEncoding, TableError
from solver.fitting import class_labels
from solver.formats.sniff import GZIP_MAGIC, INFLATE_STEP, CorruptGzip, InflatedTooLarge, gunzip_chunks
from solver.losses.cox import signed_times

if TYPE_CHECKING:
    import pyarrow.parquet as pq

Task = Literal["classification", "regression", "multiclass", "count", "amount", "survival"]
TASKS: tuple[Task, ...] = get_args(Task)
# the tasks whose target is stored as class codes 0..K-1 of ``classes``
LABELLED_TASKS = ("classification", "multiclass")
# the tasks whose target is never negative, and the loss family that reads it (their faults say so)
NONNEGATIVE_TASKS = {"count": "a count or rate >= 0 (the Poisson loss)", "amount": "an amount >= 0 (Tweedie, Gamma)"}
MIN_MULTICLASS = 3

FORMATS = ("csv", "parquet", "json")
_CONTENT_TYPE_FORMATS = {
    "text/csv": "csv",
    "application/csv": "csv",
    "text/plain": "csv",
    "application/vnd.apache.parquet": "parquet",
    "application/x-parquet": "parquet",
    "application/json": "json",
}
_EXTENSION_FORMATS = {".csv": "csv", ".txt": "csv", ".parquet": "parquet", ".pq": "parquet", ".json": "json"}
_PICKLE_PROTOCOL_MARKERS = {b"\x80\x02", b"\x80\x03", b"\x80\x04", b"\x80\x05"}
# the starts of files often chosen by mistake for a text table, named as people know them (app/static/file-columns.js)
BINARY_SIGNATURES = {
    b"\x89PNG": "a PNG image",
    b"\xff\xd8\xff": "a JPEG image",
    b"GIF8": "a GIF image",
    b"%PDF": "a PDF document",
    b"PK\x03\x04": "a ZIP archive (an Excel workbook, say)",
}
CHECKED_BYTES = 8192  # a text table's start holds no zero byte
HEADER_BYTES = 1 << 20  # the most of a CSV's first line read to check its names before its rows are read
CELL_BYTES = 8  # a cell of a table once read: a float64, an int64, a reference to a (shared) text
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
# A text cell starting with one of these is a formula to a spreadsheet that opens an export (CSV injection).
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def is_pickle(data: bytes) -> bool:
    return data[:2] in _PICKLE_PROTOCOL_MARKERS


def table_invalid(error: TableError) -> Invalid:
    return Invalid(error.summary, [FieldFault(**fault) for fault in error.errors])


def detect_format(data: bytes, content_type: str, filename: str | None, declared: str | None) -> str:
    if declared:
        if declared not in FORMATS:
            raise Invalid(
                f"Unknown format '{declared}'.", [FieldFault("format", "unknown format", f"use one of {list(FORMATS)}")]
            )
        return declared
    if data[:4] == b"PAR1":
        return "parquet"
    if filename:
        stem = filename.lower().removesuffix(".gz")
        for extension, table_format in _EXTENSION_FORMATS.items():
            if stem.endswith(extension):
                return table_format
    if content_type in _CONTENT_TYPE_FORMATS:
        return _CONTENT_TYPE_FORMATS[content_type]
    if data.lstrip()[:1] in (b"[", b"{"):
        return "json"
    if content_type in ("application/octet-stream", "application/gzip", "application/x-gzip", ""):
        return "csv"
    raise Unsupported(
        f"Unsupported media type '{content_type}'.",
        [
            FieldFault(
                "content_type",
                f"unsupported media type '{content_type}'",
                "send text/csv, application/json, application/vnd.apache.parquet "
                "(optionally gzipped) or name the format",
            )
        ],
    )


def inflated_too_large(limit: int) -> TooLarge:
    return TooLarge(
        f"The file inflates to more than {limit} bytes.",
        [FieldFault("file", "too large once decompressed", "send a smaller file or raise FIRE_MAX_INFLATED_BYTES")],
    )


def _inflated(data: bytes, limit: int) -> Iterator[bytes]:
    try:
        yield from gunzip_chunks(io.BytesIO(data), limit)
    except InflatedTooLarge:
        raise inflated_too_large(limit) from None
    except CorruptGzip as exc:
        raise Invalid(
            f"The gzip stream is corrupt: {exc}", [FieldFault("file", "corrupt gzip", "re-compress the file")]
        ) from exc


def _gunzip(data: bytes, limit: int) -> IO[bytes]:
    """A gzipped upload inflated into a temporary file on this process's disk, never whole in memory: counted
    first, keeping none of it, so that one past ``limit`` (a gzip bomb) is refused having cost no memory or disk
    beyond a step (``solver.formats.sniff.gunzip_chunks``), then written a step at a time."""
    for _ in _inflated(data, limit):
        pass
    inflated = tempfile.TemporaryFile()  # noqa: SIM115 (the caller closes it)
    for chunk in _inflated(data, limit):
        inflated.write(chunk)
    inflated.seek(0)
    return inflated


def parquet_inflated_bytes(metadata: "pq.FileMetaData", columns: Collection[str] | None = None) -> int:
    """What a Parquet file's ``columns`` (those it has; by default all) take once read, from its metadata before any
    row is: their pages uncompressed, or CELL_BYTES a cell where that is more (a column of values that repeat is
    stored as a count, almost no page, yet takes a cell a row once read)."""
    names = set(metadata.schema.names) if columns is None else set(columns) & set(metadata.schema.names)
    pages = 0
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        for index in range(row_group.num_columns):
            chunk = row_group.column(index)
            if chunk.path_in_schema.split(".")[0] in names:
                pages += chunk.total_uncompressed_size
    return max(pages, metadata.num_rows * len(names) * CELL_BYTES)


def _too_many(what: str, count: str, limit: int, setting: str) -> TooLarge:
    return TooLarge(
        f"The table has {count} {what}, more than the limit of {limit}.",
        [FieldFault("file", f"{count} {what}", f"send at most {limit} {what} or raise {setting}")],
    )


def check_header(names: list[str], settings: Settings) -> None:
    """Column count, repeated names (linear time) and formula-like names, before any row is parsed."""
    if len(names) > settings.max_columns:
        raise _too_many("columns", str(len(names)), settings.max_columns, "FIRE_MAX_COLUMNS")
    repeated = sorted(name for name, count in Counter(names).items() if count > 1)
    if repeated:
        raise Invalid(
            "Column names repeat.",
            [FieldFault(f"columns.{name}", "duplicate column name", "rename it") for name in repeated[:20]],
        )
    formulas = [name for name in names if name.startswith(FORMULA_PREFIXES)]
    if formulas:
        raise Invalid(
            "Column names start like spreadsheet formulas.",
            [formula_fault(f"columns.{name}", name) for name in formulas[:20]],
        )


def formula_fault(field: str, text: str) -> FieldFault:
    return FieldFault(
        field,
        f"{text[:40]!r} starts like a spreadsheet formula (=, +, -, @, tab, return)",
        "remove the leading character: such text would run as a formula where rules are exported",
    )


def check_text(data: bytes) -> None:
    """Invalid where the start of a CSV or JSON upload is no text: a known binary kind (an image renamed .csv) or a zero
    byte."""
    head = data[:CHECKED_BYTES]
    kind = next((name for start, name in BINARY_SIGNATURES.items() if head.startswith(start)), None)
    if kind is None and b"\x00" in head:
        kind = "binary data"
    if kind is not None:
        raise Invalid(
            f"This file is not a table: it holds {kind}, not the text of a CSV or JSON table.",
            [FieldFault("file", f"{kind}, not text", "send a CSV (gzipped too), Parquet or JSON file")],
        )


def _csv_header(source: IO[bytes]) -> list[str]:
    """The names of a CSV's first line, read without its rows (at most HEADER_BYTES of it: a longer line's names
    past them are checked by pandas as it reads the file)."""
    line = source.readline(HEADER_BYTES)
    source.seek(0)
    names = next(csv.reader(io.StringIO(line.decode("utf-8", errors="replace"))), [])
    return names if line.endswith(b"\n") or len(line) < HEADER_BYTES else names[:-1]  # the last name cut short


def _blank(source: IO[bytes]) -> bool:
    """Whether a file holds nothing but whitespace (read a step at a time, until its first other byte)."""
    blank = all(not block.strip() for block in iter(lambda: source.read(INFLATE_STEP), b""))
    source.seek(0)
    return blank


def parse_table(
    data: bytes, content_type: str, filename: str | None, declared_format: str | None, settings: Settings
) -> tuple[str, pd.DataFrame]:
    """The upload's format and its rows. A gzipped upload is inflated into a temporary file (bounded as it
    inflates) and read from there: the inflated table is never held whole in memory besides what pandas reads."""
    if data[:2] == GZIP_MAGIC:
        with _gunzip(data, settings.max_inflated_bytes) as inflated:
            return _parse_file(inflated, content_type, filename, declared_format, settings)
    return _parse_file(io.BytesIO(data), content_type, filename, declared_format, settings)


def _parse_file(
    source: IO[bytes], content_type: str, filename: str | None, declared_format: str | None, settings: Settings
) -> tuple[str, pd.DataFrame]:
    head = source.read(CHECKED_BYTES)
    source.seek(0)
    if is_pickle(head):
        raise Unsupported(
            "Pickled data is never loaded (it can run code).",
            [FieldFault("file", "pickle", "send CSV, Parquet or JSON records")],
        )
    if _blank(source):
        raise Invalid("The upload is empty.", [FieldFault("file", "empty", "send a table")])
    table_format = detect_format(head, content_type, filename, declared_format)
    if table_format != "parquet":
        check_text(head)
    try:
        if table_format == "csv":
            # pandas would rename a repeated header (a, a -> a, a.1): the header is checked as sent
            check_header(_csv_header(source), settings)
            frame = pd.read_csv(source, nrows=settings.max_rows + 1, float_precision="round_trip")
        elif table_format == "parquet":
            import pyarrow.parquet as pq

            metadata = pq.read_metadata(source)
            check_header(list(metadata.schema.names), settings)
            if metadata.num_rows > settings.max_rows:
                raise _too_many("rows", str(metadata.num_rows), settings.max_rows, "FIRE_MAX_ROWS")
            if parquet_inflated_bytes(metadata) > settings.max_inflated_bytes:  # bounded as a gzipped upload is
                raise inflated_too_large(settings.max_inflated_bytes)
            source.seek(0)
            frame = pd.read_parquet(source)
        else:
            records = json.load(source)
            if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
                raise ValueError("expected a JSON array of objects (records)")
            if len(records) > settings.max_rows:
                raise _too_many("rows", str(len(records)), settings.max_rows, "FIRE_MAX_ROWS")
            frame = pd.DataFrame.from_records(records)
            check_header([str(c) for c in frame.columns], settings)
    except (Invalid, TooLarge):
        raise
    except Exception as exc:
        raise Invalid(
            f"The {table_format} file could not be parsed: {exc}",
            [
                FieldFault(
                    "file", f"unparsable {table_format}", "check the file, or name its format if it was guessed wrong"
                )
            ],
        ) from exc
    if len(frame) > settings.max_rows:
        raise _too_many("rows", f"more than {settings.max_rows}", settings.max_rows, "FIRE_MAX_ROWS")
    frame.columns = [str(c) for c in frame.columns]
    return table_format, frame


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
