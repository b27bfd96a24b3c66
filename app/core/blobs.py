"""Artifact bytes in Redis: zstd-compressed, split into chunks below the value-size limit; the stored
documents' base model and their JSON helpers.

A document is written only where it reads back as the model its readers read it with (``put_document``: no
non-finite number, which JSON has no word for, and no value its model refuses); one that cannot be read anyway (damaged
in Redis, written by an older version) raises :class:`DocumentUnreadable` to its reader, is left out of listings
(``newest_documents``), and is counted in ``UNREADABLE`` (``/metrics``), so that it degrades only what it belongs to.

Layout: `{key}` holds a small JSON header (chunk count, sizes), `{key}:{i}` the chunks. A reader
sees either a complete artifact or none: the header is written last, in the same transaction.
"""

import hashlib
import io
import json
import logging
import threading
from collections import Counter
from collections.abc import Sequence
from functools import cache

import numpy as np
import zstandard
from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError
from redis import Redis

from app.core.errors import Unreadable
from app.core.replies import members, values

log = logging.getLogger(__name__)
# reads of stored documents that could not be read, by the document's model, since this process started (/metrics)
UNREADABLE: Counter[str] = Counter()


class _Codecs(threading.local):
    """zstd contexts per thread: python-zstandard's may not be used by two threads at once (a shared
    decompressor failed reads answered by the API's thread pool in parallel)."""

    def __init__(self):
        self.compressor = zstandard.ZstdCompressor(level=3)
        self.decompressor = zstandard.ZstdDecompressor()


_codecs = _Codecs()


@cache
def _adapter(model) -> TypeAdapter:
    return TypeAdapter(model)


class Document(BaseModel):
    """A stored document: one model for its writer and its readers; unknown fields and non-finite numbers are
    refused (JSON has no word for them: written as null, they would not read back as numbers)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class DocumentUnreadable(Unreadable):
    """The document under ``key`` does not read as ``model`` (``cause``: why); counted in UNREADABLE. Its store says
    in the words of its thing what replaces it, and whose it is; one that reaches the edge as it is answers a 409 that
    names neither."""

    def __init__(self, key: str, model, cause: Exception):
        self.key = key
        self.model_name = getattr(model, "__name__", str(model))
        self.cause = cause
        UNREADABLE[self.model_name] += 1
        super().__init__(f"A stored {self.model_name} cannot be read ({brief(cause)}); the operator's log names it.")

    def __str__(self) -> str:  # the log's words: where it is stored
        return f"{self.model_name} under {self.key} cannot be read: {brief(self.cause)}"


class DocumentUnwritable(ValueError):
    """A document that would not read back as its own model: never stored."""


def brief(error: Exception) -> str:
    """An error in one line: a ValidationError's first fault (its field and message), else its text."""
    if isinstance(error, ValidationError) and error.errors():
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        return f"{where}: {first['msg']}" if where else first["msg"]
    return str(error).splitlines()[0] if str(error) else type(error).__name__


def jsonable(value):
    """JSON-ready copy of a structure holding numpy arrays and scalars."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def canonical_hash(value) -> str:
    """Hash of a JSON value that does not depend on key order (ids of artifacts, request fingerprints)."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:32]


class BlobStore:
    def __init__(self, redis: Redis, chunk_bytes: int):
        self.redis = redis
        self.chunk_bytes = chunk_bytes

    def put(self, key: str, data: bytes | memoryview, ttl: int | None = None, pipeline=None) -> None:
        """Store ``data`` under ``key``; with a ``pipeline`` (a transaction), as part of it, written when it is."""
        compressed = _codecs.compressor.compress(data)
        chunks = self._chunks(compressed)
        header = {"chunks": len(chunks), "size": len(data), "compressed": len(compressed)}
        self._write(key, chunks, header, ttl, pipeline)

    def get(self, key: str) -> bytes | None:
        header = self.redis.get(key)
        if header is None:
            return None
        layout = json.loads(header)
        return self._read(key, range(layout["chunks"]), layout["size"])

    def put_parts(self, key: str, parts: Sequence[bytes], ttl: int | None = None) -> None:
        """Several artifacts under one key (a path's rules, one part per step), each compressed on its own so that
        :meth:`get_part` reads one without the others: ``{key}:{i}`` holds every part's chunks in turn, the header
        how many each part has (``delete`` and ``touch`` treat it as any blob)."""
        chunks: list[bytes] = []
        counts, sizes = [], []
        for data in parts:
            own = self._chunks(_codecs.compressor.compress(data))
            chunks.extend(own)
            counts.append(len(own))
            sizes.append(len(data))
        self._write(key, chunks, {"chunks": len(chunks), "parts": counts, "sizes": sizes}, ttl)

    def get_part(self, key: str, index: int) -> bytes | None:
        """Part ``index`` of a blob written by :meth:`put_parts`; None where there is no such blob or part."""
        header = self.redis.get(key)
        if header is None:
            return None
        layout = json.loads(header)
        counts = layout.get("parts", [])
        if not 0 <= index < len(counts):
            return None
        start = sum(counts[:index])
        return self._read(key, range(start, start + counts[index]), layout["sizes"][index])

    def _chunks(self, compressed: bytes) -> list[bytes]:
        return [compressed[i : i + self.chunk_bytes] for i in range(0, len(compressed), self.chunk_bytes)] or [b""]

    def _write(self, key: str, chunks: list[bytes], header: dict, ttl: int | None, pipeline=None) -> None:
        if pipeline is None:
            with self.redis.pipeline(transaction=True) as pipe:
                self._write(key, chunks, header, ttl, pipe)
                pipe.execute()
            return
        for index, chunk in enumerate(chunks):
            pipeline.set(f"{key}:{index}", chunk, ex=ttl)
        pipeline.set(key, json.dumps(header), ex=ttl)

    def _read(self, key: str, chunk_indices: range, size: int) -> bytes | None:
        stored = values(self.redis.mget([f"{key}:{i}" for i in chunk_indices]))
        chunks = [chunk for chunk in stored if chunk is not None]
        if len(chunks) < len(stored):
            return None  # expired between the header read and the chunk read
        return _codecs.decompressor.decompress(b"".join(chunks), max_output_size=size)

    def exists(self, key: str) -> bool:
        return bool(self.redis.exists(key))

    def delete(self, key: str) -> None:
        self.delete_all([key])

    def delete_all(self, keys: Sequence[str]) -> None:
        """Delete the blobs under ``keys`` (those that exist) with their chunks: two round trips however many."""
        headers = values(self.redis.mget(keys)) if keys else []
        found = [(key, json.loads(header)["chunks"]) for key, header in zip(keys, headers) if header is not None]
        if found:
            self.redis.unlink(*[name for key, n in found for name in (key, *(f"{key}:{i}" for i in range(n)))])

    def touch(self, key: str, ttl: int) -> None:
        header = self.redis.get(key)
        if header is not None:
            with self.redis.pipeline(transaction=False) as pipe:
                for index in range(json.loads(header)["chunks"]):
                    pipe.expire(f"{key}:{index}", ttl)
                pipe.expire(key, ttl)
                pipe.execute()

    def delete_matching(self, pattern: str) -> None:
        """Delete the blobs whose keys match the glob ``pattern`` with their chunks (every key matching
        ``{pattern}*``). Scans the keyspace: for caches, not for what must be gone at once."""
        for key in self.redis.scan_iter(match=pattern + "*", count=1000):
            self.redis.unlink(key)

    def increment(self, key: str) -> int:
        """Add one to the counter (a plain integer, not a blob) under ``key``; its new value (1 the first time)."""
        return int(self.redis.incr(key))

    def put_json(self, key: str, value, ttl: int | None = None) -> None:
        self.put(key, json.dumps(value, separators=(",", ":")).encode(), ttl)

    def get_json(self, key: str):
        data = self.get(key)
        return None if data is None else json.loads(data)

    def put_document(self, key: str, document: BaseModel, ttl: int | None = None) -> None:
        """Store ``document`` where it reads back as its model (``get_document`` with the same model); else
        DocumentUnwritable, and nothing is stored."""
        # a document's computed fields are for its readers (derived on every read), not stored
        data = document.model_dump_json(exclude_computed_fields=True).encode()
        try:
            _adapter(type(document)).validate_json(data)
        except ValidationError as error:
            raise DocumentUnwritable(f"{type(document).__name__} would not read back: {brief(error)}") from error
        self.put(key, data, ttl)

    def get_document(self, key: str, model):
        """The document under ``key`` read as ``model`` (a pydantic model or any type pydantic reads), or None;
        DocumentUnreadable where it is stored but does not read as ``model``."""
        try:
            data = self.get(key)
            return None if data is None else _adapter(model).validate_json(data)
        except (ValueError, TypeError, KeyError, zstandard.ZstdError) as error:  # ValidationError, JSONDecodeError too
            raise DocumentUnreadable(key, model, error) from error

    def index(self, index_key: str, member: str, created_at: float) -> None:
        self.redis.zadd(index_key, {member: created_at})

    def unindex(self, index_key: str, member: str) -> None:
        self.redis.zrem(index_key, member)

    def indexed(self, index_key: str, member: str) -> bool:
        return self.redis.zscore(index_key, member) is not None

    def newest_documents(self, index_key: str, key_of, model, limit: int) -> list:
        """The documents indexed (by creation time) in a sorted set, newest first; one that cannot be read is left
        out (logged, and counted in UNREADABLE)."""
        documents = []
        for member in members(self.redis.zrevrange(index_key, 0, limit - 1)):
            try:
                document = self.get_document(key_of(member), model)
            except DocumentUnreadable as error:
                log.warning("left out of a listing: %s", error)
                continue
            if document is not None:
                documents.append(document)
        return documents

    def put_arrays(self, key: str, ttl: int | None = None, **arrays: np.ndarray) -> None:
        buffer = io.BytesIO()
        np.savez(buffer, allow_pickle=False, **arrays)  # as get_arrays reads them: no pickled object arrays
        self.put(key, buffer.getbuffer(), ttl)  # a view: no second copy of the arrays

    def get_arrays(self, key: str) -> dict[str, np.ndarray] | None:
        data = self.get(key)
        if data is None:
            return None
        with np.load(io.BytesIO(data), allow_pickle=False) as archive:
            return {name: archive[name] for name in archive.files}
