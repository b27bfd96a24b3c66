"""Job submission, status, cancellation and lost-worker recovery; the work itself runs in worker/tasks.py."""
import json
import uuid
from collections.abc import Callable

from pydantic import Field
from redis import Redis
from rq.command import send_stop_job_command
from rq.exceptions import InvalidJobOperation, NoSuchJobError
from rq.job import Dependency, Job, JobStatus
from rq.serializers import JSONSerializer

from app.core.blobs import Document, canonical_hash
from app.core.config import Settings
from app.core.datasets import DatasetInfo, DatasetStore
from app.core.errors import Conflict, Expired, FieldFault, IdempotencyKeyReused, Invalid, NotFound
from app.core.forests import ForestRecipe, ForestStore, TrainingRows, check_forest_features, check_forest_rows
from app.core.job_documents import (ACTIVE, CANCELED, FAILED, QUEUED, RUNNING, SUCCEEDED, TERMINAL,
                                    GridJobResult, GridJobSpec, Grid, JobError, JobKind,
                                    JobRecord, JobResult, JobSpec, LostAttempt, PathJobResult, PathJobSpec,
                                    Progress, TrainJobSpec)
from app.core.queues import TASKS, make_queue, rq_job_id
from app.core.records import JobRecords, now
from app.core.results import ResultStore
from solver import RuleEnsemble
from solver.spec import ForestSpec, PathSpec, SpecError

_RQ_LOST = {JobStatus.FAILED, JobStatus.STOPPED, JobStatus.CANCELED}
IDEMPOTENCY_CLAIM_SECONDS = 60  # a submission that dies half-way frees its key after this


class PathSubmission(Document):
    """A path job as submitted: the forest by id or by training parameters, validation rows from another
    dataset or held out of this one (``path.validation_fraction``, ``path.random_state``)."""

    dataset_id: str
    forest_id: str | None = None
    forest: ForestSpec | None = None
    validation_dataset_id: str | None = None
    path: PathSpec
    grid: Grid | None = Field(None, description="one path per gamma x fusion_ratio cell; the best cell is kept")


class JobService:
    def __init__(self, settings: Settings, redis: Redis, datasets: DatasetStore, forests: ForestStore,
                 records: JobRecords, results: ResultStore):
        self.settings = settings
        self.redis = redis
        self.datasets = datasets
        self.forests = forests
        self.records = records
        self.results = results
        self.queue = make_queue(settings.queue_name, redis)

    # ---- submission -------------------------------------------------------------------------------------

    def submit_training(self, dataset_id: str, params: ForestSpec, rows: TrainingRows,
                        idempotency_key: str | None) -> JobRecord:
        """Train ``params`` on these rows of the dataset (the training side of the split later paths use)."""
        dataset = self.datasets.get(dataset_id)
        self._check_training(dataset, params, "")
        self._check_holdout(dataset, rows)
        recipe = ForestRecipe(dataset_id=dataset.id, params=params, rows=rows)
        spec = TrainJobSpec(forest_id=recipe.forest_id, recipe=recipe)
        return self._idempotent(idempotency_key, spec.model_dump(mode="json"), lambda: self._enqueue_new("train", spec))

    def submit_path(self, submission: PathSubmission, idempotency_key: str | None) -> JobRecord:
        spec = self._resolve_path(submission)
        return self._idempotent(idempotency_key, submission.model_dump(mode="json"),
                                lambda: self._submit_resolved(spec, submission.grid))

    def _submit_resolved(self, spec: PathJobSpec, grid: Grid | None) -> JobRecord:
        if grid is None:
            return self._enqueue_new("path", spec)
        train = None
        if spec.recipe is not None and self.forests.find(spec.forest_id) is None:
            train = self._enqueue_new("train", TrainJobSpec(forest_id=spec.forest_id, recipe=spec.recipe))
        parent_id = new_job_id()
        cells = [self._enqueue_new("path", spec.model_copy(update={"path": spec.path.replace(
                     gamma=gamma, fusion_ratio=ratio, lambda_f=None)}), parent_id=parent_id,
                     depends_on=[train.rq_job_id] if train else None)
                 for gamma in grid.gamma for ratio in grid.fusion_ratio]
        return self._enqueue_new("grid", GridJobSpec(**dict(spec), grid=grid), job_id=parent_id,
                                 cells=[cell.id for cell in cells], depends_on=[cell.rq_job_id for cell in cells])

    def _resolve_path(self, submission: PathSubmission) -> PathJobSpec:
        dataset = self.datasets.get(submission.dataset_id)
        validation_id = submission.validation_dataset_id
        if validation_id is not None:
            self._check_validation_dataset(dataset, self.datasets.get(validation_id, "validation.dataset_id"))
        else:
            self._check_holdout(dataset, TrainingRows.for_path(submission.path, None))
        recipe = None
        if submission.forest_id is not None:
            forest = self.forests.get(submission.forest_id)
            check_forest_features(forest, dataset)
            check_forest_rows(forest, dataset.id, validation_id, submission.path)
            forest_id = forest.id
        else:
            self._check_training(dataset, submission.forest, "forest.")
            recipe = ForestRecipe(dataset_id=dataset.id, params=submission.forest,
                                  rows=TrainingRows.for_path(submission.path, validation_id))
            forest_id = recipe.forest_id
        return PathJobSpec(dataset_id=dataset.id, forest_id=forest_id, recipe=recipe,
                           validation_dataset_id=validation_id, path=submission.path)

    @staticmethod
    def _check_validation_dataset(dataset: DatasetInfo, validation: DatasetInfo) -> None:
        if validation.id == dataset.id:
            raise Invalid("The validation dataset is the training dataset.",
                          [FieldFault("validation.dataset_id", "same dataset as dataset_id",
                                      "validate on other rows: another dataset, or a held-out fraction")])
        if validation.columns != dataset.columns:
            raise Invalid("The validation dataset's columns differ from the training dataset's.",
                          [FieldFault("validation.dataset_id", "different columns or categories",
                                      "upload the validation rows with the same columns and target")])

    @staticmethod
    def _check_holdout(dataset: DatasetInfo, rows: TrainingRows) -> None:
        try:
            rows.select(dataset.n_rows)
        except SpecError as error:
            raise Invalid("The held-out fraction leaves too few validation or training rows.",
                          [FieldFault("validation.fraction", error.detail,
                                      "choose a fraction that keeps rows on both sides")]) from error

    @staticmethod
    def _check_training(dataset: DatasetInfo, params: ForestSpec, prefix: str) -> None:
        try:
            params.check_data(dataset.n_features, bool(dataset.missing_values))
        except SpecError as error:
            raise Invalid("These forest settings cannot train on this dataset.",
                          [FieldFault(prefix + error.field, error.detail,
                                      f"change {prefix + error.field} to suit the dataset")]) from error

    def _idempotent(self, key: str | None, request: dict, submit: Callable[[], JobRecord]) -> JobRecord:
        if key is None:
            return submit()
        fingerprint = canonical_hash(request)
        idem_key = f"{self.settings.key_prefix}idempotency:{canonical_hash(key)}"
        claimed = self.redis.set(idem_key, json.dumps({"fingerprint": fingerprint, "job_id": None}), nx=True,
                                 ex=IDEMPOTENCY_CLAIM_SECONDS)
        if not claimed:
            stored = json.loads(self.redis.get(idem_key) or b'{"fingerprint": null, "job_id": null}')
            if stored["fingerprint"] != fingerprint:
                raise IdempotencyKeyReused()
            if stored["job_id"] is None:
                raise Conflict("The first request with this idempotency key is still being submitted.",
                               [FieldFault("idempotency_key", "in progress", "retry in a moment")], retry_after=1)
            return self.get(stored["job_id"])
        try:
            record = submit()
        except Exception:
            self.redis.delete(idem_key)
            raise
        self.redis.set(idem_key, json.dumps({"fingerprint": fingerprint, "job_id": record.id}),
                       ex=self.settings.result_ttl_seconds)
        return record

    def _enqueue_new(self, kind: JobKind, spec: JobSpec, *, job_id: str | None = None, parent_id: str | None = None,
                     cells: list[str] | None = None, depends_on: list[str] | None = None) -> JobRecord:
        job_id = job_id or new_job_id()
        created = now()
        record = JobRecord(id=job_id, kind=kind, status=QUEUED, attempt=1, spec=spec, queue=self.queue.name,
                           rq_job_id=rq_job_id(job_id, 1), parent_id=parent_id, cells=cells, created_at=created,
                           queued_at=created, progress=Progress(phase="queued"))
        self.records.create(record)
        self.enqueue(record, depends_on)
        return record

    def enqueue(self, record: JobRecord, depends_on: list[str] | None = None) -> None:
        """Queue one run of a job on the queue it was submitted to (retries stay with their workers)."""
        make_queue(record.queue, self.redis).enqueue(
            TASKS[record.kind], record.id, record.attempt,
            job_id=record.rq_job_id,
            job_timeout=self.settings.job_timeout + 120,  # the path stops at its own deadline first
            result_ttl=3600, failure_ttl=self.settings.result_ttl_seconds,
            depends_on=Dependency(jobs=depends_on, allow_failure=True) if depends_on else None,
        )

    # ---- reading ----------------------------------------------------------------------------------------

    def get(self, job_id: str, field: str = "job_id") -> JobRecord:
        record = self.records.get(job_id)
        if record is None:
            raise NotFound("job", job_id, field)
        return self.reconcile(record)

    def list(self, limit: int = 100) -> list[JobRecord]:
        records = self.records.get_many(self.records.recent_ids(limit))
        return [self.reconcile(r) for r in records if r is not None]

    def reconcile(self, record: JobRecord) -> JobRecord:
        """Detect a job whose worker died: retry it once more, or fail it with the reason."""
        reason = self._lost_reason(record)
        if reason is None:
            return record
        job_id, attempt = record.id, record.attempt
        history = record.history + [LostAttempt(attempt=attempt, lost_at=now(), reason=reason)]
        if attempt < self.settings.max_job_attempts:
            retry = {"attempt": attempt + 1, "rq_job_id": rq_job_id(job_id, attempt + 1), "status": QUEUED,
                     "queued_at": now(), "started_at": None, "history": history,
                     "progress": Progress(phase="queued", retry_of_attempt=attempt)}
            if self.records.transition(job_id, ACTIVE, attempt, **retry):
                self.enqueue(record.model_copy(update=retry))
        else:
            self.records.transition(job_id, ACTIVE, attempt, status=FAILED, finished_at=now(), history=history,
                                    error=JobError(type="worker_lost", detail=f"{reason}; tried {attempt} times"))
        return self.records.get(job_id)

    def _lost_reason(self, record: JobRecord) -> str | None:
        if record.status == RUNNING:
            if self.records.heartbeat_alive(record.id):
                return None
            if now() - (record.started_at or now()) < self.settings.heartbeat_ttl_seconds:
                return None
            return "the worker running this job stopped sending heartbeats (killed or crashed)"
        if record.status == QUEUED:
            try:
                rq_status = Job.fetch(record.rq_job_id, connection=self.redis, serializer=JSONSerializer).get_status()
            except NoSuchJobError:
                return "the queued job vanished from the queue"
            if rq_status in _RQ_LOST:
                return f"the worker ended the job before it started ({rq_status})"
        return None

    def watch_running(self) -> int:
        """One watchdog pass over recent active jobs; returns how many it had to recover."""
        recovered = 0
        for record in self.records.get_many(self.records.recent_ids(1000)):
            if record is not None and record.status in ACTIVE:
                after = self.reconcile(record)
                recovered += (after.attempt, after.status) != (record.attempt, record.status)
        return recovered

    def result(self, job_id: str, field: str = "job_id") -> JobResult:
        record = self.get(job_id, field)
        if record.status != SUCCEEDED:
            raise Conflict(f"Job {job_id} is {record.status}: no result yet.",
                           [FieldFault(field, f"status {record.status}",
                                       "wait for status succeeded (poll the job or follow its events)")],
                           retry_after=1 if record.status in ACTIVE else None)
        result = self.results.get(job_id)
        if result is None:
            raise Expired(f"The result of job {job_id} has expired.",
                          [FieldFault(field, "expired", "run the job again")])
        return result

    def path_result(self, job_id: str, field: str = "job_id") -> PathJobResult | GridJobResult:
        result = self.result(job_id, field)
        if not isinstance(result, PathJobResult):
            raise Invalid("A training job has no path steps.",
                          [FieldFault(field, "training job", "use the id of a path or grid job")])
        return result

    def step_rules(self, job_id: str, step: int, field: str = "job_id") -> tuple[PathJobResult, RuleEnsemble]:
        """(result, rules of that step) of a succeeded path or grid job."""
        result = self.path_result(job_id, field)
        if not 0 <= step < len(result.steps):
            raise NotFound("step", step, "step", f"use a step in 0..{len(result.steps) - 1}")
        stored = self.results.step_weights(result.source_job_id, step)
        if stored is None:
            raise Expired(f"The weights of job {job_id} have expired.",
                          [FieldFault(field, "expired", "run the job again")])
        weights, intercept = stored
        return result, RuleEnsemble.from_weights(self.forests.load(result.forest_id), weights, intercept)

    # ---- cancellation -----------------------------------------------------------------------------------

    def cancel(self, job_id: str) -> JobRecord:
        record = self.get(job_id)
        if record.status in TERMINAL:
            raise Conflict(f"Job {job_id} already {record.status}.",
                           [FieldFault("job_id", f"status {record.status}", "nothing to cancel")])
        for cell_id in record.cells or []:
            cell = self.records.get(cell_id)
            if cell is not None and cell.status in ACTIVE:
                self._cancel_one(cell)
        self._cancel_one(record)
        return self.records.get(job_id)

    def _cancel_one(self, record: JobRecord) -> None:
        self.records.request_cancel(record.id)  # the path callback sees it within one step
        if not self.records.transition(record.id, ACTIVE, status=CANCELED, finished_at=now(),
                                       progress=record.progress.model_copy(update={"phase": "canceled"})):
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
            rq_job.cancel(enqueue_dependents=True)


def new_job_id() -> str:
    return "job_" + uuid.uuid4().hex[:24]
