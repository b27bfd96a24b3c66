"""Wires the core's stores and services for one process (the API or a worker) from the settings."""
from dataclasses import dataclass

from redis import Redis

from app.core.blobs import BlobStore
from app.core.config import Settings
from app.core.connections import cache_redis, data_redis
from app.core.datasets import DatasetStore
from app.core.forests import ForestStore
from app.core.jobs import JobService
from app.core.leaf_cache import LeafMatrixCache
from app.core.models import ModelStore
from app.core.records import JobRecords
from app.core.results import ResultStore


@dataclass
class Core:
    settings: Settings
    redis: Redis
    blobs: BlobStore
    datasets: DatasetStore
    forests: ForestStore
    records: JobRecords
    results: ResultStore
    jobs: JobService
    models: ModelStore
    leaf_cache: LeafMatrixCache


def build_core(settings: Settings, redis: Redis | None = None) -> Core:
    """The core on the settings' Redis servers, or on ``redis`` alone (for the cache too) where given."""
    cache = redis or cache_redis(settings)
    redis = redis or data_redis(settings)
    blobs = BlobStore(redis, settings.chunk_bytes)
    datasets = DatasetStore(settings, blobs)
    forests = ForestStore(settings, blobs)
    records = JobRecords(settings, redis)
    results = ResultStore(settings, blobs)
    jobs = JobService(settings, redis, datasets, forests, records, results)
    leaf_cache = LeafMatrixCache(BlobStore(cache, settings.chunk_bytes), redis, settings.key_prefix,
                                 settings.cache_ttl_seconds)
    return Core(settings=settings, redis=redis, blobs=blobs, datasets=datasets, forests=forests, records=records,
                results=results, jobs=jobs, models=ModelStore(settings, blobs, datasets, jobs), leaf_cache=leaf_cache)
