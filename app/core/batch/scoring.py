"""Batch scoring as the API runs it (:class:`BatchScoring`): a file checked, cut into chunk jobs and queued a group
at a time; its progress; its scored rows streamed back; cancel and delete."""

import io
import json
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from redis import Redis

from app.core.batch.files import (
    BatchInput,
    OutputFormat,
    bounded_rows,
    check_columns,
    check_parquet_size,
    check_schema,
    dataset_chunks,
    file_header,
    input_columns,
    read_chunks,
)
from app.core.batch.parts import BatchParts, table_bytes
from app.core.blobs import BlobStore
from app.core.config import Settings
from app.core.datasets import DatasetStore
from app.core.errors import Conflict, FieldFault, Invalid, NotFound, TooLarge
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
from app.core.model_scoring import ScoringModel, check_times
from app.core.models import ModelStore
from app.core.records import BULK, JobRecords
from app.core.registry import ModelRef

# a submission stores, records and queues its chunks a group at a time: at most this many chunks, or chunks of at
# most this many bytes of input (Arrow IPC, before compression; one larger chunk is a group of its own)
SUBMIT_CHUNKS = BULK
SUBMIT_BYTES = 16 * 1024 * 1024


@dataclass
class BatchOptions:
    output_format: OutputFormat = "parquet"
    explain: bool = False
    chunk_rows: int | None = None  # None: FIRE_BATCH_CHUNK_ROWS
    times: list[float] | None = None
    id_column: str | None = None


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
