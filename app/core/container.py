"""Wires the core's stores and services for one process (the API or a worker) from the settings."""

from dataclasses import dataclass

from redis import Redis

from app.core.batch.scoring import BatchScoring
from app.core.blobs import BlobStore
from app.core.config import Settings
from app.core.connections import RedisHealth, cache_redis, data_redis
from app.core.datasets import DatasetStore
from app.core.deletion import Deletion
from app.core.drift_store import DriftStore
from app.core.forests import ForestStore
from app.core.idempotency import IdempotencyKeys
from app.core.job_lifecycle import JobLifecycle
from app.core.job_results import JobResults
from app.core.job_submission import JobSubmission
from app.core.keys import Keys
from app.core.leaf_cache import LeafMatrixCache
from app.core.models import ModelStore
from app.core.monitoring import FiringMonitor, ModelMonitoring
from app.core.records import JobRecords
from app.core.registry import ModelRegistry
from app.core.results import ResultStore
from app.core.tenants import TenantKeys
from app.core.workers import WorkerRegistry


@dataclass
class Core:
    settings: Settings
    redis: Redis
    redis_health: RedisHealth
    tenant_keys: TenantKeys
    blobs: BlobStore
    datasets: DatasetStore
    forests: ForestStore
    records: JobRecords
    results: ResultStore
    idempotency: IdempotencyKeys
    job_submission: JobSubmission
    jobs: JobLifecycle
    job_results: JobResults
    models: ModelStore
    leaf_cache: LeafMatrixCache
    deletion: Deletion
    workers: WorkerRegistry
    batches: BatchScoring
    monitor: FiringMonitor
    monitoring: ModelMonitoring


def build_core(settings: Settings, redis: Redis | None = None, *, redis_patience: float = 0.0) -> Core:
    """The core on the settings' Redis servers, or on ``redis`` alone (for the cache too) where given.
    ``redis_patience``: seconds a failed Redis call is retried (workers) instead of failing at once (the API)."""
    cache = redis or cache_redis(settings)
    redis = redis or data_redis(settings, redis_patience)
    blobs = BlobStore(redis, settings.chunk_bytes)
    datasets = DatasetStore(settings, blobs)
    forests = ForestStore(settings, blobs)
    records = JobRecords(settings, redis)
    results = ResultStore(settings, blobs)
    idempotency = IdempotencyKeys(settings, redis)
    jobs = JobLifecycle(settings, redis, records, results)
    job_submission = JobSubmission(settings, datasets, forests, records, jobs, idempotency)
    job_results = JobResults(jobs, results)
    registry = ModelRegistry(redis, Keys.from_settings(settings))
    drift = DriftStore(settings, redis, blobs)
    models = ModelStore(settings, blobs, datasets, job_results, idempotency, registry, drift)
    leaf_cache = LeafMatrixCache(settings, BlobStore(cache, settings.chunk_bytes), redis)
    return Core(
        settings=settings,
        redis=redis,
        redis_health=RedisHealth(redis),
        tenant_keys=TenantKeys.from_settings(settings),
        blobs=blobs,
        datasets=datasets,
        forests=forests,
        records=records,
        results=results,
        idempotency=idempotency,
        job_submission=job_submission,
        jobs=jobs,
        job_results=job_results,
        models=models,
        leaf_cache=leaf_cache,
        deletion=Deletion(datasets, forests, jobs, models, leaf_cache),
        workers=WorkerRegistry(settings, redis),
        batches=BatchScoring(settings, redis, blobs, models, datasets, records, jobs, job_submission),
        monitor=FiringMonitor(settings, drift, models.profile),
        monitoring=ModelMonitoring(settings, models, drift),
    )
