"""The files a batch reads: their format (CSV or Parquet, by content before name), their columns checked against
the model's, their size bounded, their rows read a chunk at a time (or a stored dataset's); the formats it writes."""

import io
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Literal

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from app.core.config import Settings
from app.core.datasets import DatasetStore
from app.core.errors import FieldFault, Invalid, TooLarge, Unsupported
from app.core.model_scoring import ScoringModel, column_faults
from app.core.table_parsing import parquet_inflated_bytes
from solver.encoding import TableEncoding

OutputFormat = Literal["parquet", "csv"]
OUTPUT_FORMATS: tuple[OutputFormat, ...] = ("parquet", "csv")
MEDIA_TYPES = {"parquet": "application/vnd.apache.parquet", "csv": "text/csv"}
CSV_BLOCK_BYTES = 8 * 1024 * 1024  # pyarrow's streaming CSV reader parses this much text at a time
NUMERIC_TYPES = (pa.types.is_integer, pa.types.is_floating, pa.types.is_decimal, pa.types.is_null)
TEXT_TYPES = (pa.types.is_string, pa.types.is_large_string, pa.types.is_dictionary)


@dataclass
class BatchInput:
    """An uploaded file as the API spooled it (a file object on its own disk), in a format read by ``format``."""

    file: IO[bytes]
    format: Literal["csv", "parquet"]
    filename: str | None = None


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
            allowed = any(test(kind) for test in (*NUMERIC_TYPES, *TEXT_TYPES))
            expected = "numbers"
        else:
            allowed = any(test(kind) for test in (*TEXT_TYPES, pa.types.is_integer, pa.types.is_null))
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
