"""Redis connections: the durable store (artifacts, job records, RQ) and the matrix cache."""
from functools import lru_cache

from redis import Redis

from app.core.config import Settings


@lru_cache(maxsize=8)
def _connect(url: str) -> Redis:
    return Redis.from_url(url, health_check_interval=30, socket_keepalive=True)


def data_redis(settings: Settings) -> Redis:
    if settings.redis_url is None:
        raise RuntimeError("FIRE_REDIS_URL is not set: start the service with `fire-rules serve`, "
                           "which runs an embedded Redis, or point it at a Redis")
    return _connect(settings.redis_url)


def cache_redis(settings: Settings) -> Redis:
    return _connect(settings.cache_redis_url) if settings.cache_redis_url else data_redis(settings)
