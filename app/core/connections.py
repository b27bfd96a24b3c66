"""Redis connections: the durable store (artifacts, job records, RQ) and the matrix cache, each with timeouts on
every call; and what this process knows about the durable Redis being down.

Two retry policies: the API fails a call at once (one reconnect for a stale pooled connection, none on a
timeout), so that a client gets a 503 instead of a hung request; workers retry with backoff for up to
``redis_outage_seconds``, so that a running job rides out a Redis restart.
"""

import threading
import time
from functools import lru_cache

from redis import Redis
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry

from app.core.config import Settings
from app.core.errors import FieldFault, Unavailable

# BusyLoadingError (Redis still reading its AOF after a restart) is a ConnectionError too
REDIS_FAILURES = (RedisConnectionError, RedisTimeoutError)
BACKOFF_BASE_SECONDS, BACKOFF_CAP_SECONDS = 0.1, 2.0
OUTAGE_RETRY_AFTER_SECONDS = 1


def retries_within(seconds: float) -> int:
    """How many retries of ExponentialBackoff(BACKOFF_CAP_SECONDS, BACKOFF_BASE_SECONDS) fit in ``seconds``."""
    backoff, spent, retries = ExponentialBackoff(BACKOFF_CAP_SECONDS, BACKOFF_BASE_SECONDS), 0.0, 0
    while spent < seconds:
        retries += 1
        spent += backoff.compute(retries)
    return retries


@lru_cache(maxsize=16)
def connect(url: str, socket_timeout: float, connect_timeout: float, patience: float = 0.0) -> Redis:
    """A client whose every call times out; with ``patience``, connection failures and timeouts are retried
    with backoff for about that many seconds, without it only a broken connection is retried, once."""
    if patience > 0:
        retry = Retry(
            ExponentialBackoff(BACKOFF_CAP_SECONDS, BACKOFF_BASE_SECONDS),
            retries_within(patience),
            supported_errors=REDIS_FAILURES,
        )
    else:
        retry = Retry(
            ExponentialBackoff(BACKOFF_CAP_SECONDS, BACKOFF_BASE_SECONDS), 1, supported_errors=(RedisConnectionError,)
        )
    return Redis.from_url(
        url,
        socket_timeout=socket_timeout,
        socket_connect_timeout=connect_timeout,
        retry=retry,
        health_check_interval=30,
        socket_keepalive=True,
    )


def _require_url(settings: Settings) -> str:
    if settings.redis_url is None:
        raise RuntimeError(
            "FIRE_REDIS_URL is not set: start the service with `fire-rules serve`, "
            "which runs an embedded Redis, or point it at a Redis"
        )
    return settings.redis_url


def data_redis(settings: Settings, patience: float = 0.0) -> Redis:
    return connect(_require_url(settings), settings.redis_socket_timeout, settings.redis_connect_timeout, patience)


def cache_redis(settings: Settings) -> Redis:
    """The leaf-matrix cache: short timeouts and no retries, since a job can always build the matrix itself."""
    timeout = settings.cache_timeout_seconds
    return Redis.from_url(
        settings.cache_redis_url or _require_url(settings),
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(ExponentialBackoff(), 0),
        health_check_interval=30,
    )


class RedisHealth:
    """Whether this process last found the durable Redis down. While it is, requests are refused at once with
    :class:`Unavailable` (no call waits for a timeout), and :meth:`probe` looks for its return."""

    def __init__(self, redis: Redis):
        self.redis = redis
        self._down_since: float | None = None
        self._lock = threading.Lock()

    @property
    def down(self) -> bool:
        return self._down_since is not None

    def mark_down(self) -> None:
        with self._lock:
            if self._down_since is None:
                self._down_since = time.monotonic()

    def check(self) -> None:
        down_since = self._down_since  # read once: the maintenance thread's probe may clear it meanwhile
        if down_since is not None:
            raise unavailable(f"down for {time.monotonic() - down_since:.0f} s")

    def probe(self) -> bool:
        """Ping Redis; True (and up again) when it answers."""
        try:
            self.redis.ping()
        except REDIS_FAILURES:
            self.mark_down()
            return False
        with self._lock:
            self._down_since = None
        return True


def unavailable(reason: str) -> Unavailable:
    return Unavailable(
        f"The service's Redis is unreachable ({reason}); nothing stored is lost. Retry shortly.",
        [FieldFault("redis", "unreachable", "retry after the Retry-After seconds")],
        retry_after=OUTAGE_RETRY_AFTER_SECONDS,
    )
