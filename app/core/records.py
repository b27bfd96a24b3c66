"""Job records: one Redis hash per job, every field JSON-encoded, changed by guarded transitions.

A transition applies only while the job is in one of the allowed statuses (and, for a worker,
still on the attempt it runs), so a canceled job or a retried attempt is never overwritten by a
worker that learns about it late. A record is read and written as :class:`JobRecord`.
"""
import json
import time

from pydantic_core import to_jsonable_python
from redis import Redis

from app.core.config import Settings
from app.core.job_documents import TERMINAL, JobRecord
from app.core.tenants import DEFAULT_TENANT, tenant_scope

ADMISSION_GRACE_SECONDS = 60  # an admitted job's record is written right after; until then it is not pruned
_TRANSITION = """
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return 0 end
local n_allowed = tonumber(ARGV[1])
local allowed = false
for i = 2, n_allowed + 1 do
  if ARGV[i] == status then allowed = true end
end
if not allowed then return 0 end
local attempt = ARGV[n_allowed + 2]
if attempt ~= '' and redis.call('HGET', KEYS[1], 'attempt') ~= attempt then return 0 end
local fields = {}
for i = n_allowed + 3, #ARGV do fields[#fields + 1] = ARGV[i] end
if #fields > 0 then redis.call('HSET', KEYS[1], unpack(fields)) end
return 1
"""


def _encode(value) -> str:
    return json.dumps(to_jsonable_python(value), separators=(",", ":"))


def _decode(raw: dict[bytes, bytes]) -> JobRecord | None:
    return JobRecord.model_validate({k.decode(): json.loads(v) for k, v in raw.items()}) if raw else None


class JobRecords:
    def __init__(self, settings: Settings, redis: Redis):
        self.settings = settings
        self.redis = redis
        self.prefix = settings.key_prefix
        self.index_key = f"{self.prefix}jobs"  # every tenant's jobs: the metrics' view
        self.unfinished_key = f"{self.prefix}unfinished-jobs"  # every queued or running job: the watchdog's view
        self._transition = redis.register_script(_TRANSITION)

    def tenant_index_key(self, tenant: str) -> str:
        """The tenant's jobs (the default tenant's are read from the index of every job, filtered)."""
        return f"{tenant_scope(self.prefix, tenant)}jobs"

    def active_key(self, tenant: str) -> str:
        return f"{tenant_scope(self.prefix, tenant)}active-jobs"

    def key(self, job_id: str) -> str:
        return f"{self.prefix}job:{job_id}"

    def heartbeat_key(self, job_id: str) -> str:
        return f"{self.prefix}job:{job_id}:heartbeat"

    def cancel_key(self, job_id: str) -> str:
        return f"{self.prefix}job:{job_id}:cancel"

    def create(self, record: JobRecord) -> None:
        with self.redis.pipeline(transaction=True) as pipe:
            pipe.hset(self.key(record.id), mapping={k: _encode(v) for k, v in record.model_dump(mode="json").items()})
            pipe.expire(self.key(record.id), self.settings.result_ttl_seconds)
            pipe.zadd(self.index_key, {record.id: record.created_at})
            pipe.zadd(self.unfinished_key, {record.id: record.created_at})
            if record.tenant != DEFAULT_TENANT:
                pipe.zadd(self.tenant_index_key(record.tenant), {record.id: record.created_at})
            pipe.execute()

    def get(self, job_id: str) -> JobRecord | None:
        return _decode(self.redis.hgetall(self.key(job_id)))

    def get_many(self, job_ids: list[str]) -> list[JobRecord | None]:
        with self.redis.pipeline(transaction=False) as pipe:
            for job_id in job_ids:
                pipe.hgetall(self.key(job_id))
            raws = pipe.execute()
        return [_decode(raw) for raw in raws]

    def recent_ids(self, limit: int = 100) -> list[str]:
        return [i.decode() for i in self.redis.zrevrange(self.index_key, 0, limit - 1)]

    def recent(self, tenant: str, limit: int = 100, scanned: int = 1000) -> list[JobRecord]:
        """The tenant's newest jobs (among the ``scanned`` newest of its index)."""
        ids = [i.decode() for i in self.redis.zrevrange(self.tenant_index_key(tenant), 0, scanned - 1)]
        return [record for record in self.get_many(ids) if record is not None and record.tenant == tenant][:limit]

    def admit(self, tenant: str, job_id: str, limit: int) -> bool:
        """Count ``job_id`` among the tenant's active submissions unless that makes more than ``limit``.
        Submissions that finished (or vanished) are pruned first; two admissions racing for the last place
        may both be refused, never both admitted."""
        key = self.active_key(tenant)
        members = self.redis.zrange(key, 0, -1, withscores=True)
        with self.redis.pipeline(transaction=False) as pipe:
            for member, _ in members:
                pipe.hget(self.key(member.decode()), "status")
            statuses = pipe.execute()
        young = now() - ADMISSION_GRACE_SECONDS
        finished = [member for (member, admitted), status in zip(members, statuses)
                    if (status is None and admitted < young) or (status is not None and json.loads(status) in TERMINAL)]
        with self.redis.pipeline(transaction=True) as pipe:
            if finished:
                pipe.zrem(key, *finished)
            pipe.zadd(key, {job_id: now()})
            pipe.zcard(key)
            count = pipe.execute()[-1]
        if count > limit:
            self.redis.zrem(key, job_id)
            return False
        return True

    def active(self, tenant: str) -> list[JobRecord]:
        """The tenant's admitted submissions (a grid stands for its cells), as far as they still exist."""
        ids = [member.decode() for member in self.redis.zrange(self.active_key(tenant), 0, -1)]
        return [record for record in self.get_many(ids) if record is not None]

    def delete(self, record: JobRecord) -> None:
        self.redis.unlink(self.key(record.id), self.heartbeat_key(record.id), self.cancel_key(record.id))
        with self.redis.pipeline(transaction=False) as pipe:
            for index in {self.index_key, self.unfinished_key, self.tenant_index_key(record.tenant),
                          self.active_key(record.tenant)}:
                pipe.zrem(index, record.id)
            pipe.execute()

    def transition(self, job_id: str, allowed: tuple[str, ...], on_attempt: int | None = None, **fields) -> bool:
        """Set ``fields`` (JobRecord fields) if the job is in an ``allowed`` status (and on ``on_attempt``)."""
        unknown = set(fields) - set(JobRecord.model_fields)
        if unknown:
            raise TypeError(f"not job record fields: {sorted(unknown)}")
        args = [len(allowed), *(_encode(s) for s in allowed), "" if on_attempt is None else _encode(on_attempt)]
        for name, value in fields.items():
            args += [name, _encode(value)]
        applied = bool(self._transition(keys=[self.key(job_id)], args=args))
        if applied and fields.get("status") in TERMINAL:
            self.redis.zrem(self.unfinished_key, job_id)  # a stale entry is pruned by the watchdog anyway
        return applied

    def unfinished(self) -> list[JobRecord]:
        """Every job not known to have finished; entries of finished or vanished jobs are pruned."""
        ids = [member.decode() for member in self.redis.zrange(self.unfinished_key, 0, -1)]
        records = self.get_many(ids)
        finished = [job_id for job_id, record in zip(ids, records) if record is None or record.status in TERMINAL]
        if finished:
            self.redis.zrem(self.unfinished_key, *finished)
        return [record for record in records if record is not None and record.status not in TERMINAL]

    def beat(self, job_id: str, attempt: int) -> None:
        self.redis.set(self.heartbeat_key(job_id), attempt, px=int(self.settings.heartbeat_ttl_seconds * 1000))

    def heartbeat_alive(self, job_id: str) -> bool:
        return bool(self.redis.exists(self.heartbeat_key(job_id)))

    def request_cancel(self, job_id: str) -> None:
        self.redis.set(self.cancel_key(job_id), 1, ex=self.settings.result_ttl_seconds)

    def cancel_requested(self, job_id: str) -> bool:
        return bool(self.redis.exists(self.cancel_key(job_id)))


def now() -> float:
    return time.time()
