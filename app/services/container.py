"""Wires the stores and services for one process (API or worker) from the settings."""
from dataclasses import dataclass

from redis import Redis

from app.core.config import Settings
from app.services.blobs import BlobStore
from app.services.datasets import DatasetStore
from app.services.forests import ForestStore
from app.services.job_records import JobRecords
from app.services.jobs import JobService
from app.services.models import ModelStore
from app.services.redis_conn import cache_redis, data_redis


@dataclass
class Services:
    settings: Settings
    redis: Redis
    blobs: BlobStore
    cache_blobs: BlobStore
    datasets: DatasetStore
    forests: ForestStore
    records: JobRecords
    jobs: JobService
    models: ModelStore


def build_services(settings: Settings) -> Services:
    redis = data_redis(settings)
    blobs = BlobStore(redis, settings.chunk_bytes)
    datasets = DatasetStore(settings, blobs)
    forests = ForestStore(settings, blobs)
    records = JobRecords(settings, redis)
    jobs = JobService(settings, redis, blobs, datasets, forests, records)
    return Services(settings=settings, redis=redis, blobs=blobs,
                    cache_blobs=BlobStore(cache_redis(settings), settings.chunk_bytes),
                    datasets=datasets, forests=forests, records=records, jobs=jobs,
                    models=ModelStore(settings, blobs, datasets, jobs))
