"""Which workers are alive, from their own heartbeats (RQ keeps a dead worker registered for minutes).

Each `fire-rules worker` beats every ``heartbeat_seconds`` while it compiles the solver ("warming") and while it
serves its queues ("ready"); a worker is alive while its last beat is younger than ``heartbeat_ttl_seconds``.
"""

import json
import os
import socket
import time

from pydantic import BaseModel
from redis import Redis

from app.core.config import Settings
from app.core.keys import Keys
from app.core.replies import members

WARMING, READY = "warming", "ready"
FORGET_AFTER_TTLS = 10  # beats older than this many TTLs are dropped from the registry


class WorkerPresence(BaseModel):
    name: str
    state: str
    queues: list[str]
    pid: int
    host: str
    started_at: float
    last_beat: float


class WorkerRegistry:
    def __init__(self, settings: Settings, redis: Redis):
        self.settings = settings
        self.redis = redis
        self.keys = Keys.from_settings(settings)

    def beat(self, name: str, state: str, queues: list[str], started_at: float) -> None:
        beat_at = time.time()
        presence = WorkerPresence(
            name=name,
            state=state,
            queues=queues,
            pid=os.getpid(),
            host=socket.gethostname(),
            started_at=started_at,
            last_beat=beat_at,
        )
        with self.redis.pipeline(transaction=False) as pipe:
            pipe.zadd(self.keys.worker_beats, {name: beat_at})
            pipe.hset(self.keys.worker_states, name, presence.model_dump_json())
            forgotten = beat_at - FORGET_AFTER_TTLS * self.settings.heartbeat_ttl_seconds
            pipe.zremrangebyscore(self.keys.worker_beats, "-inf", forgotten)
            pipe.execute()

    def remove(self, name: str) -> None:
        with self.redis.pipeline(transaction=False) as pipe:
            pipe.zrem(self.keys.worker_beats, name)
            pipe.hdel(self.keys.worker_states, name)
            pipe.execute()

    def alive_names(self) -> set[str]:
        """The names of every worker whose last beat is within the heartbeat TTL."""
        since = time.time() - self.settings.heartbeat_ttl_seconds
        return set(members(self.redis.zrangebyscore(self.keys.worker_beats, since, "+inf")))

    def alive(self, queue: str) -> list[WorkerPresence]:
        """Workers of ``queue`` whose last beat is within the heartbeat TTL."""
        since = time.time() - self.settings.heartbeat_ttl_seconds
        names = members(self.redis.zrangebyscore(self.keys.worker_beats, since, "+inf"))
        states = self.redis.hmget(self.keys.worker_states, names) if names else []
        workers = [WorkerPresence(**json.loads(raw)) for raw in states if raw is not None]
        return [worker for worker in workers if queue in worker.queues]
