"""A job's life after submission: recording and queueing it, reading where it stands, recovering it when its worker
is lost, canceling and deleting it. The statuses and who moves a job between them: app/core/records.py.

Reads have no side effects. Lost workers are recovered in one place, :meth:`JobLifecycle.watch_running`, the
pass the API's maintenance thread runs every FIRE_WATCHDOG_SECONDS: a job whose worker is gone reads as queued or
running until that pass retries it (or fails it after FIRE_MAX_JOB_ATTEMPTS). A grid parent waiting for its cells
reads them as they are: a lost cell is retried by the watchdog, and the parent, re-queued behind the cells it saw
unfinished, looks again when they end; where it was queued behind a cell attempt that was then lost, the watchdog
re-queues it behind the cells' current attempts (the lost RQ run never ends, so RQ would never start it).
"""

import uuid

from redis import Redis
from rq.command import send_stop_job_command
from rq.exceptions import InvalidJobOperation, NoSuchJobError
from rq.job import Dependency, Job, JobStatus
from rq.serializers import JSONSerializer

from app.core.config import Settings
from app.core.errors import Conflict, FieldFault, NotFound, Unreadable
from app.core.job_documents import ACTIVE, QUEUED, RUNNING, TERMINAL, JobKind, JobRecord, JobSpec, LostAttempt, Progress
from app.core.keys import Keys
from app.core.queues import TASKS, JobQueues, job_of, make_queue, rq_job_id, tenant_queue
from app.core.records import JobRecords, now
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

    def create(
        self,
        kind: JobKind,
        spec: JobSpec,
        tenant: str,
        *,
        job_id: str | None = None,
        parent_id: str | None = None,
        cells: list[str] | None = None,
        depends_on: list[str] | None = None,
    ) -> JobRecord:
        """Record a job (queued, attempt 1) and queue it, after the RQ runs ``depends_on``."""
        job_id, created = job_id or new_job_id(), now()
        record = JobRecord(
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
            created_at=created,
            queued_at=created,
            progress=Progress(phase="queued"),
        )
        self.records.create(record)
        self.enqueue(record, depends_on)
        return record

    def enqueue(self, record: JobRecord, depends_on: list[str] | None = None) -> None:
        """Queue one run of a job on its tenant's queue in the pool it was submitted to (``record.queue``: retries
        and parents stay with the pool's workers, and take their tenant's turns, app/core/queues.py)."""
        queue = make_queue(tenant_queue(record.queue, record.tenant), self.redis)
        queue.enqueue(
            TASKS[record.kind],
            record.id,
            record.attempt,
            job_id=record.rq_job_id,
            job_timeout=self.settings.job_timeout + DEADLINE_GRACE_SECONDS,  # a path stops at its deadline first
            result_ttl=3600,
            failure_ttl=self.settings.result_ttl_seconds,
            depends_on=Dependency(jobs=depends_on, allow_failure=True) if depends_on else None,
        )
        self.queues.announce(queue.name)

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
        """One watchdog pass over the queued and running jobs; returns how many it had to recover."""
        return self._recover_taken() + sum(self._recover(record) for record in self.records.unfinished())

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

    def _recover(self, record: JobRecord) -> bool:
        """Retry a job whose worker is lost once more, or fail it with the reason; re-queue a parent that waits on a
        lost cell attempt behind the cells as they are now; whether this pass did."""
        if record.cells and record.status == QUEUED and self._waits_on_a_lost_attempt(record):
            unfinished = [cell for cell in map(self.read, record.cells) if cell.status not in TERMINAL]
            requeued = self.records.continue_later(record, len(unfinished), status=QUEUED)
            if requeued is not None:
                self.enqueue(requeued, depends_on=[cell.rq_job_id for cell in unfinished])
            return requeued is not None
        reason = self._lost_reason(record)
        if reason is None:
            return False
        return self._retry_or_fail(record, reason)

    def _retry_or_fail(self, record: JobRecord, reason: str) -> bool:
        """Queue a lost attempt's job again, or fail it once FIRE_MAX_JOB_ATTEMPTS were lost; whether this did."""
        lost = LostAttempt(attempt=record.attempt, lost_at=now(), reason=reason)
        if record.attempt >= self.settings.max_job_attempts:
            return self.records.fail_lost(record, lost)
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

    def _waits_on_a_lost_attempt(self, record: JobRecord) -> bool:
        """Whether a queued parent's RQ run waits on an RQ run of a cell that is no longer the cell's (its worker was
        lost and the cell retried): RQ would never start the parent, as the lost run never ends."""
        if now() - record.queued_at < self.settings.heartbeat_ttl_seconds:
            return False  # (a parent queued moments ago spares the pass reads of RQ's job and the cells)
        try:
            rq_job = Job.fetch(record.rq_job_id, connection=self.redis, serializer=JSONSerializer)
        except NoSuchJobError:
            return False  # vanished: _lost_reason retries it
        if rq_job.get_status() != JobStatus.DEFERRED:
            return False
        current = {cell.rq_job_id for cell in map(self.read, record.cells or [])}
        return bool(set(rq_job.dependency_ids) - current)

    def _lost_reason(self, record: JobRecord) -> str | None:
        if record.status == RUNNING:
            if self.records.heartbeat_alive(record.id):
                return None
            if now() - (record.started_at or now()) < self.settings.heartbeat_ttl_seconds:
                return None
            return "the worker running this job stopped sending heartbeats (killed or crashed)"
        if record.status == QUEUED and now() - record.queued_at >= self.settings.heartbeat_ttl_seconds:
            # (a job queued moments ago has not vanished: this spares the pass a read of RQ's job)
            try:
                rq_status = Job.fetch(record.rq_job_id, connection=self.redis, serializer=JSONSerializer).get_status()
            except NoSuchJobError:
                return "the queued job vanished from the queue"
            if rq_status in _RQ_LOST:
                return f"the worker ended the job before it started ({rq_status})"
        return None

    # ---- cancel and delete --------------------------------------------------------------------------------------

    def cancel(self, job_id: str, *, tenant: str) -> JobRecord:
        record = self.get(job_id, tenant=tenant)
        if record.status in TERMINAL:
            raise Conflict(
                f"Job {job_id} already {record.status}.",
                [FieldFault("job_id", f"status {record.status}", "nothing to cancel")],
            )
        for cell_id in record.cells or []:
            cell = self.records.get(cell_id)
            if cell is not None and cell.status in ACTIVE:
                self._cancel_one(cell)
        self._cancel_one(record)
        return self.get(job_id, tenant=tenant)  # not found: deleted meanwhile

    def _cancel_one(self, record: JobRecord) -> None:
        self.records.request_cancel(record.id)  # the path callback sees it within one step
        if not self.records.cancel(record.id, record.progress.model_copy(update={"phase": "canceled"})):
            return
        try:
            rq_job = Job.fetch(record.rq_job_id, connection=self.redis, serializer=JSONSerializer)
        except NoSuchJobError:
            return
        if rq_job.get_status() == JobStatus.STARTED:
            try:
                send_stop_job_command(self.redis, rq_job.id, serializer=JSONSerializer)
            except InvalidJobOperation:
                pass  # it finished meanwhile; the record already says canceled
        elif rq_job.get_status() in (JobStatus.QUEUED, JobStatus.DEFERRED, JobStatus.SCHEDULED):
            try:
                rq_job.cancel(enqueue_dependents=True)
            except ValueError as error:
                # a worker took it meanwhile and its execution ended: RQ's cancel reads the execution it lists and
                # finds it gone (a batch of many short chunks met this); the record already says canceled
                if "not found in Redis" not in str(error):
                    raise

    def delete(self, job_id: str, *, tenant: str) -> None:
        """Cancel the job if it is queued or running, then remove it, its result, and a grid's cells."""
        record = self.get(job_id, tenant=tenant)
        if record.status in ACTIVE:
            self.cancel(job_id, tenant=tenant)
        for cell in self.records.get_many(record.cells or []):
            if cell is not None:
                self._remove(cell)
        self._remove(record)

    def _remove(self, record: JobRecord) -> None:
        self.results.delete(record.id)
        self.records.delete(record)
        try:
            Job.fetch(record.rq_job_id, connection=self.redis, serializer=JSONSerializer).delete()
        except NoSuchJobError:
            pass  # RQ already let it expire


def new_job_id() -> str:
    return "job_" + uuid.uuid4().hex[:24]
