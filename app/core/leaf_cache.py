"""The leaf-index matrix of (forest, dataset), cached in Redis: delta + zstd compressed, chunked, with a TTL;
hits and misses counted in the durable Redis for the metrics.

The cache is optional: when its Redis fails (down, frozen, evicting), a job builds the matrix itself, and the
cache is left alone for ``backoff_seconds`` so that later jobs do not each wait for its timeout.

The matrix is stored tree-major (T, n) with each tree's row delta-encoded, which turns runs of equal
leaf indices into zeros that zstd compresses to almost nothing.
"""

import logging
import time

import numpy as np
from redis import Redis

from app.core.blobs import BlobStore
from app.core.config import Settings
from app.core.connections import REDIS_FAILURES
from app.core.keys import Keys
from solver import TreeEnsemble, leaf_matrix

HIT, MISS, FAILED = "cache_hits", "cache_misses", "cache_failures"
log = logging.getLogger(__name__)


def encode_leaves(leaves: np.ndarray) -> np.ndarray:
    tree_major = np.ascontiguousarray(leaves.T)
    deltas = np.empty_like(tree_major)
    deltas[:, 0] = tree_major[:, 0]
    np.subtract(tree_major[:, 1:], tree_major[:, :-1], out=deltas[:, 1:])  # unsigned: wraps, cumsum undoes it
    return deltas


def decode_leaves(deltas: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.cumsum(deltas, axis=1, dtype=deltas.dtype).T)


class LeafMatrixCache:
    def __init__(self, settings: Settings, blobs: BlobStore, stats: Redis):
        """``blobs``: on the cache Redis; ``stats``: the durable Redis, which keeps the counts."""
        self.blobs = blobs
        self.stats = stats
        self.keys = Keys.from_settings(settings)
        self.ttl_seconds = settings.cache_ttl_seconds
        self.backoff_seconds = settings.cache_backoff_seconds
        self._skip_until = 0.0

    def leaves(
        self, forest: TreeEnsemble, forest_id: str, dataset_id: str, X: np.ndarray
    ) -> tuple[np.ndarray, bool, float]:
        """(leaf indices (n, T) of every row of X, cache hit, seconds spent)."""
        started = time.perf_counter()
        key = self.keys.leaf_cache(forest_id, dataset_id)
        cached = self._cached(key)
        deltas = None if cached is None else cached["deltas"]
        if deltas is not None and deltas.shape != (forest.n_trees, X.shape[0]):
            deltas = None  # not this forest's matrix of these rows: no hit
        self.stats.hincrby(self.keys.stats, MISS if deltas is None else HIT)
        if deltas is not None:
            return decode_leaves(deltas), True, time.perf_counter() - started
        leaves = leaf_matrix(forest, X).leaves
        self._store(key, leaves)
        return leaves, False, time.perf_counter() - started

    def _cached(self, key: str) -> dict[str, np.ndarray] | None:
        if time.monotonic() < self._skip_until:
            return None
        try:
            cached = self.blobs.get_arrays(key)
            if cached is not None:
                self.blobs.touch(key, self.ttl_seconds)
            return cached
        except REDIS_FAILURES as error:
            self._failed(error)
            return None

    def _store(self, key: str, leaves: np.ndarray) -> None:
        if time.monotonic() < self._skip_until:
            return
        try:
            self.blobs.put_arrays(key, ttl=self.ttl_seconds, deltas=encode_leaves(leaves))
        except REDIS_FAILURES as error:
            self._failed(error)

    def _failed(self, error: Exception) -> None:
        log.warning(
            "leaf-matrix cache unreachable (%s): jobs build their matrix for the next %.0f s",
            error,
            self.backoff_seconds,
        )
        self._skip_until = time.monotonic() + self.backoff_seconds
        self.stats.hincrby(self.keys.stats, FAILED)

    def forget(self, *, forest_id: str | None = None, dataset_id: str | None = None) -> None:
        """Drop the cached matrices of a deleted forest or dataset (best effort: the cache may be down)."""
        pattern = self.keys.leaf_caches(forest_id=forest_id, dataset_id=dataset_id)
        try:
            self.blobs.delete_matching(pattern)
        except REDIS_FAILURES as error:
            log.warning("leaf-matrix cache unreachable (%s): matrices of %s expire with their TTL", error, pattern)

    def counts(self) -> dict[str, int]:
        """Lookups so far by every process: {"hit": n, "miss": m}."""
        stats = self.stats.hgetall(self.keys.stats)
        return {
            "hit": int(stats.get(HIT.encode(), 0)),
            "miss": int(stats.get(MISS.encode(), 0)),
            "failure": int(stats.get(FAILED.encode(), 0)),
        }
