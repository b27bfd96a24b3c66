"""Job records: one Redis hash per job, every field JSON-encoded, read and written as :class:`JobRecord`, and
moved from status to status by the named transitions below, the only writes after ``create``.

The life of a job, and who moves it along each edge::

    create ──► queued ──claim──► running ──succeed──► succeeded
    (API)       ▲ │  (worker,     │ │
                │ │  attempt n)   │ └──fail──────────────────► failed
                │ │               │    (worker: an error, or past FIRE_JOB_TIMEOUT)
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

Jobs that wait for others. A parent (a grid, a cross-validation, a batch) runs once its cells (and a
cross-validation's stability fits) have ended, and the cells of a job that trains its forest once the training
job has: no RQ dependency holds them. A job that waits is recorded queued with no RQ run, and a count of the jobs
it waits for that have not ended, by their kind (``Keys.job_waiting``: ``left:{kind}``, and ``total:{kind}`` as
recorded). The transition that ends a job (succeed, fail, fail_lost, cancel) counts it down, in the same script, in
every job that waits for it (its parent, and its ``dependents``): the step that brings a waiting job's count to 0
while that job is queued sets its ``queued_at`` and names it in what the transition returns (:class:`Ended`), and
the caller queues it (``JobLifecycle.queue_ready``). A job ends once, so each is counted down once however often it
was retried, and the count reaches 0 once: cells that end before their parent is recorded take it below 0, and the
parent's record adds what it waits for in the transaction that writes it (ready at once where all had ended). A
parent is never queued by anything else, and its run claims its record as any run does: the watchdog leaves a job
that waits alone, and retries a ready one whose run vanished (its caller died before queueing it) as any other.
While a parent waits, its progress is read from that count (``unfinished``: its cells not ended; a
cross-validation's ``fit`` of ``n_fits``: its stability fits ended).
"""

import json
import logging
import time
from collections.abc import Mapping, Sequence
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
from app.core.record_scripts import ADMIT, ADMIT_MORE, TRANSITION, WAIT_FOR
from app.core.replies import members, scored_members, text
from app.core.tenants import DEFAULT_TENANT

log = logging.getLogger(__name__)

BULK = 1000  # commands of one kind sent in one pipeline (a batch of many chunks: records, cancels)
ADMISSION_GRACE_SECONDS = 60  # an admitted job's record is written right after; until then it is not pruned


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


def _decode(raw: Mapping[bytes | str, bytes | str], waiting: Mapping[str, int], job_id: str = "") -> JobRecord | None:
    """The record of a job's hash (None: no such hash); Unreadable (its tenant where that field reads) where the
    hash does not read as a JobRecord: damaged in Redis, or written before a check its model makes."""
    if not raw:
        return None
    try:
        record = JobRecord.model_validate({text(k): json.loads(v) for k, v in raw.items()})
    except ValueError as error:  # a ValidationError, or a field that is not JSON
        raise _unreadable(job_id, raw, error) from error
    if record.status == QUEUED and (record.cells or record.stability_fits) and waiting:
        record.progress = _waiting_progress(record, waiting)
    return record


def _status(raw: bytes | str | None) -> str | None:
    """A job's stored status field (None: no such job, or a field that does not read as a status: one damaged record
    never stops the reads of the others, a tenant's admission or a batch's progress)."""
    if raw is None:
        return None
    try:
        status = json.loads(raw)
    except ValueError:
        return None
    return status if status in (*ACTIVE, *TERMINAL) else None


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


def _counts(reply: Mapping[bytes | str, bytes | str]) -> dict[str, int]:
    return {text(name): int(value) for name, value in reply.items()}


def _left(counts: Mapping[str, int]) -> int:
    """How many jobs a waiting job's count says it still waits for."""
    return sum(value for name, value in counts.items() if name.startswith("left:"))


# a parent's cells while it waits for them: the phase its progress names, and their kind
_CELLS = {"cv": ("folds", "path"), "grid": ("cells", "path"), "batch": ("chunks", "batch_chunk")}


def _waiting_progress(parent: JobRecord, counts: Mapping[str, int]) -> Progress:
    """A queued parent's progress, read from the count of what it waits for: ``unfinished`` its cells not ended
    (a grid's, a cross-validation's folds, a batch's chunks); its stability fits ended (``fit`` of ``n_fits``), its
    phase ``stability`` once its cells ended (a path's stability fits are its only cells)."""
    phase, kind = _CELLS.get(parent.kind, ("stability", None))
    unfinished = max(0, counts.get(f"left:{kind}", 0)) if parent.cells and kind else None
    n_fits = counts.get("total:stability_fit") if parent.stability_fits else None
    fit = None if n_fits is None else n_fits - max(0, counts.get("left:stability_fit", 0))
    if n_fits is not None and not unfinished:
        phase = "stability"
    return Progress(phase=phase, unfinished=unfinished, fit=fit, n_fits=n_fits)


def _waiters(record: JobRecord) -> list[str]:
    """The jobs that wait for ``record`` to end: its parent, and its dependents."""
    return [*([record.parent_id] if record.parent_id else []), *(record.dependents or [])]


@dataclass(frozen=True)
class Ended:
    """A transition that ended a job, and applied: ``ready``, the jobs that waited for it and now wait for none (the
    caller queues them: ``JobLifecycle.queue_ready``)."""

    ready: tuple[str, ...] = ()


@dataclass(frozen=True)
class CanceledAll:
    """What ``JobRecords.cancel_all`` did: the jobs it canceled, and those that became ready."""

    canceled: list[str]
    ready: list[str]


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
        self._transition = redis.register_script(TRANSITION)
        self._wait_for = redis.register_script(WAIT_FOR)
        self._admit = redis.register_script(ADMIT)
        self._admit_more = redis.register_script(ADMIT_MORE)

    # ---- records and indexes ----------------------------------------------------------------------------------

    def create(self, jobs: Sequence[tuple[JobRecord, Mapping[str, int]]]) -> list[str]:
        """Record new jobs, each with the kinds of jobs it waits for and how many of each (none: it waits for nothing),
        in one transaction: the ids of those that wait, and for which every job they wait for ended before they were
        recorded (their queued_at set: to be queued now)."""
        waits = [(record, waits_for) for record, waits_for in jobs if waits_for]
        indexes: dict[str, dict[str, float]] = {}  # each index's new members: one ZADD each
        with self.redis.pipeline(transaction=True) as pipe:
            for record, _ in jobs:
                key = self.keys.job(record.id)
                pipe.hset(key, mapping=_fields(record))
                pipe.expire(key, self.settings.result_ttl_seconds)
                for index in (self.keys.all_jobs, self.keys.unfinished_jobs):
                    indexes.setdefault(index, {})[record.id] = record.created_at
                if record.tenant != DEFAULT_TENANT:
                    indexes.setdefault(self.keys.jobs(record.tenant), {})[record.id] = record.created_at
            for index, added in indexes.items():
                pipe.zadd(index, added)
            for record, waits_for in waits:
                counts = [item for kind, n in waits_for.items() for item in (kind, n)]
                args = [self.settings.result_ttl_seconds, _encode(now()), *counts]
                self._wait_for(
                    keys=[self.keys.job(record.id), self.keys.job_waiting(record.id)], args=args, client=pipe
                )
            replies = pipe.execute()
        ready = replies[len(replies) - len(waits) :]
        return [record.id for (record, _), at_once in zip(waits, ready) if at_once]

    def get(self, job_id: str) -> JobRecord | None:
        """The record (None: not found); Unreadable where it cannot be read."""
        return self.get_many([job_id], skip_unreadable=False)[0]

    def get_many(self, job_ids: Sequence[str], *, skip_unreadable: bool = True) -> list[JobRecord | None]:
        """The records (None: not found, or (``skip_unreadable``) unreadable: logged and counted); a parent waiting
        for its cells with its progress read from their count."""
        with self.redis.pipeline(transaction=False) as pipe:
            for job_id in job_ids:
                pipe.hgetall(self.keys.job(job_id))
                pipe.hgetall(self.keys.job_waiting(job_id))
            replies = pipe.execute()
        records: list[JobRecord | None] = []
        for job_id, raw, waiting in zip(job_ids, replies[::2], replies[1::2]):
            try:
                records.append(_decode(raw, _counts(waiting), job_id))
            except Unreadable as error:
                if not skip_unreadable:
                    raise
                log.warning("job %s left out: %s", job_id, error.detail)
                records.append(None)
        return records

    def statuses(self, job_ids: Sequence[str]) -> list[str | None]:
        """The status of each job (None: not found), BULK a round trip: what a batch's progress reads of its chunks."""
        found: list[str | None] = []
        for start in range(0, len(job_ids), BULK):
            with self.redis.pipeline(transaction=False) as pipe:
                for job_id in job_ids[start : start + BULK]:
                    pipe.hget(self.keys.job(job_id), "status")
                found += [_status(status) for status in pipe.execute()]
        return found

    def waiting(self, job_ids: Sequence[str]) -> list[int]:
        """How many jobs each job still waits for (0: it waits for none, or no longer)."""
        with self.redis.pipeline(transaction=False) as pipe:
            for job_id in job_ids:
                pipe.hgetall(self.keys.job_waiting(job_id))
            replies = pipe.execute()
        return [_left(_counts(reply)) for reply in replies]

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
        # a job whose status field cannot be read counts as one that vanished: pruned after the grace
        finished = [
            member
            for (member, admitted), status in zip(admitted_ids, map(_status, statuses))
            if (status is None and admitted < young) or status in TERMINAL
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
        self.delete_all([record])

    def delete_all(self, records: Sequence[JobRecord]) -> None:
        """Remove the records, their heartbeats, cancel flags and counts, and their entries in the indexes."""
        with self.redis.pipeline(transaction=False) as pipe:
            for record in records:
                pipe.unlink(
                    self.keys.job(record.id),
                    self.keys.job_heartbeat(record.id),
                    self.keys.job_cancel(record.id),
                    self.keys.job_waiting(record.id),
                )
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
    ) -> "Ended | None":
        """running -> succeeded, by the worker of ``attempt`` (its result is stored by then), at ``finished_at``
        (None: now)."""
        return self._end(
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

    def fail(self, job_id: str, attempt: int, error: JobError, *, timings: dict[str, float]) -> "Ended | None":
        """running -> failed, by the worker of ``attempt`` (an error, or past its deadline)."""
        return self._end(job_id, (RUNNING,), attempt, status=FAILED, finished_at=now(), timings=timings, error=error)

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

    def fail_lost(self, record: JobRecord, lost: LostAttempt) -> "Ended | None":
        """queued or running on ``lost.attempt`` -> failed (worker_lost), by the watchdog once no attempt is left."""
        return self._end(
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
    ) -> "Ended | None":
        """queued or running -> canceled: by the API whatever the attempt (``attempt`` None), or by the worker of
        ``attempt`` that saw the cancel flag (with its timings)."""
        fields = {} if timings is None else {"timings": timings}
        return self._end(job_id, ACTIVE, attempt, status=CANCELED, finished_at=now(), progress=progress, **fields)

    def cancel_all(self, records: Sequence[JobRecord]) -> "CanceledAll":
        """``cancel`` by the API of each of ``records`` (as read: their parents, dependents and progress) and its
        cancel flag, one round trip for each BULK: which were canceled (the others had ended), and the jobs that
        became ready."""
        canceled: list[str] = []
        ready: list[str] = []
        for start in range(0, len(records), BULK):
            group = records[start : start + BULK]
            with self.redis.pipeline(transaction=False) as pipe:
                for record in group:
                    pipe.set(self.keys.job_cancel(record.id), 1, ex=self.settings.result_ttl_seconds)
                    progress = record.progress.model_copy(update={"phase": "canceled"})
                    fields = {"status": CANCELED, "finished_at": now(), "progress": progress}
                    self._run(record.id, ACTIVE, None, fields, _waiters(record), client=pipe)
                    pipe.zrem(self.keys.unfinished_jobs, record.id)
                replies = pipe.execute()
            for record, reply in zip(group, replies[1::3]):
                ended = self._ended(reply, _waiters(record))
                if ended is not None:
                    canceled.append(record.id)
                    ready.extend(ended.ready)
        return CanceledAll(canceled, ready)

    def _guarded(self, job_id: str, allowed: tuple[str, ...], on_attempt: int | None = None, **fields) -> bool:
        """Set ``fields`` (JobRecord fields) if the job is in an ``allowed`` status (and on ``on_attempt``)."""
        return bool(self._run(job_id, allowed, on_attempt, fields)[0])

    def _end(self, job_id: str, allowed: tuple[str, ...], on_attempt: int | None, **fields) -> "Ended | None":
        """``_guarded`` for a write of a final status: the job is counted down in every job that waits for it."""
        raw_parent, raw_dependents = self.redis.hmget(self.keys.job(job_id), ["parent_id", "dependents"])
        parent = json.loads(raw_parent) if raw_parent else None
        dependents = json.loads(raw_dependents) if raw_dependents else None
        waiters = [*([parent] if parent else []), *(dependents or [])]
        ended = self._ended(self._run(job_id, allowed, on_attempt, fields, waiters), waiters)
        if ended is not None:
            self.redis.zrem(self.keys.unfinished_jobs, job_id)  # a stale entry is pruned by the watchdog anyway
        return ended

    def _run(
        self,
        job_id: str,
        allowed: tuple[str, ...],
        on_attempt: int | None,
        fields: Mapping,
        waiters: Sequence[str] = (),
        client=None,
    ):
        """The transition script: ``fields`` set where the job is in an ``allowed`` status (and on ``on_attempt``),
        and counted down in each of ``waiters`` (the jobs that wait for it: given for a final status only)."""
        unknown = set(fields) - set(JobRecord.model_fields)
        if unknown:
            raise TypeError(f"not job record fields: {sorted(unknown)}")
        args: list[str | int] = [
            self.settings.result_ttl_seconds,
            _encode(QUEUED),
            _encode(now()),
            len(allowed),
            *(_encode(s) for s in allowed),
            "" if on_attempt is None else _encode(on_attempt),
        ]
        for name, value in fields.items():
            args += [name, _encode(value)]
        keys = [self.keys.job(job_id)]
        for waiter in waiters:
            keys += [self.keys.job(waiter), self.keys.job_waiting(waiter)]
        return self._transition(keys=keys, args=args, client=client)

    @staticmethod
    def _ended(reply, waiters: Sequence[str]) -> "Ended | None":
        """What the transition script answered for a job that ``waiters`` wait for."""
        if not reply[0]:
            return None
        return Ended(tuple(waiters[(int(k) - 2) // 2] for k in reply[1:]))

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
