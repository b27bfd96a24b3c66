"""Datasets: parse an uploaded table, validate it, encode it, store it under its content hash."""
import hashlib
import io
import json
import time
import zlib
from typing import Any

import numpy as np
import pandas as pd
from pydantic import Field

from app.core.blobs import BlobStore, Document
from app.core.config import Settings
from app.core.errors import FieldFault, Invalid, NotFound, TooLarge, Unsupported
from solver.encoding import TableEncoding, TableError

FORMATS = ("csv", "parquet", "json")
_CONTENT_TYPE_FORMATS = {
    "text/csv": "csv", "application/csv": "csv", "text/plain": "csv",
    "application/vnd.apache.parquet": "parquet", "application/x-parquet": "parquet",
    "application/json": "json",
}
_EXTENSION_FORMATS = {".csv": "csv", ".txt": "csv", ".parquet": "parquet", ".pq": "parquet", ".json": "json"}
_PICKLE_PROTOCOL_MARKERS = {b"\x80\x02", b"\x80\x03", b"\x80\x04", b"\x80\x05"}
MAX_ROWS_NAMED = 10


def is_pickle(data: bytes) -> bool:
    return data[:2] in _PICKLE_PROTOCOL_MARKERS


def table_invalid(error: TableError) -> Invalid:
    return Invalid(error.summary, [FieldFault(**fault) for fault in error.errors])


class TargetSummary(Document):
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
    target: str
    n_rows: int
    n_features: int
    columns: list[dict[str, Any]] = Field(description="the table's encoding (solver.encoding.TableEncoding.to_dict)")
    feature_names: list[str] = Field(description="the encoded columns a forest splits on")
    missing_values: dict[str, int] = Field(description="missing values per encoded column that has any")
    target_summary: TargetSummary
    source: DatasetSource
    created_at: float

    @property
    def encoding(self) -> TableEncoding:
        return TableEncoding.from_dict(self.columns)


class DatasetStore:
    def __init__(self, settings: Settings, blobs: BlobStore):
        self.settings = settings
        self.blobs = blobs
        self.index_key = f"{settings.key_prefix}datasets"

    def _meta_key(self, dataset_id: str) -> str:
        return f"{self.settings.key_prefix}dataset:{dataset_id}"

    def _arrays_key(self, dataset_id: str) -> str:
        return f"{self.settings.key_prefix}dataset:{dataset_id}:arrays"

    def create(self, data: bytes, *, target: str, content_type: str, filename: str | None,
               declared_format: str | None) -> tuple[DatasetInfo, bool]:
        """(info, created). Uploading the same bytes with the same target again is a no-op."""
        dataset_id = "ds_" + hashlib.sha256(
            b"fire-dataset-v1\0" + target.encode() + b"\0" + self.settings.categorical.encode() + b"\0" + data
        ).hexdigest()[:32]
        existing = self.find(dataset_id)
        if existing is not None:
            return existing, False
        table_format, frame = parse_table(data, content_type, filename, declared_format,
                                          self.settings.max_upload_bytes)
        encoding, features, y = validate_table(frame, target, self.settings)
        missing = {name: int(count) for name, count in
                   zip(encoding.feature_names, np.isnan(features).sum(axis=0)) if count}
        info = DatasetInfo(
            id=dataset_id, target=target, n_rows=features.shape[0], n_features=features.shape[1],
            columns=encoding.to_dict(), feature_names=encoding.feature_names, missing_values=missing,
            target_summary=TargetSummary(mean=y.mean(), std=y.std(), min=y.min(), max=y.max()),
            source=DatasetSource(filename=filename, format=table_format, bytes=len(data)), created_at=time.time())
        self.blobs.put_arrays(self._arrays_key(dataset_id), X=features, y=y)
        self.blobs.put_document(self._meta_key(dataset_id), info)
        self.blobs.index(self.index_key, dataset_id, info.created_at)
        return info, True

    def find(self, dataset_id: str) -> DatasetInfo | None:
        return self.blobs.get_document(self._meta_key(dataset_id), DatasetInfo)

    def get(self, dataset_id: str, field: str = "dataset_id") -> DatasetInfo:
        info = self.find(dataset_id)
        if info is None:
            raise NotFound("dataset", dataset_id, field)
        return info

    def list(self, limit: int = 100) -> list[DatasetInfo]:
        return self.blobs.newest_documents(self.index_key, self._meta_key, DatasetInfo, limit)

    def load_arrays(self, dataset_id: str) -> tuple[np.ndarray, np.ndarray]:
        arrays = self.blobs.get_arrays(self._arrays_key(dataset_id))
        if arrays is None:
            raise NotFound("dataset", dataset_id)
        return arrays["X"], arrays["y"]


def detect_format(data: bytes, content_type: str, filename: str | None, declared: str | None) -> str:
    if declared:
        if declared not in FORMATS:
            raise Invalid(f"Unknown format '{declared}'.",
                          [FieldFault("format", "unknown format", f"use one of {list(FORMATS)}")])
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
    raise Unsupported(f"Unsupported media type '{content_type}'.",
                      [FieldFault("content_type", f"unsupported media type '{content_type}'",
                                  "send text/csv, application/json, application/vnd.apache.parquet "
                                  "(optionally gzipped) or name the format")])


def _gunzip(data: bytes, limit: int) -> bytes:
    decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = decompressor.decompress(data, limit + 1)
    except zlib.error as exc:
        raise Invalid(f"The gzip stream is corrupt: {exc}",
                      [FieldFault("file", "corrupt gzip", "re-compress the file")]) from exc
    if len(out) > limit:
        raise TooLarge(f"The file decompresses to more than {limit} bytes.",
                       [FieldFault("file", "too large once decompressed",
                                   "send a smaller file or raise FIRE_MAX_UPLOAD_BYTES")])
    return out


def parse_table(data: bytes, content_type: str, filename: str | None, declared_format: str | None,
                limit: int) -> tuple[str, pd.DataFrame]:
    if data[:2] == b"\x1f\x8b":
        data = _gunzip(data, 8 * limit)
    if is_pickle(data):
        raise Unsupported("Pickled data is never loaded (it can run code).",
                          [FieldFault("file", "pickle", "send CSV, Parquet or JSON records")])
    if not data.strip():
        raise Invalid("The upload is empty.", [FieldFault("file", "empty", "send a table")])
    table_format = detect_format(data, content_type, filename, declared_format)
    try:
        if table_format == "csv":
            frame = pd.read_csv(io.BytesIO(data))
        elif table_format == "parquet":
            frame = pd.read_parquet(io.BytesIO(data))
        else:
            records = json.loads(data)
            if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
                raise ValueError("expected a JSON array of objects (records)")
            frame = pd.DataFrame.from_records(records)
    except Exception as exc:
        raise Invalid(f"The {table_format} file could not be parsed: {exc}",
                      [FieldFault("file", f"unparsable {table_format}",
                                  "check the file, or name its format if it was guessed wrong")]) from exc
    frame.columns = [str(c) for c in frame.columns]
    duplicated = sorted({c for c in frame.columns if list(frame.columns).count(c) > 1})
    if duplicated:
        raise Invalid("Column names repeat.",
                      [FieldFault(f"columns.{c}", "duplicate column name", "rename it") for c in duplicated])
    return table_format, frame


def _rows(mask: np.ndarray) -> str:
    rows = np.flatnonzero(mask)
    shown = ", ".join(str(r) for r in rows[:MAX_ROWS_NAMED])
    return f"{len(rows)} rows ({shown}{', ...' if len(rows) > MAX_ROWS_NAMED else ''}; 0-based data rows)"


def validate_table(frame: pd.DataFrame, target: str, settings: Settings):
    """(encoding, features float64 (n, p), y float64 (n,)), or Invalid naming every fault."""
    if target not in frame.columns:
        raise Invalid(f"No column named '{target}'.",
                      [FieldFault("target", "not a column", f"use one of {list(frame.columns)}")])
    if len(frame) < 2 or frame.shape[1] < 2:
        raise Invalid("A dataset needs at least 2 rows and one feature column besides the target.",
                      [FieldFault("file", f"{len(frame)} rows, {frame.shape[1]} columns", "send more data")])
    y = pd.to_numeric(frame[target], errors="coerce").to_numpy(dtype=np.float64)
    faults = []
    non_numeric = np.isnan(y) & frame[target].notna().to_numpy()
    if non_numeric.any():
        faults.append(FieldFault(f"columns.{target}", f"non-numeric target in {_rows(non_numeric)}",
                                 "the target must be a number"))
    missing_target = frame[target].isna().to_numpy()
    if missing_target.any():
        faults.append(FieldFault(f"columns.{target}", f"missing target in {_rows(missing_target)}",
                                 "drop these rows or fill the target"))
    if np.isinf(y).any():
        faults.append(FieldFault(f"columns.{target}", f"infinite target in {_rows(np.isinf(y))}",
                                 "drop these rows"))
    feature_frame = frame.drop(columns=[target])
    try:
        encoding = TableEncoding.infer(feature_frame, settings.categorical, settings.max_categories)
        features = encoding.encode_frame(feature_frame)
    except TableError as error:
        raise table_invalid(error) from error
    for name, column in zip(encoding.feature_names, features.T):
        infinite = np.isinf(column)
        if infinite.any():
            faults.append(FieldFault(f"columns.{name}", f"infinite values in {_rows(infinite)}",
                                     "replace them with finite numbers or leave them empty (missing)"))
    if faults:
        raise Invalid("The table does not validate.", faults)
    return encoding, features, y
