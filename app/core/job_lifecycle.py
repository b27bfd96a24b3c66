"""A job's life after submission: recording and queueing it, reading where it stands, recovering it when its worker
is lost, canceling and deleting it. The statuses and who moves a job between them: app/core/records.py.

Reads have no side effects. Lost workers are recovered in one place, :meth:`JobLifecycle.watch_running`, the
pass the API's maintenance thread runs every FIRE_WATCHDOG_SECONDS: a job whose worker is gone reads as queued or
running until that pass retries it (or fails it after FIRE_MAX_JOB_ATTEMPTS). A job that waits for others (a
parent for its cells, the cells of a training job for it) has no RQ run until the last of them ends and queues it
(``queue_ready``; the count: app/core/records.py), so the watchdog leaves it alone; a lost cell is retried as any job
and counts in its parent once, when it ends.

Many jobs at once (a batch of 10,000 chunks): records, queueing and cancels go BULK at a time in pipelines, a few
round trips each.
"""

import uuid
from collections.abc import Mapping, Sequence

from redis import Redis
from rq.command import send_stop_job_command
from rq.exceptions import InvalidJobOperation, NoSuchJobError
from rq.job import Job, JobStatus
from rq.serializers import JSONSerializer

from app.core.config import Settings
from app.core.errors import Conflict, FieldFault, NotFound, Unreadable
from app.core.job_documents import (
    ACTIVE,
    CANCELED,
    QUEUED,
    RUNNING,
    TERMINAL,
    JobKind,
    JobRecord,
    JobSpec,
    LostAttempt,
    Progress,
)
from app.core.keys import Keys
from app.core.queues import TASKS, JobQueues, job_of, make_queue, rq_job_id, tenant_queue
from app.core.records import BULK, JobRecords, now
from app.core.replies import text
from app.core.results import ResultStore
from app.core.workers import WorkerRegistry

_RQ_LOST = {JobStatus.FAILED, JobStatus.STOPPED, JobStatus.CANCELED}
# RQ's own alarm in the work horse fires this long after FIRE_JOB_TIMEOUT: it stops a phase that has no
# step callback (training a forest, building the matrix) within about that much of the deadline.
DEADLINE_GRACE_SECONDS = 5


class JobLifecycle:
    def __init__(self, settings: Settings, redis: Redis, records: JobRecords, results: ResultStore):
        self.settings = settings
        self.redis = redis
        self.records = records
        self.results = results
        self.pool = settings.queue_name
        self.queues = JobQueues(Keys.from_settings(settings), redis)
        self.workers = WorkerRegistry(settings, redis)

    # ---- recording and queueing ---------------------------------------------------------------------------------

    def new(
        self,
        kind: JobKind,
        spec: JobSpec,
        tenant: str,
        *,
        job_id: str | None = None,
        parent_id: str | None = None,
        cells: list[str] | None = None,
        stability_fits: list[str] | None = None,
        dependents: list[str] | None = None,
    ) -> JobRecord:
        """A job's record as it is first stored (queued, attempt 1); nothing is written yet (``create_all``)."""
        job_id, created = job_id or new_job_id(), now()
        return JobRecord(
            id=job_id,
            tenant=tenant,
            kind=kind,
            status=QUEUED,
            attempt=1,
            spec=spec,
            queue=self.pool,
            rq_job_id=rq_job_id(job_id, 1),
            parent_id=parent_id,
            cells=cells,
            stability_fits=stability_fits,
            dependents=dependents,
            created_at=created,
            queued_at=created,
            progress=Progress(phase="queued"),
        )

    def create(
        self, kind: JobKind, spec: JobSpec, tenant: str, *, waits_for: Mapping[str, int] | None = None, **fields
    ) -> JobRecord:
        """Record a job (``new``'s ``fields``) and queue it: at once where it waits for no job, else once the last
        of those it waits for (``waits_for``: how many of each kind) ended."""
        record = self.new(kind, spec, tenant, **fields)
        self.create_all([(record, waits_for or {})])
        return record

    def create_all(self, jobs: Sequence[tuple[JobRecord, Mapping[str, int]]]) -> None:
        """Record new jobs (``new``), each with what it waits for, and queue those that wait for none (or for jobs
        that all ended already), BULK at a time: two round trips for each BULK jobs."""
        for start in range(0, len(jobs), BULK):
            group = jobs[start : start + BULK]
            ready = set(self.records.create(group))
            self.enqueue_all([record for record, waits_for in group if not waits_for or record.id in ready])

    def queue_ready(self, job_ids: Sequence[str]) -> None:
        """Queue the jobs that waited for others and now wait for none (named by the transition that ended the last
        of them, ``Ended.ready``): the only way such a job is queued, once."""
        if job_ids:
            self.enqueue_all([r for r in self.records.get_many(job_ids) if r is not None and r.status == QUEUED])

    def enqueue(self, record: JobRecord) -> None:
        """Queue one run of a job (``enqueue_all``)."""
        self.enqueue_all([record])

    def enqueue_all(self, records: Sequence[JobRecord]) -> None:
        """Queue one run of each job on its tenant's queue in the pool it was submitted to (``record.queue``:
        retries and parents stay with the pool's workers, and take their tenant's turns, app/core/queues.py), BULK
        at a time in one round trip each: every run of every job is queued here."""
        for start in range(0, len(records), BULK):
            by_queue: dict[str, list[JobRecord]] = {}
            for record in records[start : start + BULK]:
                by_queue.setdefault(tenant_queue(record.queue, record.tenant), []).append(record)
            with self.redis.pipeline(transaction=False) as pipe:
                for name, queued in by_queue.items():
                    queue = make_queue(name, self.redis)
                    runs = [
                        queue.prepare_data(
                            TASKS[record.kind],
                            (record.id, record.attempt),
                            job_id=record.rq_job_id,
                            timeout=self.settings.job_timeout + DEADLINE_GRACE_SECONDS,  # a path stops at its deadline
                            result_ttl=3600,
                            failure_ttl=self.settings.result_ttl_seconds,
                        )
                        for record in queued
                    ]
                    queue.enqueue_many(runs, pipeline=pipe)
                    self.queues.announce(queue.name, pipeline=pipe)
                pipe.execute()

    # ---- reading (no side effects) ------------------------------------------------------------------------------

    def read(self, job_id: str) -> JobRecord:
        """A job whoever owns it (for the workers)."""
        record = self.records.get(job_id)
        if record is None:
            raise NotFound("job", job_id)
        return record

    def find(self, job_id: str, tenant: str) -> JobRecord | None:
        """The tenant's job (None for another tenant's, also where its record is unreadable: Unreadable for its own)."""
        try:
            record = self.records.get(job_id)
        except Unreadable as error:
            if error.tenant != tenant:
                return None
            raise
        return None if record is None or record.tenant != tenant else record

    def get(self, job_id: str, *, tenant: str, field: str = "job_id") -> JobRecord:
        """The tenant's job; another tenant's is not found."""
        record = self.find(job_id, tenant)
        if record is None:
            raise NotFound("job", job_id, field)
        return record

    def using(self, tenant: str, *, dataset_id: str | None = None, forest_id: str | None = None) -> list[JobRecord]:
        """The tenant's queued or running submissions that read this dataset or forest."""

        def uses(spec) -> bool:
            recipe = getattr(spec, "recipe", None)  # (a batch scoring job has neither recipe nor forest)
            datasets = {
                getattr(spec, "dataset_id", None),
                getattr(spec, "validation_dataset_id", None),
                recipe.dataset_id if recipe else None,
            }
            return (dataset_id is not None and dataset_id in datasets) or (
                forest_id is not None and getattr(spec, "forest_id", None) == forest_id
            )

        return [record for record in self.records.active(tenant) if record.status in ACTIVE and uses(record.spec)]

    def list(self, *, tenant: str, limit: int = 100) -> list[JobRecord]:
        return self.records.recent(tenant, limit)

    # ---- recovery of lost workers -------------------------------------------------------------------------------

    def watch_running(self) -> int:
        """One watchdog pass over the queued and running jobs; returns how many it had to recover. A job that waits
        for others has no run to lose: the last of them to end queues it."""
        records = self.records.unfinished()
        waiting = self.records.waiting([record.id for record in records])
        watched = [record for record, left in zip(records, waiting) if not left]
        runs = self._run_statuses(watched)
        return self._recover_taken() + sum(self._recover(record, runs) for record in watched)

    def _recover_taken(self) -> int:
        """Queue again each job whose run a worker took from its queue and then stopped beating (killed or crashed)
        while the job still waits on that run (not claimed: a claimed run's heartbeat tells), and drop the marks of
        workers that stopped; how many jobs it queued again. A worker is lost FIRE_HEARTBEAT_TTL_SECONDS after its
        last beat, so a job taken by a worker that died before its claim is queued again within that and one
        FIRE_WATCHDOG_SECONDS, not after RQ's cleanup minutes later."""
        taken = self.queues.taken()
        if not taken:
            return 0
        alive = self.workers.alive_names()
        recovered = 0
        for rq_id, worker in taken.items():
            if worker in alive:
                continue  # its run goes on, or ends and the worker drops the mark
            record = self.records.get(job_of(rq_id))
            if record is not None and record.status == QUEUED and record.rq_job_id == rq_id:
                reason = "the worker that took the job from its queue stopped (killed or crashed) before starting it"
                recovered += self._retry_or_fail(record, reason)
                self._discard_run(rq_id)
            self.queues.release(rq_id)
        return recovered

    def _recover(self, record: JobRecord, runs: dict[str, str | None]) -> bool:
        """Retry a job whose worker is lost once more, or fail it with the reason; whether this pass did."""
        reason = self._lost_reason(record, runs)
        if reason is None:
            return False
        return self._retry_or_fail(record, reason)

    def _retry_or_fail(self, record: JobRecord, reason: str) -> bool:
        """Queue a lost attempt's job again, or fail it once FIRE_MAX_JOB_ATTEMPTS were lost; whether this did."""
        lost = LostAttempt(attempt=record.attempt, lost_at=now(), reason=reason)
        if record.attempt >= self.settings.max_job_attempts:
            ended = self.records.fail_lost(record, lost)
            if ended is not None:
                self.queue_ready(ended.ready)
            return ended is not None
        retried = self.records.retry_lost(record, lost)
        if retried is not None:
            self.enqueue(retried)
        return retried is not None

    def _discard_run(self, rq_id: str) -> None:
        """Delete RQ's job of a run whose worker was lost before it started it: no worker will end it, and RQ keeps
        a job that was taken but not started forever."""
        try:
            Job.fetch(rq_id, connection=self.redis, serializer=JSONSerializer).delete(remove_from_queue=False)
        except NoSuchJobError:
            pass

    def _run_statuses(self, records: Sequence[JobRecord]) -> dict[str, str | None]:
        """RQ's status of the run of each job queued for longer than the heartbeat TTL, by job id (None: RQ has no
        such run), read in one round trip: a pass over 5,000 queued chunks reads 5,000 statuses. (A job queued
        moments ago has not vanished: its run is not read.)"""
        since = now() - self.settings.heartbeat_ttl_seconds
        queued = [record for record in records if record.status == QUEUED and record.queued_at <= since]
        with self.redis.pipeline(transaction=False) as pipe:
            for record in queued:
                pipe.hget(Job.key_for(record.rq_job_id), "status")
            statuses = pipe.execute()
        return {record.id: None if status is None else text(status) for record, status in zip(queued, statuses)}

    def _lost_reason(self, record: JobRecord, runs: dict[str, str | None]) -> str | None:
        """Why the job's attempt is lost (None: it is not): a running job whose heartbeat stopped, or a queued job
        whose run (``runs``: their RQ statuses) vanished or was ended by RQ before it started. (A run taken by a
        worker that died before the claim: ``_recover_taken``.)"""
        if record.status == RUNNING:
            if self.records.heartbeat_alive(record.id):
                return None
            if now() - (record.started_at or now()) < self.settings.heartbeat_ttl_seconds:
                return None
            return "the worker running this job stopped sending heartbeats (killed or crashed)"
        if record.status == QUEUED and record.id in runs:
            rq_status = runs[record.id]
            if rq_status is None:
                return "the queued job vanished from the queue"
            if rq_status in _RQ_LOST:
                return f"the worker ended the job before it started ({rq_status})"
        return None

    # ---- cancel and delete --------------------------------------------------------------------------------------

    def cancel(self, job_id: str, *, tenant: str) -> JobRecord:
        """Cancel a queued or running job and its cells (and stability fits); a job canceled already is answered as
        it is (a cancel sent twice, or while one is under way), one that succeeded or failed is a Conflict. The job is
        canceled before its cells, so that the last of them to end finds it canceled and queues nothing."""
        record = self.get(job_id, tenant=tenant)
        if record.status == CANCELED:
            return record
        if record.status in TERMINAL:
            raise Conflict(
                f"Job {job_id} already {record.status}.",
                [FieldFault("job_id", f"status {record.status}", "nothing to cancel")],
            )
        self._cancel_all([record])
        cells = self.records.get_many(cells_of(record))
        self._cancel_all([cell for cell in cells if cell is not None and cell.status in ACTIVE])
        return self.get(job_id, tenant=tenant)  # not found: deleted meanwhile

    def _cancel_all(self, records: Sequence[JobRecord]) -> None:
        """Cancel each job (the cancel flag its path callback sees within a step, and its record), then take its
        queued run out of its queue, or stop the worker running it; queue the jobs that no longer wait."""
        if not records:
            return
        canceled = self.records.cancel_all(records)
        self.queue_ready(canceled.ready)
        ended = set(canceled.canceled)
        self._discard_runs([record for record in records if record.id in ended and record.status == QUEUED])
        for record in records:
            if record.id in ended and record.status == RUNNING:
                try:
                    send_stop_job_command(self.redis, record.rq_job_id, serializer=JSONSerializer)
                except (InvalidJobOperation, NoSuchJobError):
                    pass  # its run ended meanwhile; the record already says canceled

    def _discard_runs(self, records: Sequence[JobRecord]) -> None:
        """Take the queued runs of ``records`` out of their queues and delete RQ's jobs of them, BULK at a time (a
        worker that took one meanwhile finds no job, or a canceled record it cannot claim)."""
        for start in range(0, len(records), BULK):
            with self.redis.pipeline(transaction=False) as pipe:
                for record in records[start : start + BULK]:
                    make_queue(tenant_queue(record.queue, record.tenant), self.redis).remove(record.rq_job_id, pipe)
                    pipe.delete(Job.key_for(record.rq_job_id))
                pipe.execute()

    def delete(self, job_id: str, *, tenant: str) -> None:
        """Cancel the job if it is queued or running, then remove it, its result, and its cells."""
        record = self.get(job_id, tenant=tenant)
        if record.status in ACTIVE:
            self.cancel(job_id, tenant=tenant)
        self.remove([cell for cell in self.records.get_many(cells_of(record)) if cell is not None])
        self.remove([record])

    def remove(self, records: Sequence[JobRecord]) -> None:
        """Cancel those of ``records`` still queued or running, then remove every one, its result and its RQ run,
        BULK at a time (a batch's chunks; not their cells)."""
        for start in range(0, len(records), BULK):
            group = records[start : start + BULK]
            self._cancel_all([record for record in group if record.status in ACTIVE])
            self.results.delete_all([record.id for record in group])
            self.records.delete_all(group)
            self._discard_runs(group)  # (a finished run's job RQ lets expire)


def cells_of(record: JobRecord) -> list[str]:
    """The jobs a parent waits for: its cells, then its stability fits."""
    return [*(record.cells or []), *(record.stability_fits or [])]


def new_job_id() -> str:
    return "job_" + uuid.uuid4().hex[:24]
