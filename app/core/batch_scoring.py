"""Batch scoring: a CSV or Parquet file (or a stored dataset) scored by a model in chunk jobs spread over the worker
pool, the scored rows downloaded as Parquet or CSV.

- Submission (the API, :class:`BatchScoring`): the model is resolved for the tenant, the file's header (CSV) or
  schema (Parquet) is checked against the model's columns (a missing column, a type no value of which can be scored:
  :class:`Invalid`, 422), then the rows are read ``chunk_rows`` at a time (``ParquetFile.iter_batches``, pyarrow's
  streaming CSV reader) and each chunk is stored in Redis as an Arrow IPC blob (``Keys.batch_input``). One job per
  chunk (kind ``batch_chunk``) and a parent (kind ``batch``) that waits for them are recorded as a grid's cells and
  parent are (``JobLifecycle.create_all``; the last chunk to end queues the parent: app/core/records.py): retries
  after a lost worker, cancel and deletion are the jobs' own. Chunks are stored, recorded and queued a group at a time
  (at most ``SUBMIT_CHUNKS`` chunks or ``SUBMIT_BYTES`` of input in a few pipelined round trips), so that a file of
  10,000 chunks is answered in seconds, and workers start on the first group while the next is read. Memory is
  bounded by one group of chunks, not by the file, in the API, and by one chunk in every worker; no worker reads
  another's disk. A chunk is at least FIRE_BATCH_MIN_CHUNK_ROWS rows (422 below: a job's own cost would dominate).
- A chunk job (``worker/batch.py``) scores its rows with :func:`score_chunk` and stores the scored rows
  (``Keys.batch_output``) and, beside them, its rows' drift counts (``Keys.batch_counts``): the batch adds its
  chunks' counts to the model's drift once it succeeded, once, so that only rows delivered are counted. A row that
  cannot be scored (a number column holding text, an unseen level) fails the chunk with an error naming the column
  and the file's first bad row, and marks the batch so that later chunks stop early (earlier ones still run: the
  first bad row of the file is the one named).
- The parent succeeds once every chunk did (and adds their drift counts); if one failed it fails with that chunk's
  error, and every scored part and count is deleted: a failed job has no result and counts nothing, nothing is
  half-written. The result is streamed part by part
  (:meth:`BatchScoring.stream_result`).

The scored columns: ``row`` (the row's number in the file, from 0), the ``id_column`` where one is named,
``prediction`` (a number, a rate, a Cox model's hazard ratio, or a classifier's label: ``/predict``'s),
``probability_{class}`` per class (classifiers), ``survival_{t}`` per time (a Cox model, where ``times`` are given)
and, with ``explain``, ``rules`` (the ids of the rules that fired), ``contributions`` (what each adds to the score)
and ``linear_contributions`` (a model with linear terms): lists in Parquet, JSON text in CSV.
"""

import io
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import IO, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from redis import Redis

from app.core.blobs import BlobStore
from app.core.config import Settings
from app.core.datasets import DatasetStore
from app.core.errors import Conflict, FieldFault, Invalid, NotFound, TooLarge, Unsupported
from app.core.job_documents import (
    FAILED,
    SUCCEEDED,
    TERMINAL,
    BatchChunkSpec,
    BatchJobSpec,
    JobRecord,
)
from app.core.job_lifecycle import JobLifecycle, new_job_id
from app.core.job_submission import JobSubmission
from app.core.keys import Keys
from app.core.model_scoring import Rows, ScoringModel, check_times, column_faults, score_rows
from app.core.models import ModelStore
from app.core.records import BULK, JobRecords
from app.core.registry import ModelRef
from app.core.replies import text
from app.core.tables import EXPOSURE_RANGE, MAX_ABS_VALUE, exposure_in_range, max_offset, parquet_inflated_bytes
from solver.encoding import TableEncoding

OutputFormat = Literal["parquet", "csv"]
OUTPUT_FORMATS: tuple[OutputFormat, ...] = ("parquet", "csv")
MEDIA_TYPES = {"parquet": "application/vnd.apache.parquet", "csv": "text/csv"}
CSV_BLOCK_BYTES = 8 * 1024 * 1024  # pyarrow's streaming CSV reader parses this much text at a time
# a submission stores, records and queues its chunks a group at a time: at most this many chunks, or chunks of at
# most this many bytes of input (Arrow IPC, before compression; one larger chunk is a group of its own)
SUBMIT_CHUNKS = BULK
SUBMIT_BYTES = 16 * 1024 * 1024
_NUMERIC_TYPES = (pa.types.is_integer, pa.types.is_floating, pa.types.is_decimal, pa.types.is_null)
_TEXT_TYPES = (pa.types.is_string, pa.types.is_large_string, pa.types.is_dictionary)


class BatchRowsInvalid(Exception):
    """Rows of a chunk that cannot be scored: the message names the column and the file's first bad row."""


@dataclass
class BatchOptions:
    output_format: OutputFormat = "parquet"
    explain: bool = False
    chunk_rows: int | None = None  # None: FIRE_BATCH_CHUNK_ROWS
    times: list[float] | None = None
    id_column: str | None = None


@dataclass
class BatchInput:
    """An uploaded file as the API spooled it (a file object on its own disk), in a format read by ``format``."""

    file: IO[bytes]
    format: Literal["csv", "parquet"]
    filename: str | None = None


@dataclass
class ScoredChunk:
    """One chunk scored: the encoded rows (as the model's forest splits on them) and the result's columns."""

    X: np.ndarray
    table: pa.Table


def parse_ref(ref: str) -> "str | ModelRef":
    """A model id or a bare name (:meth:`BatchScoring.submit` tries it as an id, then as a name's latest version),
    or a name reference in one path segment: ``name@alias``, ``name@3`` or ``name@v3`` (a version: no alias is
    version-like), ``name@latest``."""
    name, at, which = ref.partition("@")
    if not at:
        return ref
    if which == "latest":
        return ModelRef(name)
    number = which[1:] if which[:1] in ("v", "V") else which
    if number.isascii() and number.isdigit():
        return ModelRef(name, version=int(number))
    return ModelRef(name, alias=which)


def detect_input_format(head: bytes, content_type: str, filename: str | None, declared: str | None) -> str:
    """``csv`` or ``parquet``, from the declared format, the Parquet magic bytes, the file name or the content type."""
    if declared in ("csv", "parquet"):
        return declared
    if declared:
        raise Invalid(f"Unknown format '{declared}'.", [FieldFault("format", "unknown format", "use csv or parquet")])
    if head[:4] == b"PAR1":
        return "parquet"
    if head[:2] == b"\x1f\x8b":
        raise Unsupported(
            "Batch uploads are not read gzipped.",
            [FieldFault("file", "gzip", "send the CSV uncompressed, or as Parquet (compressed inside)")],
        )
    lowered = (filename or "").lower()
    if lowered.endswith((".parquet", ".pq")) or content_type == MEDIA_TYPES["parquet"]:
        return "parquet"
    if lowered.endswith((".csv", ".txt")) or content_type in ("text/csv", "text/plain", "application/octet-stream", ""):
        return "csv"
    raise Unsupported(
        f"Unsupported media type '{content_type}' for a batch file.",
        [FieldFault("content_type", f"'{content_type}'", "send a CSV (text/csv) or Parquet file")],
    )


# ---- reading a file chunk by chunk -----------------------------------------------------------------------------


def input_columns(scoring: ScoringModel, id_column: str | None) -> list[str]:
    """The columns a chunk keeps: the model's, its exposure and offset columns where the file has them, the id."""
    columns = [*scoring.encoding.column_names, *scoring.row_columns]
    if id_column is not None and id_column not in columns:
        columns.append(id_column)
    return columns


def check_columns(scoring: ScoringModel, names: Sequence[str], id_column: str | None) -> None:
    """The file's header holds the columns ``/predict`` takes (``column_faults``: each of the model's columns once,
    its exposure and offset columns at most once, no other) and the id column; the faults name each one at fault."""
    faults = column_faults(scoring, names, "columns", also=[] if id_column is None else [id_column])
    if id_column is not None and id_column not in names:
        faults.append(FieldFault("id_column", f"no column '{id_column}' in the file", "name one of its columns"))
    if faults:
        raise Invalid("The file's columns are not those the model scores.", faults)


def check_schema(encoding: TableEncoding, schema: pa.Schema) -> None:
    """The types of a Parquet file's columns: a number column is numbers (or text, read value by value), a
    categorical one text or integers; booleans, dates and nested values are refused, naming the column."""
    faults = []
    for column in encoding.columns:
        kind = schema.field(column.name).type
        if column.kind == "numeric":
            allowed = any(test(kind) for test in (*_NUMERIC_TYPES, *_TEXT_TYPES))
            expected = "numbers"
        else:
            allowed = any(test(kind) for test in (*_TEXT_TYPES, pa.types.is_integer, pa.types.is_null))
            expected = f"text, one of {list(column.categories)[:5]}"
        if not allowed:
            faults.append(FieldFault(f"columns.{column.name}", f"a column of type {kind}", f"send {expected}"))
    if faults:
        raise Invalid("Some columns have a type the model cannot score.", faults)


def file_header(source: BatchInput) -> list[str]:
    """The column names of the file (Parquet: its schema; CSV: its first line), read without its rows."""
    source.file.seek(0)
    if source.format == "parquet":
        try:
            return list(pq.ParquetFile(source.file).schema_arrow.names)
        except (pa.ArrowException, OSError) as error:
            raise Invalid(
                "The Parquet file could not be read.", [FieldFault("file", str(error), "send a Parquet file")]
            ) from error
    first = source.file.readline(1024 * 1024).decode("utf-8-sig", errors="replace")
    source.file.seek(0)
    try:
        reader = pacsv.open_csv(io.BytesIO(first.encode() or b"\n"), read_options=pacsv.ReadOptions(block_size=1 << 20))
    except pa.ArrowException as error:
        raise Invalid(
            "The CSV header could not be read.",
            [FieldFault("file", str(error), "start the file with a line of column names")],
        ) from error
    return list(reader.schema.names)


def read_chunks(source: BatchInput, columns: list[str], chunk_rows: int) -> Iterator[pa.Table]:
    """The file's rows, ``chunk_rows`` at a time (the last chunk fewer), only ``columns`` (those the file has).
    CSV cells are read as text (missing where empty); the chunk job reads numbers from them."""
    source.file.seek(0)
    if source.format == "parquet":
        parquet = pq.ParquetFile(source.file)
        present = [name for name in columns if name in parquet.schema_arrow.names]
        batches: Iterator[pa.RecordBatch] = parquet.iter_batches(batch_size=chunk_rows, columns=present)
        yield from _rebatched(batches, chunk_rows)
        return
    try:
        reader = pacsv.open_csv(
            source.file,
            read_options=pacsv.ReadOptions(block_size=CSV_BLOCK_BYTES),
            convert_options=pacsv.ConvertOptions(
                column_types={name: pa.string() for name in columns},
                include_columns=columns,
                include_missing_columns=False,
                strings_can_be_null=True,
                null_values=[""],
            ),
        )
        yield from _rebatched(iter(reader), chunk_rows)
    except pa.ArrowInvalid as error:
        raise Invalid(
            "The CSV file could not be read.",
            [FieldFault("file", str(error), "send UTF-8 CSV: a header line, then a row per line, as many cells")],
        ) from error


def _rebatched(batches: Iterator[pa.RecordBatch], chunk_rows: int) -> Iterator[pa.Table]:
    pending: list[pa.RecordBatch] = []
    count = 0
    for batch in batches:
        while batch.num_rows:
            take = min(batch.num_rows, chunk_rows - count)
            pending.append(batch.slice(0, take))
            count += take
            batch = batch.slice(take)
            if count == chunk_rows:
                yield pa.Table.from_batches(pending)
                pending, count = [], 0
    if count:
        yield pa.Table.from_batches(pending)


def check_parquet_size(metadata: pq.FileMetaData, columns: list[str], file_bytes: int, settings: Settings) -> None:
    """A Parquet file's rows and what its ``columns`` take once read, from its metadata before any row is: at most
    FIRE_MAX_BATCH_ROWS rows, and at most one per byte of the file (values that repeat compress to almost nothing: a
    327 KB file held 10 million rows, each scored all the same); what they inflate to, at most FIRE_MAX_BATCH_BYTES
    (``parquet_inflated_bytes``), as the text of a CSV is bounded."""
    rows = metadata.num_rows
    check_batch_rows(rows, settings)
    if rows > file_bytes:
        raise TooLarge(
            f"The Parquet file holds {rows} rows in {file_bytes} bytes: more rows than bytes.",
            [
                FieldFault(
                    "file",
                    f"{rows} rows in {file_bytes} bytes",
                    "send at most one row per byte of the file (values that repeat compress to almost nothing, yet "
                    "each row is scored), or the rows as CSV",
                )
            ],
        )
    inflated = parquet_inflated_bytes(metadata, columns)
    if inflated > settings.max_batch_bytes:
        raise TooLarge(
            f"The Parquet file's columns inflate to {inflated} bytes once read, more than the limit of "
            f"{settings.max_batch_bytes}.",
            [FieldFault("file", f"{inflated} bytes once read", "split the file or raise FIRE_MAX_BATCH_BYTES")],
        )


def check_batch_rows(rows: int, settings: Settings) -> None:
    if rows > settings.max_batch_rows:
        limit = settings.max_batch_rows
        raise TooLarge(
            f"The file has more than {limit} rows.",
            [
                FieldFault(
                    "file",
                    f"more than {limit} rows",
                    f"split it into files of {limit} rows or raise FIRE_MAX_BATCH_ROWS",
                )
            ],
        )


def bounded_rows(chunks: Iterator[pa.Table], settings: Settings) -> Iterator[pa.Table]:
    """The chunks, refused as soon as their rows pass FIRE_MAX_BATCH_ROWS (a CSV's are counted as they are read)."""
    rows = 0
    for table in chunks:
        rows += table.num_rows
        check_batch_rows(rows, settings)
        yield table


def dataset_chunks(
    datasets: DatasetStore, dataset_id: str, scoring: ScoringModel, chunk_rows: int
) -> tuple[list[str], Iterator[pa.Table]]:
    """A stored dataset's feature rows in their original columns (numbers as stored, each categorical column's level
    from its one-hot indicators; not its exposure or offset columns): (column names, chunks)."""
    encoding = datasets.read(dataset_id).encoding
    X, _ = datasets.load_arrays(dataset_id)
    names = encoding.column_names

    def chunks() -> Iterator[pa.Table]:
        for start in range(0, X.shape[0], chunk_rows):
            rows = X[start : start + chunk_rows]
            columns: dict[str, pa.Array] = {}
            position = 0
            for column in encoding.columns:
                if column.kind == "numeric":
                    columns[column.name] = pa.array(rows[:, position], mask=np.isnan(rows[:, position]))
                    position += 1
                    continue
                width = len(column.categories)
                block = rows[:, position : position + width]
                position += width
                levels = np.array([*column.categories, None], dtype=object)
                chosen = np.where(block.any(axis=1), block.argmax(axis=1), width)
                columns[column.name] = pa.array(levels[chosen], type=pa.string())
            yield pa.table(columns)

    return names, chunks()


# ---- scoring one chunk -----------------------------------------------------------------------------------------


class _KeepEncoded(TableEncoding):
    """The model's encoding, keeping the matrix that ``score_rows`` encodes (for :attr:`ScoredChunk.X`)."""

    def __init__(self, encoding: TableEncoding):
        self.__dict__.update(encoding.__dict__)
        self.encoded: np.ndarray | None = None

    def encode(self, table, n_rows, location="columns"):
        self.encoded = super().encode(table, n_rows, location)
        return self.encoded


def score_chunk(
    scoring: ScoringModel,
    chunk: pa.Table,
    *,
    first_row: int = 0,
    explain: bool = False,
    times: Sequence[float] | None = None,
    id_column: str | None = None,
) -> ScoredChunk:
    """Score one chunk of a batch (its rows in the model's original columns, as a pyarrow table) with the service's
    scoring (``score_rows``: the model's TableEncoding and RuleEnsemble): the encoded rows and the result's columns.
    ``first_row``: the number of the chunk's first row in the file. A value that cannot be scored raises
    :class:`BatchRowsInvalid` naming the column and the file's first bad row. The one place a batch's rows are
    scored; the result's ``X`` is the chunk's encoded rows (the chunk job counts them for drift once stored)."""
    n_rows = chunk.num_rows
    table = {name: _column_values(scoring, name, chunk.column(name), first_row) for name in chunk.column_names}
    if id_column is not None and id_column not in input_columns(scoring, None):
        table.pop(id_column, None)  # not a feature: copied into the result as it is
    keep = _KeepEncoded(scoring.encoding)
    try:
        scores = score_rows(
            replace(scoring, encoding=keep), lambda names: Rows(table, n_rows, "columns"), explain, n_rows, times
        )
    except Invalid as error:
        raise BatchRowsInvalid(_located(error, scoring, table, first_row)) from error
    assert keep.encoded is not None
    columns: dict[str, pa.Array] = {"row": pa.array(np.arange(first_row, first_row + n_rows, dtype=np.int64))}
    if id_column is not None:
        columns[id_column] = chunk.column(id_column).combine_chunks()
    columns["prediction"] = pa.array(scores.predictions)
    if scores.probabilities is not None and scores.classes is not None:
        probabilities = np.asarray(scores.probabilities, dtype=np.float64)
        if probabilities.ndim == 1:  # a binary classifier's P(classes[1])
            probabilities = np.column_stack([1.0 - probabilities, probabilities])
        for k, label in enumerate(scores.classes):
            columns[f"probability_{label}"] = pa.array(probabilities[:, k])
    if scores.survival is not None and scores.times is not None:
        survival = np.asarray(scores.survival, dtype=np.float64)
        for k, time in enumerate(scores.times):
            columns[f"survival_{time:g}"] = pa.array(survival[:, k])
    if scores.explanations is not None:
        columns["rules"] = pa.array(scores.explanations, type=pa.list_(pa.int64()))
        columns["contributions"] = pa.array(scores.contributions)
        if scores.linear_contributions is not None:
            columns["linear_contributions"] = pa.array(scores.linear_contributions)
    return ScoredChunk(keep.encoded, pa.table(columns))


def _column_values(scoring: ScoringModel, name: str, values: pa.ChunkedArray, first_row: int):
    """A chunk's column as ``score_rows`` reads it: float64 numbers for a number column (text read as numbers by
    Arrow's cast, or where it refuses a cell (spaces around it) by ``float``: both correctly rounded, as every
    entrance reads numbers, ``app.core.tables``; a cell that is none raises :class:`BatchRowsInvalid` with its row),
    text or None per row for a categorical one."""
    kinds = {column.name: column.kind for column in scoring.encoding.columns}
    numeric = kinds.get(name) == "numeric" or name in scoring.row_columns
    if pa.types.is_dictionary(values.type):
        values = values.cast(values.type.value_type)
    if numeric:
        if pa.types.is_boolean(values.type):
            raise BatchRowsInvalid(f"column '{name}': true/false in a number column (row {first_row}); send numbers")
        if any(test(values.type) for test in _NUMERIC_TYPES):
            return values.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
        try:  # text read as numbers by Arrow at once; where it refuses a cell, cell by cell to name the row
            return pc.cast(values, pa.float64()).to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
        text = values.cast(pa.string()).to_numpy(zero_copy_only=False)
        numbers = np.full(len(text), np.nan)
        for row, cell in enumerate(text):
            if cell is None:
                continue
            try:
                numbers[row] = float(cell)
            except ValueError:
                raise BatchRowsInvalid(
                    f"column '{name}': row {first_row + row} has {cell!r}, not a number; send numbers "
                    "(or an empty cell for a missing value)"
                ) from None
        return numbers
    if pa.types.is_integer(values.type) or pa.types.is_floating(values.type):
        cells = values.to_pylist()
        return np.array([None if cell is None else str(cell) for cell in cells], dtype=object)
    return values.cast(pa.string()).to_numpy(zero_copy_only=False)


def _located(error: Invalid, scoring: ScoringModel, table: dict, first_row: int) -> str:
    """A scoring error of a chunk as a sentence naming each column at fault and the file's first bad row in it."""
    parts = []
    categories = {column.name: set(column.categories) for column in scoring.encoding.columns if column.categories}
    for fault in error.faults:
        if "." not in fault.field:  # rows of the chunk, no column (score_rows' guard of a score that is not finite)
            parts.append(f"the chunk from row {first_row}: {fault.message}; {fault.fix}")
            continue
        column = fault.field.split(".", 1)[1]
        row = None
        values = table.get(column)
        if column in categories and values is not None:
            known = categories[column]
            row = next((r for r, value in enumerate(values) if value is not None and str(value) not in known), None)
        elif values is not None and isinstance(values, np.ndarray) and values.dtype == np.float64:
            # score_rows names the chunk's row: the file's is named here, by score_rows' own bounds
            if column == scoring.exposure:
                fine = exposure_in_range(values)
            elif column == scoring.offset:
                fine = np.abs(np.nan_to_num(values, nan=0.0)) <= max_offset(scoring.ensemble.link)
            else:
                fine = np.isnan(values) | (np.abs(values) <= MAX_ABS_VALUE)  # a missing value is no fault
            bad = np.flatnonzero(~fine)
            row = int(bad[0]) if len(bad) else None
        message = fault.message
        if row is not None and column in scoring.row_columns:
            message = (
                f"not a valid exposure (a number {EXPOSURE_RANGE})"
                if column == scoring.exposure
                else f"not a valid offset (within ±{max_offset(scoring.ensemble.link):.4g})"
            )
        value = None if row is None or values is None else values[row]
        value = value.item() if isinstance(value, np.generic) else value
        where = "" if row is None else f" row {first_row + row} has {value!r}:"
        parts.append(f"column '{column}':{where} {message}; {fault.fix}")
    return f"{error.detail} " + "; ".join(parts)


# ---- storing chunks and results --------------------------------------------------------------------------------


def table_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def table_from_bytes(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(data).read_all()


class BatchParts:
    """A batch's chunks in Redis: the input rows of each chunk, its scored rows and their drift counts, and which
    chunks failed."""

    def __init__(self, settings: Settings, blobs: BlobStore, redis: Redis):
        self.settings = settings
        self.blobs = blobs
        self.redis = redis
        self.keys = Keys.from_settings(settings)

    def put_inputs(self, job_id: str, chunks: Sequence[tuple[int, bytes]]) -> None:
        """The input rows of (chunk index, rows as Arrow IPC: ``table_bytes``) pairs, in one transaction."""
        with self.redis.pipeline(transaction=True) as pipe:
            for chunk, data in chunks:
                key = self.keys.batch_input(job_id, chunk)
                self.blobs.put(key, data, self.settings.result_ttl_seconds, pipeline=pipe)
            pipe.execute()

    def get_input(self, job_id: str, chunk: int) -> pa.Table | None:
        data = self.blobs.get(self.keys.batch_input(job_id, chunk))
        return None if data is None else table_from_bytes(data)

    def put_output(self, job_id: str, chunk: int, table: pa.Table, counts: Mapping[str, int] | None) -> None:
        """A chunk's scored rows and their drift counts (None: its model's rows are not counted), in one transaction:
        a chunk run again writes both anew, so it never counts twice."""
        ttl = self.settings.result_ttl_seconds
        key = self.keys.batch_counts(job_id, chunk)
        with self.redis.pipeline(transaction=True) as pipe:
            self.blobs.put(self.keys.batch_output(job_id, chunk), table_bytes(table), ttl, pipeline=pipe)
            pipe.delete(key)
            if counts:
                pipe.hset(key, items=[item for pair in counts.items() for item in pair])
                pipe.expire(key, ttl)
            pipe.execute()

    def get_output(self, job_id: str, chunk: int) -> pa.Table | None:
        data = self.blobs.get(self.keys.batch_output(job_id, chunk))
        return None if data is None else table_from_bytes(data)

    def counts(self, job_id: str, n_chunks: int) -> Iterator[dict[str, int]]:
        """The drift counts of each chunk (empty where none were stored), BULK chunks a round trip."""
        for start in range(0, n_chunks, BULK):
            with self.redis.pipeline(transaction=False) as pipe:
                for chunk in range(start, min(start + BULK, n_chunks)):
                    pipe.hgetall(self.keys.batch_counts(job_id, chunk))
                for reply in pipe.execute():
                    yield {text(field): int(value) for field, value in reply.items()}

    def mark_failed(self, job_id: str, chunk: int) -> None:
        key = self.keys.batch_failed(job_id)
        self.redis.zadd(key, {str(chunk): chunk})
        self.redis.expire(key, self.settings.result_ttl_seconds)

    def failed_before(self, job_id: str, chunk: int) -> bool:
        """Whether a chunk before ``chunk`` failed (this one's rows cannot hold the file's first bad row)."""
        return bool(self.redis.zcount(self.keys.batch_failed(job_id), "-inf", f"({chunk}"))

    def delete_inputs(self, job_id: str, n_chunks: int) -> None:
        for start in range(0, n_chunks, BULK):
            chunks = range(start, min(start + BULK, n_chunks))
            self.blobs.delete_all([self.keys.batch_input(job_id, chunk) for chunk in chunks])

    def delete_counts(self, job_id: str, n_chunks: int) -> None:
        for start in range(0, n_chunks, BULK):
            chunks = range(start, min(start + BULK, n_chunks))
            self.redis.unlink(*[self.keys.batch_counts(job_id, chunk) for chunk in chunks])

    def delete(self, job_id: str, n_chunks: int) -> None:
        """Every part of a batch: its inputs, scored rows, counts, failed chunks and counted mark."""
        self.delete_inputs(job_id, n_chunks)
        self.delete_counts(job_id, n_chunks)
        for start in range(0, n_chunks, BULK):
            chunks = range(start, min(start + BULK, n_chunks))
            self.blobs.delete_all([self.keys.batch_output(job_id, chunk) for chunk in chunks])
        self.redis.unlink(self.keys.batch_failed(job_id), self.keys.batch_counted(job_id))


@dataclass
class BatchProgress:
    chunks_done: int
    rows_done: int
    chunks_failed: int


class BatchScoring:
    """Submitting batch scoring jobs, reading where they stand, streaming their results, deleting them."""

    def __init__(
        self,
        settings: Settings,
        redis: Redis,
        blobs: BlobStore,
        models: ModelStore,
        datasets: DatasetStore,
        records: JobRecords,
        jobs: JobLifecycle,
        submission: JobSubmission,
    ):
        self.settings = settings
        self.redis = redis
        self.keys = Keys.from_settings(settings)
        self.parts = BatchParts(settings, blobs, redis)
        self.models = models
        self.datasets = datasets
        self.records = records
        self.jobs = jobs
        self.submission = submission

    # ---- submission ------------------------------------------------------------------------------------------

    def submit(
        self,
        target: "str | ModelRef",
        options: BatchOptions,
        *,
        tenant: str,
        upload: BatchInput | None = None,
        dataset_id: str | None = None,
    ) -> JobRecord:
        """Check the input against the model, split it into chunks in Redis, and queue a chunk job per chunk and the
        parent that waits for them (counted once against the tenant's active jobs)."""
        chunk_rows = options.chunk_rows or self.settings.batch_chunk_rows
        self._check_chunk_rows(chunk_rows)
        scoring = self._scoring_model(target, tenant)
        check_times(scoring, options.times, "times")
        if upload is not None:
            names = file_header(upload)
            source = upload.filename or f"upload.{upload.format}"
        elif dataset_id is not None:
            self.datasets.get(dataset_id, tenant=tenant)
            source = f"dataset:{dataset_id}"
            names, stored = dataset_chunks(self.datasets, dataset_id, scoring, chunk_rows)
        else:
            raise Invalid("Nothing to score.", [FieldFault("file", "missing", "upload a file or name a dataset_id")])
        check_columns(scoring, names, options.id_column)
        if upload is not None and upload.format == "parquet":
            upload.file.seek(0)
            parquet = pq.ParquetFile(upload.file)
            check_schema(scoring.encoding, parquet.schema_arrow)
            size = upload.file.seek(0, io.SEEK_END)
            check_parquet_size(parquet.metadata, input_columns(scoring, options.id_column), size, self.settings)
        job_id = new_job_id()
        self.submission._admit(tenant, job_id)  # one submission (its chunks are counted as they are read)
        chunks = read_chunks(upload, input_columns(scoring, options.id_column), chunk_rows) if upload else stored
        chunks = bounded_rows(chunks, self.settings)
        cells: list[JobRecord] = []
        group: list[tuple[int, int, bytes]] = []  # (chunk, its rows, its rows as Arrow IPC)
        n_rows = group_bytes = 0
        try:
            for chunk, table in enumerate(chunks):
                if chunk >= self.settings.max_batch_chunks:
                    raise TooLarge(
                        f"The file has more than {self.settings.max_batch_chunks} chunks of {chunk_rows} rows.",
                        [
                            FieldFault(
                                "chunk_rows", f"{chunk_rows}", "ask for larger chunks or raise FIRE_MAX_BATCH_CHUNKS"
                            )
                        ],
                    )
                data = table_bytes(table)
                group.append((chunk, table.num_rows, data))
                group_bytes += len(data)
                if len(group) == SUBMIT_CHUNKS or group_bytes >= SUBMIT_BYTES:
                    cells += self._queue_chunks(scoring, options, tenant, job_id, group, n_rows)
                    n_rows += sum(rows for _, rows, _ in group)
                    group, group_bytes = [], 0
            cells += self._queue_chunks(scoring, options, tenant, job_id, group, n_rows)
            n_rows += sum(rows for _, rows, _ in group)
            if n_rows == 0:
                raise Invalid("The file has no rows.", [FieldFault("file", "no rows", "send at least one row")])
        except BaseException:
            self.jobs.remove(cells)
            self.parts.delete(job_id, len(cells) + len(group))
            self.records.withdraw(tenant, job_id)  # not admitted after all
            raise
        spec = BatchJobSpec(
            model_id=scoring.id,
            model_name=scoring.name,
            model_version=scoring.version,
            source=source,
            output_format=options.output_format,
            explain=options.explain,
            times=options.times,
            id_column=options.id_column,
            chunk_rows=chunk_rows,
            n_rows=n_rows,
            n_chunks=len(cells),
        )
        parent = self.jobs.new("batch", spec, tenant, job_id=job_id, cells=[cell.id for cell in cells])
        self.jobs.create_all([(parent, {"batch_chunk": len(cells)})])
        return parent

    def _check_chunk_rows(self, chunk_rows: int) -> None:
        """A chunk of fewer rows than FIRE_BATCH_MIN_CHUNK_ROWS would cost its job more than its rows' scoring."""
        floor = self.settings.batch_min_chunk_rows
        if chunk_rows < floor:
            raise Invalid(
                f"A chunk of {chunk_rows} rows is below the floor of {floor} rows per chunk job.",
                [
                    FieldFault(
                        "chunk_rows",
                        f"{chunk_rows} rows, fewer than {floor} (FIRE_BATCH_MIN_CHUNK_ROWS): each chunk is a job whose "
                        "own cost would be more than its rows'",
                        f"ask for at least {floor} rows per chunk (or leave chunk_rows out: "
                        f"{self.settings.batch_chunk_rows})",
                    )
                ],
            )

    def _scoring_model(self, target: "str | ModelRef", tenant: str) -> ScoringModel:
        """The model a reference names: a model id, else a registered name (its latest version, as ``/predict``
        by name scores); a name with a version or alias as given. Neither an id nor a name: NotFound whose fix
        names every form."""
        if isinstance(target, ModelRef):
            return self.models.scoring_model(target, tenant)
        try:
            return self.models.scoring_model(target, tenant)
        except NotFound:
            pass
        try:
            return self.models.scoring_model(ModelRef(target), tenant)
        except NotFound:
            missing = NotFound(
                "model",
                target,
                "ref",
                f"use a model id (GET /v1/models) or a model name: '{target}' scores its latest version, "
                f"'{target}@champion' the version an alias points at, '{target}@3' version 3",
            )
            missing.detail = f"No model with id or name '{target}'."
            raise missing from None

    def _queue_chunks(
        self,
        scoring: ScoringModel,
        options: BatchOptions,
        tenant: str,
        job_id: str,
        group: list[tuple[int, int, bytes]],
        first: int,
    ) -> list[JobRecord]:
        """Store a group of chunks (chunk index, rows, the rows as Arrow IPC; ``first``: the file's row of its first)
        and record and queue a chunk job for each: a few round trips for the group."""
        if not group:
            return []
        self.submission._admit_more(tenant, job_id, len(group))  # a work unit each (FIRE_MAX_ACTIVE_UNITS)
        self.parts.put_inputs(job_id, [(chunk, data) for chunk, _, data in group])
        cells = []
        for chunk, rows, _ in group:
            spec = BatchChunkSpec(
                batch_id=job_id,
                model_id=scoring.id,
                chunk=chunk,
                first_row=first,
                n_rows=rows,
                explain=options.explain,
                times=options.times,
                id_column=options.id_column,
            )
            cells.append(self.jobs.new("batch_chunk", spec, tenant, parent_id=job_id))
            first += rows
        self.jobs.create_all([(cell, {}) for cell in cells])
        return cells

    # ---- reading -----------------------------------------------------------------------------------------------

    def get(self, job_id: str, *, tenant: str) -> JobRecord:
        """The tenant's batch job; another tenant's, or a job of another kind, is not found."""
        record = self.jobs.get(job_id, tenant=tenant)
        if record.kind != "batch" or not isinstance(record.spec, BatchJobSpec):
            raise_not_batch(job_id)
        return record

    def progress(self, record: JobRecord) -> BatchProgress:
        """The chunks that succeeded (and their rows) and failed, read from their records' statuses (a chunk's rows:
        ``chunk_rows``, the last chunk's the rest)."""
        spec = record.spec
        assert isinstance(spec, BatchJobSpec)
        statuses = self.records.statuses(record.cells or [])
        done = [chunk for chunk, status in enumerate(statuses) if status == SUCCEEDED]
        rows = sum(min(spec.chunk_rows, spec.n_rows - chunk * spec.chunk_rows) for chunk in done)
        return BatchProgress(len(done), rows, sum(status == FAILED for status in statuses))

    def stream_result(self, job_id: str, *, tenant: str, output_format: OutputFormat | None = None) -> Iterator[bytes]:
        """The scored rows of a succeeded batch job, part by part, as Parquet (a row group per chunk) or CSV (one
        header): a Conflict while it runs, or when it failed or was canceled (it has no result then)."""
        record = self.get(job_id, tenant=tenant)
        if record.status != SUCCEEDED:
            raise Conflict(
                f"Batch job {job_id} is {record.status}: it has no result"
                + (" yet." if record.status not in TERMINAL else "."),
                [FieldFault("job_id", f"status {record.status}", "wait until it succeeded (GET the job)")],
                retry_after=1 if record.status not in TERMINAL else None,
            )
        spec = record.spec
        assert isinstance(spec, BatchJobSpec)
        first = self.parts.get_output(job_id, 0)
        if first is None:
            raise Conflict(
                f"The result of batch job {job_id} has expired.",
                [FieldFault("job_id", "result expired", "submit the batch again")],
            )
        return self._stream(job_id, spec.n_chunks, first, output_format or spec.output_format)

    def _stream(self, job_id: str, n_chunks: int, first: pa.Table, output_format: OutputFormat) -> Iterator[bytes]:
        sink = _Drain()
        writer: pq.ParquetWriter | None = None
        for chunk in range(n_chunks):
            table = first if chunk == 0 else self.parts.get_output(job_id, chunk)
            if table is None:
                raise RuntimeError(f"batch job {job_id}: the scored rows of chunk {chunk} expired while sent")
            if output_format == "parquet":
                if writer is None:
                    writer = pq.ParquetWriter(sink, table.schema, compression="zstd")
                writer.write_table(table)
            else:
                pacsv.write_csv(
                    _csv_ready(table), sink, pacsv.WriteOptions(include_header=chunk == 0, quoting_style="needed")
                )
            yield sink.take()
        if writer is not None:
            writer.close()
            yield sink.take()

    def cancel(self, job_id: str, *, tenant: str) -> JobRecord:
        """Cancel a queued or running batch job and its chunk jobs, and delete its stored parts; a batch canceled
        already is answered as it is."""
        self.get(job_id, tenant=tenant)
        record = self.jobs.cancel(job_id, tenant=tenant)
        spec = record.spec
        assert isinstance(spec, BatchJobSpec)
        self.parts.delete(job_id, spec.n_chunks)
        return record

    def delete(self, job_id: str, *, tenant: str) -> None:
        """Cancel the batch job if it runs, then remove it, its chunk jobs, and every part of its input and result."""
        record = self.get(job_id, tenant=tenant)
        spec = record.spec
        assert isinstance(spec, BatchJobSpec)
        self.jobs.delete(job_id, tenant=tenant)
        self.parts.delete(job_id, spec.n_chunks)


def raise_not_batch(job_id: str):
    raise NotFound("batch job", job_id, "job_id", "list the jobs and use a batch job's id")


def _csv_ready(table: pa.Table) -> pa.Table:
    """List columns (rules, contributions) as JSON text: CSV has no lists."""
    for index, field in enumerate(table.schema):
        if pa.types.is_list(field.type) or pa.types.is_large_list(field.type):
            text = [None if value is None else json.dumps(value) for value in table.column(index).to_pylist()]
            table = table.set_column(index, field.name, pa.array(text, type=pa.string()))
    return table


class _Drain(io.RawIOBase):
    """A write-only file whose bytes are taken out after each part (the streamed response holds one part)."""

    def __init__(self):
        self._parts: list[bytes] = []
        self._position = 0

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        data = bytes(data)
        self._parts.append(data)
        self._position += len(data)
        return len(data)

    def tell(self) -> int:
        return self._position

    def take(self) -> bytes:
        data = b"".join(self._parts)
        self._parts = []
        return data
