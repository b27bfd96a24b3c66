"""Job submission, status, cancellation and lost-worker recovery; the work itself runs in worker/tasks.py."""
import uuid
from typing import Literal

from pydantic import Field
from redis import Redis
from rq.command import send_stop_job_command
from rq.exceptions import InvalidJobOperation, NoSuchJobError
from rq.job import Dependency, Job, JobStatus
from rq.serializers import JSONSerializer

from app.core.blobs import Document
from app.core.config import Settings
from app.core.datasets import DatasetInfo, DatasetStore
from app.core.errors import Conflict, Expired, FieldFault, Invalid, NotFound, TooMany
from app.core.forests import ForestRecipe, ForestStore, TrainingRows, check_forest_features, check_forest_rows
from app.core.job_documents import (ACTIVE, CANCELED, FAILED, QUEUED, RUNNING, SUCCEEDED, TERMINAL,
                                    GridJobResult, GridJobSpec, Grid, JobError, JobKind,
                                    JobRecord, JobResult, JobSpec, LostAttempt, PathJobResult, PathJobSpec,
                                    Progress, TrainJobSpec)
from app.core.idempotency import IdempotencyKeys
from app.core.queues import TASKS, make_queue, rq_job_id
from app.core.records import JobRecords, now
from app.core.results import ResultStore
from solver import RuleEnsemble
from solver.spec import LOSSES, ForestSpec, PathSpec, SpecError

_RQ_LOST = {JobStatus.FAILED, JobStatus.STOPPED, JobStatus.CANCELED}
# RQ's own alarm in the work horse fires this long after FIRE_JOB_TIMEOUT: it stops a phase that has no
# step callback (training a forest, building the matrix) within about that much of the deadline.
DEADLINE_GRACE_SECONDS = 5
BUSY_RETRY_AFTER_SECONDS = 5


class PathSubmission(Document):
    """A path job as submitted: the forest by id or by training parameters, validation rows from another
    dataset or held out of this one (``path.validation_fraction``, ``path.random_state``)."""

    dataset_id: str
    forest_id: str | None = None
    forest: ForestSpec | None = None
    validation_dataset_id: str | None = None
    path: PathSpec = Field(description="path.loss is replaced by ``loss`` or the dataset's task's loss")
    loss: Literal[LOSSES] | None = Field(None, description=(
        "the path's loss as asked for; None: the dataset's task's (logistic for classification, squared for "
        "regression)"))
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
        self.idempotency = IdempotencyKeys(settings, redis)
        self.queue = make_queue(settings.queue_name, redis)

    # ---- submission -------------------------------------------------------------------------------------

    def submit_training(self, dataset_id: str, params: ForestSpec, rows: TrainingRows, idempotency_key: str | None,
                        *, tenant: str) -> JobRecord:
        """Train ``params`` on these rows of the dataset (the training side of the split later paths use)."""
        self._check_forest_limits(params, "")
        dataset = self.datasets.get(dataset_id, tenant=tenant)
        self._check_training(dataset, params, "")
        self._check_holdout(dataset, rows)
        recipe = ForestRecipe(dataset_id=dataset.id, params=params, rows=rows, loss=dataset.loss)
        spec = TrainJobSpec(forest_id=recipe.forest_id, recipe=recipe)
        return self._submit_once(tenant, idempotency_key, spec.model_dump(mode="json"),
                                 lambda job_id: self._enqueue_new("train", spec, tenant, job_id=job_id, admit=True))

    def submit_path(self, submission: PathSubmission, idempotency_key: str | None, *, tenant: str) -> JobRecord:
        self._check_path_limits(submission)
        spec = self._resolve_path(submission, tenant)
        return self._submit_once(tenant, idempotency_key, submission.model_dump(mode="json"),
                                 lambda job_id: self._submit_resolved(spec, submission.grid, tenant, job_id))

    def _submit_once(self, tenant: str, key: str | None, request: dict, submit) -> JobRecord:
        return self.idempotency.once(tenant=tenant, kind="job", key=key, request=request, new_id=new_job_id(),
                                     create=submit, find=lambda job_id: self._find(job_id, tenant))

    def _submit_resolved(self, spec: PathJobSpec, grid: Grid | None, tenant: str, job_id: str) -> JobRecord:
        if grid is None:
            return self._enqueue_new("path", spec, tenant, job_id=job_id, admit=True)
        self._admit(tenant, job_id)  # a grid counts once, however many cells it has
        train = None
        if spec.recipe is not None and self.forests.find(spec.forest_id) is None:
            train = self._enqueue_new("train", TrainJobSpec(forest_id=spec.forest_id, recipe=spec.recipe), tenant)
        cells = [self._enqueue_new("path", spec.model_copy(update={"path": spec.path.replace(
                     gamma=gamma, fusion_ratio=ratio, lambda_f=None)}), tenant, parent_id=job_id,
                     depends_on=[train.rq_job_id] if train else None)
                 for gamma in grid.gamma for ratio in grid.fusion_ratio]
        return self._enqueue_new("grid", GridJobSpec(**dict(spec), grid=grid), tenant, job_id=job_id,
                                 cells=[cell.id for cell in cells], depends_on=[cell.rq_job_id for cell in cells])

    def _admit(self, tenant: str, job_id: str) -> None:
        limit = self.settings.max_active_jobs
        if not self.records.admit(tenant, job_id, limit):
            raise TooMany(f"You have {limit} jobs queued or running, the most allowed at once.",
                          [FieldFault("tenant", f"{limit} active jobs", "wait for one to finish (or cancel one), "
                                                                       "or raise FIRE_MAX_ACTIVE_JOBS")],
                          retry_after=BUSY_RETRY_AFTER_SECONDS)

    def _check_path_limits(self, submission: PathSubmission) -> None:
        settings, path = self.settings, submission.path
        steps = path.n_steps
        if steps > settings.max_lambdas:
            field = "lambdas" if path.lambdas else "n_lambdas"
            raise Invalid(f"A path may have at most {settings.max_lambdas} steps.",
                          [FieldFault(field, f"{steps} steps", f"ask for at most {settings.max_lambdas} "
                                                               "(FIRE_MAX_LAMBDAS)")])
        if submission.grid is not None:
            cells = len(submission.grid.gamma) * len(submission.grid.fusion_ratio)
            if cells > settings.max_grid_cells:
                raise Invalid(f"A grid may have at most {settings.max_grid_cells} cells.",
                              [FieldFault("grid", f"{cells} cells", f"ask for at most {settings.max_grid_cells} "
                                                                    "gamma x fusion_ratio cells (FIRE_MAX_GRID_CELLS)")])
        if submission.forest is not None:
            self._check_forest_limits(submission.forest, "forest.")

    def _check_forest_limits(self, params: ForestSpec, prefix: str) -> None:
        for name, limit, setting in (("n_estimators", self.settings.max_trees, "FIRE_MAX_TREES"),
                                     ("max_depth", self.settings.max_tree_depth, "FIRE_MAX_TREE_DEPTH")):
            value = getattr(params, name)
            if value is not None and value > limit:
                raise Invalid(f"{name} may be at most {limit}.",
                              [FieldFault(prefix + name, f"{value} is more than {limit}",
                                          f"ask for at most {limit} ({setting})")])

    def _resolve_path(self, submission: PathSubmission, tenant: str) -> PathJobSpec:
        dataset = self.datasets.get(submission.dataset_id, tenant=tenant)
        path = submission.path.replace(loss=self._path_loss(dataset, submission.loss))
        validation_id = submission.validation_dataset_id
        if validation_id is not None:
            self._check_validation_dataset(dataset, self.datasets.get(validation_id, tenant=tenant,
                                                                      field="validation.dataset_id"))
        else:
            self._check_holdout(dataset, TrainingRows.for_path(submission.path, None))
        recipe = None
        if submission.forest_id is not None:
            forest = self.forests.get(submission.forest_id, tenant=tenant)
            check_forest_features(forest, dataset)
            check_forest_rows(forest, dataset.id, validation_id, submission.path)
            forest_id = forest.id
        else:
            self._check_training(dataset, submission.forest, "forest.")
            recipe = ForestRecipe(dataset_id=dataset.id, params=submission.forest,
                                  rows=TrainingRows.for_path(submission.path, validation_id), loss=path.loss)
            forest_id = recipe.forest_id
        return PathJobSpec(dataset_id=dataset.id, forest_id=forest_id, recipe=recipe,
                           validation_dataset_id=validation_id, path=path)

    @staticmethod
    def _path_loss(dataset: DatasetInfo, asked: str | None) -> str:
        """The loss asked for, or the dataset's task's. A logistic loss needs a classification dataset (a squared
        loss on a classification dataset's 0/1 target is allowed when asked for)."""
        if asked is None:
            return dataset.loss
        if asked == "logistic" and dataset.task != "classification":
            raise Invalid("A logistic loss needs a classification dataset.",
                          [FieldFault("loss", f"dataset {dataset.id} is a {dataset.task} dataset",
                                      "use loss squared (or leave loss out), or upload the table with "
                                      "task=classification if its target has two labels")])
        return asked

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
        if (validation.task, validation.classes) != (dataset.task, dataset.classes):
            raise Invalid("The validation dataset's target differs from the training dataset's.",
                          [FieldFault("validation.dataset_id", f"{validation.task} {validation.classes or ''} "
                                                               f"against {dataset.task} {dataset.classes or ''}",
                                      "upload the validation rows with the same task and target labels")])

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
            params.check_data(dataset.n_features, dataset.has_missing_features)
        except SpecError as error:
            raise Invalid("These forest settings cannot train on this dataset.",
                          [FieldFault(prefix + error.field, error.detail,
                                      f"change {prefix + error.field} to suit the dataset")]) from error

    def _enqueue_new(self, kind: JobKind, spec: JobSpec, tenant: str, *, job_id: str | None = None,
                     parent_id: str | None = None, cells: list[str] | None = None,
                     depends_on: list[str] | None = None, admit: bool = False) -> JobRecord:
        """Record and queue a job; ``admit``: a submission of its own, counted against the tenant's limit."""
        job_id = job_id or new_job_id()
        if admit:
            self._admit(tenant, job_id)
        created = now()
        record = JobRecord(id=job_id, tenant=tenant, kind=kind, status=QUEUED, attempt=1, spec=spec,
                           queue=self.queue.name,
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
            job_timeout=self.settings.job_timeout + DEADLINE_GRACE_SECONDS,  # a path stops at its deadline first
            result_ttl=3600, failure_ttl=self.settings.result_ttl_seconds,
            depends_on=Dependency(jobs=depends_on, allow_failure=True) if depends_on else None,
        )

    # ---- reading ----------------------------------------------------------------------------------------

    def read(self, job_id: str) -> JobRecord:
        """A job whoever owns it (for the workers and the watchdog)."""
        record = self.records.get(job_id)
        if record is None:
            raise NotFound("job", job_id)
        return self.reconcile(record)

    def _find(self, job_id: str, tenant: str) -> JobRecord | None:
        record = self.records.get(job_id)
        return None if record is None or record.tenant != tenant else record

    def get(self, job_id: str, *, tenant: str, field: str = "job_id") -> JobRecord:
        """The tenant's job; another tenant's is not found."""
        record = self._find(job_id, tenant)
        if record is None:
            raise NotFound("job", job_id, field)
        return self.reconcile(record)

    def using(self, tenant: str, *, dataset_id: str | None = None, forest_id: str | None = None) -> list[JobRecord]:
        """The tenant's queued or running submissions that read this dataset or forest."""
        def uses(spec) -> bool:
            datasets = {getattr(spec, "dataset_id", None), getattr(spec, "validation_dataset_id", None),
                        spec.recipe.dataset_id if spec.recipe else None}
            return (dataset_id is not None and dataset_id in datasets) or (forest_id is not None
                                                                           and spec.forest_id == forest_id)
        return [record for record in map(self.reconcile, self.records.active(tenant))
                if record.status in ACTIVE and uses(record.spec)]

    def list(self, *, tenant: str, limit: int = 100) -> list[JobRecord]:
        return [self.reconcile(record) for record in self.records.recent(tenant, limit)]

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
        if record.status == QUEUED and now() - record.queued_at >= self.settings.heartbeat_ttl_seconds:
            # (a job queued moments ago has not vanished: this spares a poll a read of RQ's job)
            try:
                rq_status = Job.fetch(record.rq_job_id, connection=self.redis, serializer=JSONSerializer).get_status()
            except NoSuchJobError:
                return "the queued job vanished from the queue"
            if rq_status in _RQ_LOST:
                return f"the worker ended the job before it started ({rq_status})"
        return None

    def watch_running(self) -> int:
        """One watchdog pass over the queued and running jobs; returns how many it had to recover."""
        recovered = 0
        for record in self.records.unfinished():
            after = self.reconcile(record)
            recovered += (after.attempt, after.status) != (record.attempt, record.status)
        return recovered

    def result(self, job_id: str, *, tenant: str, field: str = "job_id") -> JobResult:
        record = self.get(job_id, tenant=tenant, field=field)
        if record.status != SUCCEEDED:
            raise Conflict(f"Job {job_id} is {record.status}: it has no result" + (" yet." if record.status in ACTIVE
                                                                                  else "."),
                           [FieldFault(field, f"status {record.status}", _NO_RESULT_FIX[record.status])],
                           retry_after=1 if record.status in ACTIVE else None)
        return self.stored_result(job_id, field)

    def stored_result(self, job_id: str, field: str = "job_id") -> JobResult:
        """The result of a succeeded job whoever owns it (a grid's best cell, read for its parent)."""
        result = self.results.get(job_id)
        if result is None:
            raise Expired(f"The result of job {job_id} has expired.",
                          [FieldFault(field, "expired", "run the job again")])
        return result

    def path_result(self, job_id: str, *, tenant: str, field: str = "job_id") -> PathJobResult | GridJobResult:
        result = self.result(job_id, tenant=tenant, field=field)
        if not isinstance(result, PathJobResult):
            raise Invalid("A training job has no path steps.",
                          [FieldFault(field, "training job", "use the id of a path or grid job")])
        return result

    def step_rules(self, job_id: str, step: int, *, tenant: str,
                   field: str = "job_id") -> tuple[PathJobResult, RuleEnsemble]:
        """(result, rules of that step) of a succeeded path or grid job."""
        result = self.path_result(job_id, tenant=tenant, field=field)
        if not 0 <= step < len(result.steps):
            raise NotFound("step", step, "step", f"use a step in 0..{len(result.steps) - 1}")
        stored = self.results.step_weights(result.source_job_id, step)
        if stored is None:
            raise Expired(f"The weights of job {job_id} have expired.",
                          [FieldFault(field, "expired", "run the job again")])
        weights, intercept = stored
        if self.forests.find(result.forest_id) is None:
            raise _deleted("forest", result.forest_id, job_id, field)
        if self.datasets.find(result.dataset_id) is None:
            raise _deleted("dataset", result.dataset_id, job_id, field)
        # as the library builds them (solver.fitting.fit_rules): in the table's columns, with the support and
        # threshold precision of the training rows
        X, _ = self.datasets.load_arrays(result.dataset_id)
        dataset = self.datasets.read(result.dataset_id)
        train_rows = TrainingRows.for_path(result.parameters.path, result.parameters.validation_dataset_id)
        return result, RuleEnsemble.from_weights(self.forests.load(result.forest_id), weights, intercept,
                                                 encoding=dataset.encoding, X=X[train_rows.select(len(X))],
                                                 response=dataset.response(result.parameters.path.loss))

    # ---- cancellation -----------------------------------------------------------------------------------

    def cancel(self, job_id: str, *, tenant: str) -> JobRecord:
        record = self.get(job_id, tenant=tenant)
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


def _deleted(kind: str, stored_id: str, job_id: str, field: str) -> Expired:
    return Expired(f"The {kind} of job {job_id} was deleted: its rules cannot be rebuilt.",
                   [FieldFault(field, f"{kind} {stored_id} deleted", "run the job again")])


_NO_RESULT_FIX = {
    QUEUED: "wait for status succeeded (poll the job or follow its events)",
    RUNNING: "wait for status succeeded (poll the job or follow its events)",
    FAILED: "the job failed: read its error, fix the cause and submit it again",
    CANCELED: "the job was canceled: submit it again for a result",
}


def new_job_id() -> str:
    return "job_" + uuid.uuid4().hex[:24]
