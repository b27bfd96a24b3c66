"""A batch's stored parts: each chunk's input and scored rows (Arrow IPC blobs) and drift counts, in Redis."""

from collections.abc import Iterator, Mapping, Sequence

import pyarrow as pa
from redis import Redis

from app.core.blobs import BlobStore
from app.core.config import Settings
from app.core.keys import Keys
from app.core.records import BULK
from app.core.replies import text


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
