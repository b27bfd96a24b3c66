"""Job records: one Redis hash per job, every field JSON-encoded, read and written as :class:`JobRecord`, and
moved from status to status by the named transitions below, the only writes after ``create``.

The life of a job, and who moves it along each edge::

    create ──► queued ──claim──► running ──succeed──► succeeded
    (API)       ▲ │  (worker,     │ │ │
                │ │  attempt n)   │ │ └──fail──────────────────► failed
                │ │               │ │    (worker: an error, or past FIRE_JOB_TIMEOUT)
                │ │               │ └──continue_later──► queued, same attempt (a grid parent whose cells
                │ │               │                      are unfinished: re-queued behind them)
                │ └──retry_lost / fail_lost (watchdog: the queued run vanished from RQ, or RQ ended it)
                └─────retry_lost (watchdog: the heartbeat of attempt n stopped) ──► queued, attempt n + 1;
                      fail_lost once FIRE_MAX_JOB_ATTEMPTS attempts were lost ──► failed

    queued or running ──cancel──► canceled  (the API, whatever the attempt; or the worker of the attempt
                                             when it sees the cancel flag the API set)

================  =====================  ========================  ===============================================
transition        from                   by                        sets
================  =====================  ========================  ===============================================
``claim``         queued, attempt n      worker of attempt n       running, started_at, timings, phase starting;
                                                                   starts the heartbeat
``report_progress``  running, attempt n  worker of attempt n       progress (and timings)
``succeed``       running, attempt n     worker of attempt n       succeeded, finished_at, summary, cache_hit,
                                                                   timings, progress
``fail``          running, attempt n     worker of attempt n       failed, finished_at, error, timings
``report_cells``  queued (a parent)      worker of one of its      progress: its cells still unfinished (only
                                         cells, once it ended      ever fewer: cells ending at once race)
``continue_later``  running, attempt n   worker of a grid parent   queued, queued_at, continuation + 1, its RQ id,
                  (queued, attempt n)    (the API's watchdog:      phase "waiting for cells"
                                         a cell attempt was lost)
``retry_lost``    queued or running,     the API's watchdog        queued, attempt n + 1, its RQ id, queued_at,
                  attempt n                                        no started_at, history + the lost attempt
``fail_lost``     queued or running,     the API's watchdog        failed, finished_at, error worker_lost,
                  attempt n                                        history + the lost attempt
``cancel``        queued or running      the API (any attempt);    canceled, finished_at, progress (and timings)
                                         worker of attempt n
================  =====================  ========================  ===============================================

Each is one guarded write (a Lua script): it applies only while the job is in one of its ``from`` statuses and,
where an attempt is given, still on that attempt, so a canceled job or a retried attempt is never overwritten
by a worker that learns about it late. Each returns whether it applied. Succeeded, failed and canceled are
final: no transition leaves them.
"""

import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import ValidationError
from pydantic_core import to_jsonable_python
from redis import Redis

from app.core.blobs import UNREADABLE, DocumentUnwritable, brief
from app.core.config import Settings
from app.core.errors import FieldFault, Unreadable
from app.core.job_documents import (
    ACTIVE,
    CANCELED,
    FAILED,
    QUEUED,
    RUNNING,
    SUCCEEDED,
    TERMINAL,
    JobError,
    JobRecord,
    LostAttempt,
    Progress,
)
from app.core.keys import Keys
from app.core.queues import rq_job_id
from app.core.replies import members, scored_members, text
from app.core.tenants import DEFAULT_TENANT

log = logging.getLogger(__name__)

ADMISSION_GRACE_SECONDS = 60  # an admitted job's record is written right after; until then it is not pruned
_GUARDED_WRITE = """
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

# report_cells: the parent's progress, where it is queued and the count of unfinished cells it holds (none at first)
# is larger than the new one
_CELLS_WRITE = """
if redis.call('HGET', KEYS[1], 'status') ~= ARGV[1] then return 0 end
local progress = redis.call('HGET', KEYS[1], 'progress')
if progress then
  local held = cjson.decode(progress)['unfinished']
  if type(held) == 'number' and held <= tonumber(ARGV[2]) then return 0 end
end
redis.call('HSET', KEYS[1], 'progress', ARGV[3])
return 1
"""


# The tenant's active work units (KEYS[1] its admitted submissions, sorted set by admission time; KEYS[2] their units,
# hash): units of submissions no longer admitted are dropped, and a submission admitted before units were counted
# counts one.
_HELD = """
local function held()
  local units = 0
  for _, job in ipairs(redis.call('HKEYS', KEYS[2])) do
    if redis.call('ZSCORE', KEYS[1], job) then
      units = units + tonumber(redis.call('HGET', KEYS[2], job))
    else
      redis.call('HDEL', KEYS[2], job)
    end
  end
  return units + redis.call('ZCARD', KEYS[1]) - redis.call('HLEN', KEYS[2])
end
"""

# admit: ARGV the job, its units, now, the limits of submissions and of units, then admitted submissions that
# finished. Prunes those, then admits the job unless a limit would be passed. Returns {admitted 0/1, submissions,
# units} as they were before the job.
_ADMIT = (
    _HELD
    + """
for i = 6, #ARGV do
  redis.call('ZREM', KEYS[1], ARGV[i])
  redis.call('HDEL', KEYS[2], ARGV[i])
end
local jobs = redis.call('ZCARD', KEYS[1])
local units = held()
if jobs + 1 > tonumber(ARGV[4]) or units + tonumber(ARGV[2]) > tonumber(ARGV[5]) then
  return {0, jobs, units}
end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
return {1, jobs, units}
"""
)

# admit_more: ARGV the job, more units, now, the limit of units. Adds them to the job's (and makes now its admission
# time: a submission still adding is not pruned) unless the tenant's units would pass the limit. Returns {added 0/1,
# the tenant's units, the job's} as they were.
_ADMIT_MORE = (
    _HELD
    + """
local own = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
local units = held()
if units + tonumber(ARGV[2]) > tonumber(ARGV[4]) then return {0, units, own} end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], own + tonumber(ARGV[2]))
return {1, units, own}
"""
)


def _encode(value) -> str:
    # allow_nan=False: a non-finite number, which JSON has no word for (and JobRecord refuses), is never written
    return json.dumps(to_jsonable_python(value), separators=(",", ":"), allow_nan=False)


def _fields(record: JobRecord) -> dict:
    """The record's hash fields, written only where they read back as the record (``_decode``'s model)."""
    fields = {k: _encode(v) for k, v in record.model_dump(mode="json").items()}
    try:
        JobRecord.model_validate({k: json.loads(v) for k, v in fields.items()})
    except ValidationError as error:
        raise DocumentUnwritable(f"the record of job {record.id} would not read back: {brief(error)}") from error
    return fields


def _decode(raw: Mapping[bytes | str, bytes | str], job_id: str = "") -> JobRecord | None:
    """The record of a job's hash (None: no such hash); Unreadable (its tenant where that field reads) where the
    hash does not read as a JobRecord: damaged in Redis, or written before a check its model makes."""
    if not raw:
        return None
    try:
        return JobRecord.model_validate({text(k): json.loads(v) for k, v in raw.items()})
    except ValueError as error:  # a ValidationError, or a field that is not JSON
        raise _unreadable(job_id, raw, error) from error


def _unreadable(job_id: str, raw: Mapping[bytes | str, bytes | str], error: Exception) -> Unreadable:
    UNREADABLE[JobRecord.__name__] += 1
    fields = {text(k): v for k, v in raw.items()}
    try:
        tenant = json.loads(fields["tenant"]) if "tenant" in fields else DEFAULT_TENANT
    except ValueError:
        tenant = None  # whose it is cannot be told: answered to no tenant
    return Unreadable(
        f"The stored record of job {job_id} cannot be read ({brief(error)}).",
        [FieldFault("job_id", f"job {job_id}'s stored record is unreadable", "submit the job again")],
        tenant=tenant if isinstance(tenant, str) else None,
    )


@dataclass(frozen=True)
class Admission:
    """What ``JobRecords.admit`` found: whether the job was admitted, and the tenant's active submissions and work
    units before it."""

    admitted: bool
    jobs: int
    units: int


class JobRecords:
    def __init__(self, settings: Settings, redis: Redis):
        self.settings = settings
        self.redis = redis
        self.keys = Keys.from_settings(settings)
        self._guarded_write = redis.register_script(_GUARDED_WRITE)
        self._cells_write = redis.register_script(_CELLS_WRITE)
        self._admit = redis.register_script(_ADMIT)
        self._admit_more = redis.register_script(_ADMIT_MORE)

    # ---- records and indexes ----------------------------------------------------------------------------------

    def create(self, record: JobRecord) -> None:
        key = self.keys.job(record.id)
        with self.redis.pipeline(transaction=True) as pipe:
            pipe.hset(key, mapping=_fields(record))
            pipe.expire(key, self.settings.result_ttl_seconds)
            pipe.zadd(self.keys.all_jobs, {record.id: record.created_at})
            pipe.zadd(self.keys.unfinished_jobs, {record.id: record.created_at})
            if record.tenant != DEFAULT_TENANT:
                pipe.zadd(self.keys.jobs(record.tenant), {record.id: record.created_at})
            pipe.execute()

    def get(self, job_id: str) -> JobRecord | None:
        """The record (None: not found); Unreadable where it cannot be read."""
        return _decode(self.redis.hgetall(self.keys.job(job_id)), job_id)

    def get_many(self, job_ids: list[str]) -> list[JobRecord | None]:
        """The records (None: not found, or unreadable: logged and counted)."""
        with self.redis.pipeline(transaction=False) as pipe:
            for job_id in job_ids:
                pipe.hgetall(self.keys.job(job_id))
            raws = pipe.execute()
        records: list[JobRecord | None] = []
        for job_id, raw in zip(job_ids, raws):
            try:
                records.append(_decode(raw, job_id))
            except Unreadable as error:
                log.warning("job %s left out: %s", job_id, error.detail)
                records.append(None)
        return records

    def recent_ids(self, limit: int = 100) -> list[str]:
        return members(self.redis.zrevrange(self.keys.all_jobs, 0, limit - 1))

    def recent(self, tenant: str, limit: int = 100, scanned: int = 1000) -> list[JobRecord]:
        """The tenant's newest jobs (among the ``scanned`` newest of its index)."""
        ids = members(self.redis.zrevrange(self.keys.jobs(tenant), 0, scanned - 1))
        return [record for record in self.get_many(ids) if record is not None and record.tenant == tenant][:limit]

    def admit(self, tenant: str, job_id: str, units: int, *, max_jobs: int, max_units: int) -> Admission:
        """Count ``job_id`` (of ``units`` work units) among the tenant's active submissions unless that makes more
        than ``max_jobs`` submissions or ``max_units`` units. Submissions that finished (or vanished) are pruned
        first; the check and the count are one step, so two admissions racing for the last places never pass both."""
        key = self.keys.active_jobs(tenant)
        admitted_ids = scored_members(self.redis.zrange(key, 0, -1, withscores=True))
        with self.redis.pipeline(transaction=False) as pipe:
            for member, _ in admitted_ids:
                pipe.hget(self.keys.job(member), "status")
            statuses = pipe.execute()
        young = now() - ADMISSION_GRACE_SECONDS
        finished = [
            member
            for (member, admitted), status in zip(admitted_ids, statuses)
            if (status is None and admitted < young) or (status is not None and json.loads(status) in TERMINAL)
        ]
        admitted, jobs, held = self._admit(
            keys=[key, self.keys.active_units(tenant)], args=[job_id, units, now(), max_jobs, max_units, *finished]
        )
        return Admission(bool(admitted), jobs, held)

    def admit_more(self, tenant: str, job_id: str, units: int, *, max_units: int) -> tuple[bool, int, int]:
        """Add ``units`` to an admitted submission's (a batch's chunks, as the file is read) unless that makes the
        tenant's more than ``max_units``: whether they were added, the tenant's units and the submission's before."""
        keys = [self.keys.active_jobs(tenant), self.keys.active_units(tenant)]
        added, held, own = self._admit_more(keys=keys, args=[job_id, units, now(), max_units])
        return bool(added), held, own

    def withdraw(self, tenant: str, job_id: str) -> None:
        """``job_id`` is not admitted after all (its submission failed before it was recorded)."""
        with self.redis.pipeline(transaction=True) as pipe:
            pipe.zrem(self.keys.active_jobs(tenant), job_id)
            pipe.hdel(self.keys.active_units(tenant), job_id)
            pipe.execute()

    def active(self, tenant: str) -> list[JobRecord]:
        """The tenant's admitted submissions (a grid stands for its cells), as far as they still exist."""
        ids = members(self.redis.zrange(self.keys.active_jobs(tenant), 0, -1))
        return [record for record in self.get_many(ids) if record is not None]

    def unfinished(self) -> list[JobRecord]:
        """Every job not known to have finished; entries of finished or vanished jobs are pruned."""
        ids = members(self.redis.zrange(self.keys.unfinished_jobs, 0, -1))
        records = self.get_many(ids)
        finished = [job_id for job_id, record in zip(ids, records) if record is None or record.status in TERMINAL]
        if finished:
            self.redis.zrem(self.keys.unfinished_jobs, *finished)
        return [record for record in records if record is not None and record.status not in TERMINAL]

    def delete(self, record: JobRecord) -> None:
        self.redis.unlink(self.keys.job(record.id), self.keys.job_heartbeat(record.id), self.keys.job_cancel(record.id))
        with self.redis.pipeline(transaction=False) as pipe:
            for index in {
                self.keys.all_jobs,
                self.keys.unfinished_jobs,
                self.keys.jobs(record.tenant),
                self.keys.active_jobs(record.tenant),
            }:
                pipe.zrem(index, record.id)
            pipe.hdel(self.keys.active_units(record.tenant), record.id)
            pipe.execute()

    # ---- transitions (see the module's docstring) ---------------------------------------------------------------

    def claim(
        self, job_id: str, attempt: int, *, started_at: float, timings: dict[str, float], threads: int | None = None
    ) -> bool:
        """queued -> running, by the worker of ``attempt`` (``threads``: its solver threads); its heartbeat starts
        here (the worker keeps it fresh)."""
        claimed = self._guarded(
            job_id,
            (QUEUED,),
            attempt,
            status=RUNNING,
            started_at=started_at,
            timings=timings,
            threads=threads,
            progress=Progress(phase="starting"),
        )
        if claimed:
            self.beat(job_id, attempt)
        return claimed

    def report_progress(
        self, job_id: str, attempt: int, progress: Progress, timings: dict[str, float] | None = None
    ) -> bool:
        """running -> running: where the worker of ``attempt`` stands (and its timings so far, where given)."""
        fields = {"progress": progress} if timings is None else {"progress": progress, "timings": timings}
        return self._guarded(job_id, (RUNNING,), attempt, **fields)

    def succeed(
        self,
        job_id: str,
        attempt: int,
        *,
        summary,
        cache_hit: bool | None,
        timings: dict[str, float],
        progress: Progress,
        finished_at: float | None = None,
    ) -> bool:
        """running -> succeeded, by the worker of ``attempt`` (its result is stored by then), at ``finished_at``
        (None: now)."""
        return self._guarded(
            job_id,
            (RUNNING,),
            attempt,
            status=SUCCEEDED,
            finished_at=now() if finished_at is None else finished_at,
            timings=timings,
            summary=summary,
            cache_hit=cache_hit,
            progress=progress,
        )

    def fail(self, job_id: str, attempt: int, error: JobError, *, timings: dict[str, float]) -> bool:
        """running -> failed, by the worker of ``attempt`` (an error, or past its deadline)."""
        return self._guarded(
            job_id, (RUNNING,), attempt, status=FAILED, finished_at=now(), timings=timings, error=error
        )

    def report_cells(self, parent_id: str, progress: Progress) -> bool:
        """queued -> queued: a parent's cells still unfinished (``progress.unfinished``), by the worker of a cell that
        ended; applied only where fewer than the parent holds (two cells ending at once may count in either order)."""
        assert progress.unfinished is not None
        args: list[str | int] = [_encode(QUEUED), progress.unfinished, _encode(progress)]
        return bool(self._cells_write(keys=[self.keys.job(parent_id)], args=args))

    def continue_later(self, record: JobRecord, unfinished: int, *, status: str = RUNNING) -> JobRecord | None:
        """running -> queued on the same attempt, by a grid parent whose ``unfinished`` cells it must wait for; or
        (``status`` queued) queued -> queued, by the watchdog, for a parent queued behind a cell attempt that was
        lost (its RQ run would wait for that attempt forever): the record as re-queued (its next RQ run is a
        continuation), None where it no longer waits on this attempt."""
        continuation = record.continuation + 1
        requeue = {
            "status": QUEUED,
            "queued_at": now(),
            "continuation": continuation,
            "rq_job_id": rq_job_id(record.id, record.attempt, continuation),
            "progress": Progress(phase="waiting for cells", unfinished=unfinished),
        }
        if not self._guarded(record.id, (status,), record.attempt, **requeue):
            return None
        return record.model_copy(update=requeue)

    def retry_lost(self, record: JobRecord, lost: LostAttempt) -> JobRecord | None:
        """queued or running on ``lost.attempt`` -> queued on the next attempt, by the watchdog: the record as
        re-queued, None where it moved on meanwhile (finished, canceled, or retried already)."""
        attempt = lost.attempt + 1
        retry = {
            "attempt": attempt,
            "rq_job_id": rq_job_id(record.id, attempt),
            "status": QUEUED,
            "queued_at": now(),
            "started_at": None,
            "history": [*record.history, lost],
            "progress": Progress(phase="queued", retry_of_attempt=lost.attempt),
        }
        if not self._guarded(record.id, ACTIVE, lost.attempt, **retry):
            return None
        return record.model_copy(update=retry)

    def fail_lost(self, record: JobRecord, lost: LostAttempt) -> bool:
        """queued or running on ``lost.attempt`` -> failed (worker_lost), by the watchdog once no attempt is left."""
        return self._guarded(
            record.id,
            ACTIVE,
            lost.attempt,
            status=FAILED,
            finished_at=now(),
            history=[*record.history, lost],
            error=JobError(type="worker_lost", detail=f"{lost.reason}; tried {lost.attempt} times"),
        )

    def cancel(
        self, job_id: str, progress: Progress, *, attempt: int | None = None, timings: dict[str, float] | None = None
    ) -> bool:
        """queued or running -> canceled: by the API whatever the attempt (``attempt`` None), or by the worker of
        ``attempt`` that saw the cancel flag (with its timings)."""
        fields = {} if timings is None else {"timings": timings}
        return self._guarded(job_id, ACTIVE, attempt, status=CANCELED, finished_at=now(), progress=progress, **fields)

    def _guarded(self, job_id: str, allowed: tuple[str, ...], on_attempt: int | None = None, **fields) -> bool:
        """Set ``fields`` (JobRecord fields) if the job is in an ``allowed`` status (and on ``on_attempt``)."""
        unknown = set(fields) - set(JobRecord.model_fields)
        if unknown:
            raise TypeError(f"not job record fields: {sorted(unknown)}")
        args: list[str | int] = [
            len(allowed),
            *(_encode(s) for s in allowed),
            "" if on_attempt is None else _encode(on_attempt),
        ]
        for name, value in fields.items():
            args += [name, _encode(value)]
        applied = bool(self._guarded_write(keys=[self.keys.job(job_id)], args=args))
        if applied and fields.get("status") in TERMINAL:
            self.redis.zrem(self.keys.unfinished_jobs, job_id)  # a stale entry is pruned by the watchdog anyway
        return applied

    # ---- heartbeats and cancel requests -------------------------------------------------------------------------

    def beat(self, job_id: str, attempt: int) -> None:
        self.redis.set(self.keys.job_heartbeat(job_id), attempt, px=int(self.settings.heartbeat_ttl_seconds * 1000))

    def stop_beating(self, job_id: str) -> None:
        """The worker is done with the job (finished, or handed it back to the queue)."""
        self.redis.delete(self.keys.job_heartbeat(job_id))

    def heartbeat_alive(self, job_id: str) -> bool:
        return bool(self.redis.exists(self.keys.job_heartbeat(job_id)))

    def request_cancel(self, job_id: str) -> None:
        self.redis.set(self.keys.job_cancel(job_id), 1, ex=self.settings.result_ttl_seconds)

    def cancel_requested(self, job_id: str) -> bool:
        return bool(self.redis.exists(self.keys.job_cancel(job_id)))


def now() -> float:
    return time.time()
