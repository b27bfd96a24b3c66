"""Datasets: parse an uploaded table, validate it, encode it, store it under its content hash.

Parsing is bounded before it is costly: a gzipped upload inflates up to ``max_inflated_bytes`` (checked as it
inflates), a CSV's or Parquet file's header is checked (column count, repeated names) before its rows are
read, and no more than ``max_rows + 1`` rows are parsed.
"""

import csv
import hashlib
import io
import json
import time
import zlib
from collections import Counter
from typing import Any, Literal, get_args

import numpy as np
import pandas as pd
from pydantic import Field

from app.core.blobs import BlobStore, Document
from app.core.config import Settings
from app.core.errors import FieldFault, Invalid, NotFound, TooLarge, Unsupported
from app.core.keys import Keys
from app.core.tenants import DEFAULT_TENANT
from solver.encoding import TableEncoding, TableError
from solver.fitting import class_labels, rule_response
from solver.spec import Loss

Task = Literal["classification", "regression", "multiclass", "count"]
TASKS: tuple[Task, ...] = get_args(Task)
# the path loss a dataset's task calls for (a path job that names no loss gets it)
TASK_LOSSES: dict[str, Loss] = {
    "classification": "logistic",
    "regression": "squared",
    "multiclass": "multinomial",
    "count": "poisson",
}
# the tasks whose target is stored as class codes 0..K-1 of ``classes``, and the losses whose rules score them
LABELLED_TASKS = ("classification", "multiclass")
CLASSIFIER_LOSSES = ("logistic", "multinomial")
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
MAX_ROWS_NAMED = 10
# The tree learners compare features in float32: a value beyond its range would become infinite there.
MAX_ABS_VALUE = float(np.finfo(np.float32).max)
# A text cell starting with one of these is a formula to a spreadsheet that opens an export (CSV injection).
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def is_pickle(data: bytes) -> bool:
    return data[:2] in _PICKLE_PROTOCOL_MARKERS


def table_invalid(error: TableError) -> Invalid:
    return Invalid(error.summary, [FieldFault(**fault) for fault in error.errors])


class TargetSummary(Document):
    """Of the target as stored: for classification, y is 0/1 (1 = ``classes[1]``), so the mean is the share of
    ``classes[1]``; for multiclass, y is the class code 0..K-1 (``DatasetInfo.class_counts`` counts them)."""

    mean: float
    std: float
    min: float
    max: float


class DatasetSource(Document):
    filename: str | None
    format: str
    bytes: int


class DatasetInfo(Document):
    id: str
    tenant: str = DEFAULT_TENANT
    target: str
    task: Task = Field(
        "regression",
        description=(
            "classification (the target has two distinct values, stored as 0/1: 1 = classes[1]), multiclass (3 to "
            "FIRE_MAX_CLASSES distinct values, stored as class codes 0..K-1 in the order of classes), regression, or "
            "count (numbers >= 0: counts or rates, fitted with the Poisson loss)"
        ),
    )
    classes: list[str | bool | int | float] | None = Field(
        None,
        description=(
            "classification and multiclass: the target's labels as given, in sorted order; path jobs fit the "
            "log-odds of classes[1] (two labels) or one score per class (multiclass)"
        ),
    )
    class_counts: list[int] | None = Field(
        None, description="classification and multiclass: the rows of each class, in the order of classes"
    )
    n_rows: int
    n_features: int
    columns: list[dict[str, Any]] = Field(description="the table's encoding (solver.encoding.TableEncoding.to_dict)")
    feature_names: list[str] = Field(description="the encoded columns a forest splits on")
    missing_values: dict[str, int] = Field(
        description=(
            "missing values per column of the table that has any (in a categorical column, rows with no category)"
        )
    )
    target_summary: TargetSummary
    source: DatasetSource
    created_at: float

    @property
    def encoding(self) -> TableEncoding:
        return TableEncoding.from_dict(self.columns)

    @property
    def has_missing_features(self) -> bool:
        """Whether the encoded features hold missing values: numeric columns keep them (NaN); a missing category
        sets no indicator."""
        return any(column["kind"] == "numeric" and self.missing_values.get(column["name"]) for column in self.columns)

    @property
    def loss(self) -> Loss:
        """The path loss of this dataset's task."""
        return TASK_LOSSES[self.task]

    def response(self, loss: str) -> str | None:
        """What rules fitted with ``loss`` add, named as ``solver.fitting.fit_rules`` names it."""
        return rule_response(loss, self.classes)

    def rule_classes(self, loss: str) -> list | None:
        """The classes of rules fitted with ``loss``: the labels for a classifier's loss, else None (a squared loss
        on a classification dataset's 0/1 target has none)."""
        return self.classes if loss in CLASSIFIER_LOSSES else None


class DatasetStore:
    def __init__(self, settings: Settings, blobs: BlobStore):
        self.settings = settings
        self.blobs = blobs
        self.keys = Keys.from_settings(settings)

    def dataset_id(self, data: bytes, target: str, tenant: str, task: str | None = None) -> str:
        """The content hash: the same bytes, target, task and categorical setting give the same id (per tenant)."""
        owner = b"" if tenant == DEFAULT_TENANT else tenant.encode() + b"\0"  # ids kept from before tenants
        declared = b"" if task is None else b"task=" + task.encode() + b"\0"  # ids kept where it is detected
        return (
            "ds_"
            + hashlib.sha256(
                b"fire-dataset-v1\0"
                + owner
                + declared
                + target.encode()
                + b"\0"
                + self.settings.categorical.encode()
                + b"\0"
                + data
            ).hexdigest()[:32]
        )

    def create(
        self,
        data: bytes,
        *,
        tenant: str,
        target: str,
        content_type: str,
        filename: str | None,
        declared_format: str | None,
        task: str | None = None,
    ) -> tuple[DatasetInfo, bool]:
        """(info, created). Uploading the same bytes with the same target (and task) again is a no-op.
        ``task``: one of TASKS, or None to detect it (:func:`target_task`)."""
        check_task(task)
        dataset_id = self.dataset_id(data, target, tenant, task)
        existing = self.find(dataset_id)
        if existing is not None:
            return existing, False
        table_format, frame = parse_table(data, content_type, filename, declared_format, self.settings)
        encoding, features, y, found_task, classes = validate_table(frame, target, self.settings, task)  # pops target
        missing = {str(name): int(count) for name, count in frame.isna().sum().items() if count}
        del frame  # the encoded arrays are all that is kept
        info = DatasetInfo(
            id=dataset_id,
            tenant=tenant,
            target=target,
            task=found_task,
            classes=classes,
            class_counts=None if classes is None else np.bincount(y.astype(np.int64), minlength=len(classes)).tolist(),
            n_rows=features.shape[0],
            n_features=features.shape[1],
            columns=encoding.to_dict(),
            feature_names=encoding.feature_names,
            missing_values=missing,
            target_summary=TargetSummary(mean=y.mean(), std=y.std(), min=y.min(), max=y.max()),
            source=DatasetSource(filename=filename, format=table_format, bytes=len(data)),
            created_at=time.time(),
        )
        self.blobs.put_arrays(self.keys.dataset_arrays(dataset_id), X=features, y=y)
        self.blobs.put_document(self.keys.dataset(dataset_id), info)
        self.blobs.index(self.keys.datasets(tenant), dataset_id, info.created_at)
        return info, True

    def find(self, dataset_id: str) -> DatasetInfo | None:
        return self.blobs.get_document(self.keys.dataset(dataset_id), DatasetInfo)

    def read(self, dataset_id: str) -> DatasetInfo:
        """A stored dataset whoever owns it (for the workers, which run jobs already checked)."""
        info = self.find(dataset_id)
        if info is None:
            raise NotFound("dataset", dataset_id)
        return info

    def get(self, dataset_id: str, *, tenant: str, field: str = "dataset_id") -> DatasetInfo:
        """The tenant's dataset; another tenant's is not found."""
        info = self.find(dataset_id)
        if info is None or info.tenant != tenant:
            raise NotFound("dataset", dataset_id, field)
        return info

    def list(self, *, tenant: str, limit: int = 100) -> list[DatasetInfo]:
        return self.blobs.newest_documents(self.keys.datasets(tenant), self.keys.dataset, DatasetInfo, limit)

    def load_arrays(self, dataset_id: str) -> tuple[np.ndarray, np.ndarray]:
        arrays = self.blobs.get_arrays(self.keys.dataset_arrays(dataset_id))
        if arrays is None:
            raise NotFound("dataset", dataset_id)
        return arrays["X"], arrays["y"]

    def delete(self, info: DatasetInfo) -> None:
        self.blobs.delete(self.keys.dataset_arrays(info.id))
        self.blobs.delete(self.keys.dataset(info.id))
        self.blobs.unindex(self.keys.datasets(info.tenant), info.id)


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


def _gunzip(data: bytes, limit: int) -> bytes:
    """The inflated bytes of every gzip member, refused as soon as they pass ``limit`` (a gzip bomb never
    inflates further)."""
    out: list[bytes] = []
    remaining = data
    try:
        while remaining:
            decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
            out.append(decompressor.decompress(remaining, limit + 1 - sum(map(len, out))))
            if sum(map(len, out)) > limit or decompressor.unconsumed_tail:
                raise TooLarge(
                    f"The file inflates to more than {limit} bytes.",
                    [
                        FieldFault(
                            "file",
                            "too large once decompressed",
                            "send a smaller file or raise FIRE_MAX_INFLATED_BYTES",
                        )
                    ],
                )
            remaining = decompressor.unused_data  # the next member of a concatenated gzip file
    except zlib.error as exc:
        raise Invalid(
            f"The gzip stream is corrupt: {exc}", [FieldFault("file", "corrupt gzip", "re-compress the file")]
        ) from exc
    return b"".join(out)


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


def _csv_header(data: bytes) -> list[str]:
    first_line = data[: data.find(b"\n") + 1 if b"\n" in data else len(data)]
    return next(csv.reader(io.StringIO(first_line.decode("utf-8", errors="replace"))), [])


def parse_table(
    data: bytes, content_type: str, filename: str | None, declared_format: str | None, settings: Settings
) -> tuple[str, pd.DataFrame]:
    if data[:2] == b"\x1f\x8b":
        data = _gunzip(data, settings.max_inflated_bytes)
    if is_pickle(data):
        raise Unsupported(
            "Pickled data is never loaded (it can run code).",
            [FieldFault("file", "pickle", "send CSV, Parquet or JSON records")],
        )
    if not data.strip():
        raise Invalid("The upload is empty.", [FieldFault("file", "empty", "send a table")])
    table_format = detect_format(data, content_type, filename, declared_format)
    try:
        if table_format == "csv":
            # pandas would rename a repeated header (a, a -> a, a.1): the header is checked as sent
            check_header(_csv_header(data), settings)
            frame = pd.read_csv(io.BytesIO(data), nrows=settings.max_rows + 1)
        elif table_format == "parquet":
            import pyarrow.parquet as pq

            metadata = pq.read_metadata(io.BytesIO(data))
            check_header(list(metadata.schema.names), settings)
            if metadata.num_rows > settings.max_rows:
                raise _too_many("rows", str(metadata.num_rows), settings.max_rows, "FIRE_MAX_ROWS")
            frame = pd.read_parquet(io.BytesIO(data))
        else:
            records = json.loads(data)
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
    y = pd.to_numeric(column, errors="coerce").to_numpy(dtype=np.float64)
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
    if task == "count":
        negative = y < 0
        if negative.any():
            faults.append(
                FieldFault(
                    f"columns.{target}",
                    f"negative counts in {_rows(negative)}",
                    "a count target (task=count, the Poisson loss) is a count or rate >= 0: fix these rows, or "
                    "use task=regression for a target that can be negative",
                )
            )
        elif not (y > 0).any() and not missing.any() and not non_numeric.any():
            faults.append(
                FieldFault(
                    f"columns.{target}",
                    "every count is 0",
                    "a count target needs some rows above 0 (the Poisson loss has nothing to fit)",
                )
            )
    return y


def validate_table(
    frame: pd.DataFrame, target: str, settings: Settings, task: str | None = None
) -> tuple[TableEncoding, np.ndarray, np.ndarray, str, list | None]:
    """(encoding, features float64 (n, p), y float64 (n,), task, classes), or Invalid naming every fault. Takes
    the target column out of ``frame`` (no copy of the table). ``task``: declared, or None to detect it
    (:func:`target_task`); ``classes`` is the labels of a classification or multiclass target (y then holds
    their codes 0..K-1: 0/1 for two labels), else None."""
    if target not in frame.columns:
        raise Invalid(
            f"No column named '{target}'.",
            [FieldFault("target", "not a column", f"use one of {list(frame.columns)[:50]}")],
        )
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
    return encoding, features, y, task, classes
