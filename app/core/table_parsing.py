"""Uploaded tables parsed: the format detected (by content before name), a pickle refused, the text checked, the
header checked before the rows are read.

Parsing is bounded before it is costly: a gzipped upload inflates up to ``max_inflated_bytes`` (checked as it
inflates, into a temporary file: never whole in memory), and so does a Parquet file once read (its metadata says
how much: :func:`parquet_inflated_bytes`); a CSV's or Parquet file's header is checked (column count, repeated
names) before its rows are read, and no more than ``max_rows + 1`` rows are parsed.
"""

import csv
import io
import json
import tempfile
from collections import Counter
from collections.abc import Collection, Iterator
from typing import IO, TYPE_CHECKING

import pandas as pd

from app.core.config import Settings
from app.core.errors import FieldFault, Invalid, TooLarge, Unsupported
from solver.formats.sniff import GZIP_MAGIC, INFLATE_STEP, CorruptGzip, InflatedTooLarge, gunzip_chunks

if TYPE_CHECKING:
    import pyarrow.parquet as pq

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
# A text cell starting with one of these is a formula to a spreadsheet that opens an export (CSV injection).
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def is_pickle(data: bytes) -> bool:
    return data[:2] in _PICKLE_PROTOCOL_MARKERS


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
