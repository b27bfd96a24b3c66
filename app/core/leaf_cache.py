"""The leaf-index matrix of (forest, dataset), cached in Redis: delta + zstd compressed, chunked, with a TTL;
hits and misses counted in the durable Redis for the metrics.

The matrix is stored tree-major (T, n) with each tree's row delta-encoded, which turns runs of equal
leaf indices into zeros that zstd compresses to almost nothing.
"""
import time

import numpy as np
from redis import Redis

from app.core.blobs import BlobStore
from solver import TreeEnsemble, leaf_matrix

HIT, MISS = "cache_hits", "cache_misses"


def encode_leaves(leaves: np.ndarray) -> np.ndarray:
    tree_major = np.ascontiguousarray(leaves.T)
    deltas = np.empty_like(tree_major)
    deltas[:, 0] = tree_major[:, 0]
    np.subtract(tree_major[:, 1:], tree_major[:, :-1], out=deltas[:, 1:])  # unsigned: wraps, cumsum undoes it
    return deltas


def decode_leaves(deltas: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.cumsum(deltas, axis=1, dtype=deltas.dtype).T)


class LeafMatrixCache:
    def __init__(self, blobs: BlobStore, stats: Redis, key_prefix: str, ttl_seconds: int):
        self.blobs = blobs
        self.stats = stats
        self.key_prefix = key_prefix
        self.ttl_seconds = ttl_seconds
        self.stats_key = f"{key_prefix}stats"

    def key(self, forest_id: str, dataset_id: str) -> str:
        return f"{self.key_prefix}leafcache:{forest_id}:{dataset_id}"

    def leaves(self, forest: TreeEnsemble, forest_id: str, dataset_id: str,
               X: np.ndarray) -> tuple[np.ndarray, bool, float]:
        """(leaf indices (n, T) of every row of X, cache hit, seconds spent)."""
        started = time.perf_counter()
        key = self.key(forest_id, dataset_id)
        cached = self.blobs.get_arrays(key)
        hit = cached is not None and cached["deltas"].shape == (forest.n_trees, X.shape[0])
        self.stats.hincrby(self.stats_key, HIT if hit else MISS)
        if hit:
            self.blobs.touch(key, self.ttl_seconds)
            return decode_leaves(cached["deltas"]), True, time.perf_counter() - started
        leaves = leaf_matrix(forest, X).leaves
        self.blobs.put_arrays(key, ttl=self.ttl_seconds, deltas=encode_leaves(leaves))
        return leaves, False, time.perf_counter() - started

    def counts(self) -> dict[str, int]:
        """Lookups so far by every process: {"hit": n, "miss": m}."""
        stats = self.stats.hgetall(self.stats_key)
        return {"hit": int(stats.get(HIT.encode(), 0)), "miss": int(stats.get(MISS.encode(), 0))}
