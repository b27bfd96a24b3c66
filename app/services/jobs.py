"""Job submission, status, cancellation and lost-worker recovery; the work itself runs in worker/tasks.py."""
import hashlib
import json
import uuid

import numpy as np
from redis import Redis
from rq import Queue
from rq.command import send_stop_job_command
from rq.exceptions import InvalidJobOperation, NoSuchJobError
from rq.job import Dependency, Job, JobStatus
from rq.serializers import JSONSerializer

from app.core.config import Settings
from app.errors import ProblemError, field_error, not_found
from app.schemas import PathJobRequest, TrainForestRequest
from app.services.blobs import BlobStore
from app.services.datasets import DatasetStore
from app.services.forests import ForestStore, check_forest_features, training_forest_id
from app.services.job_records import (ACTIVE, CANCELED, FAILED, QUEUED, RUNNING, SUCCEEDED, TERMINAL,
                                      JobRecords, now)

TASKS = {"train": "worker.tasks.train_forest", "path": "worker.tasks.run_path", "grid": "worker.tasks.collect_grid"}
PATH_PARAMETERS = ("penalty", "gamma", "lambda_f", "fusion_ratio", "n_lambdas", "lambda_min_ratio", "lambdas",
                   "max_rules", "tol")
_RQ_LOST = {JobStatus.FAILED, JobStatus.STOPPED, JobStatus.CANCELED}
IDEMPOTENCY_CLAIM_SECONDS = 60  # a submission that dies half-way frees its key after this


def make_queue(name: str, redis: Redis) -> Queue:
    return Queue(name, connection=redis, serializer=JSONSerializer)


def rq_job_id(job_id: str, attempt: int, continuation: int = 0) -> str:
    """RQ id of one run of a FIRE job; a grid parent re-queued behind retried cells gets a continuation."""
    return f"{job_id}-{attempt}" + (f"c{continuation}" if continuation else "")


class JobService:
    def __init__(self, settings: Settings, redis: Redis, blobs: BlobStore, datasets: DatasetStore,
                 forests: ForestStore, records: JobRecords):
        self.settings = settings
        self.redis = redis
        self.blobs = blobs
        self.datasets = datasets
        self.forests = forests
        self.records = records
        self.queue = make_queue(settings.queue_name, redis)

    # ---- submission -------------------------------------------------------------------------------------

    def submit_training(self, request: TrainForestRequest, idempotency_key: str | None) -> dict:
        dataset = self.datasets.get(request.dataset_id)
        params = request.model_dump(exclude={"dataset_id"})
        self._check_training(dataset, params, "body")
        return self._idempotent(idempotency_key, request.model_dump(), lambda: self._enqueue_new(
            "train", {"dataset_id": dataset["id"], "forest_id": training_forest_id(dataset["id"], params),
                      "training": params}))

    def submit_path(self, request: PathJobRequest, idempotency_key: str | None) -> dict:
        spec = self._resolve_path_spec(request)
        return self._idempotent(idempotency_key, request.model_dump(), lambda: self._submit_resolved(spec, request))

    def _submit_resolved(self, spec: dict, request: PathJobRequest) -> dict:
        needs_training = spec["training"] is not None and self.forests.find(spec["forest_id"]) is None
        if request.grid is None:
            return self._enqueue_new("path", spec)
        train = self._enqueue_new("train", {key: spec[key] for key in ("dataset_id", "forest_id", "training")}) \
            if needs_training else None
        cells = []
        parent_id = new_job_id()
        for gamma in request.grid.gamma:
            for ratio in request.grid.fusion_ratio:
                cell_spec = {**spec, "gamma": gamma, "fusion_ratio": ratio, "lambda_f": None}
                cells.append(self._enqueue_new("path", cell_spec, parent_id=parent_id,
                                               depends_on=[train["rq_job_id"]] if train else None))
        grid_spec = {**spec, "grid": request.grid.model_dump()}
        return self._enqueue_new("grid", grid_spec, job_id=parent_id, cells=[c["id"] for c in cells],
                                 depends_on=[c["rq_job_id"] for c in cells])

    def _resolve_path_spec(self, request: PathJobRequest) -> dict:
        dataset = self.datasets.get(request.dataset_id)
        if request.forest_id is not None:
            forest = self.forests.get(request.forest_id)
            check_forest_features(forest, dataset)
            forest_id, training = forest["id"], None
        else:
            training = request.forest.model_dump()
            self._check_training(dataset, training, "forest")
            forest_id = training_forest_id(dataset["id"], training)
        validation = request.validation.model_dump()
        if validation["dataset_id"] is not None:
            validation_dataset = self.datasets.get(validation["dataset_id"])
            if validation_dataset["columns"] != dataset["columns"]:
                raise ProblemError(422, "The validation dataset's columns differ from the training dataset's.",
                                   [field_error("validation.dataset_id", "different columns or categories",
                                                "upload the validation rows with the same columns and target")])
        elif round(dataset["n_rows"] * validation["fraction"]) < 1 or \
                dataset["n_rows"] - round(dataset["n_rows"] * validation["fraction"]) < 2:
            raise ProblemError(422, "The held-out fraction leaves no validation or training rows.",
                               [field_error("validation.fraction", f"{dataset['n_rows']} rows",
                                            "choose a fraction that keeps rows on both sides")])
        return {"dataset_id": dataset["id"], "forest_id": forest_id, "training": training,
                "validation": validation, **{name: getattr(request, name) for name in PATH_PARAMETERS}}

    @staticmethod
    def _check_training(dataset: dict, params: dict, field: str) -> None:
        if params["kind"] == "gradient_boosting" and dataset["missing_values"]:
            raise ProblemError(422, "Gradient boosting cannot train on missing values.",
                               [field_error(f"{field}.kind", f"missing values in {sorted(dataset['missing_values'])}",
                                            "use random_forest or extra_trees, or fill the missing values")])
        if isinstance(params["max_features"], int) and params["max_features"] > dataset["n_features"]:
            raise ProblemError(422, "max_features exceeds the number of features.",
                               [field_error(f"{field}.max_features", f"{params['max_features']} > "
                                            f"{dataset['n_features']}", "use at most the number of features")])

    def _idempotent(self, key: str | None, request_body: dict, submit) -> dict:
        if key is None:
            return submit()
        fingerprint = hashlib.sha256(json.dumps(request_body, sort_keys=True).encode()).hexdigest()
        idem_key = f"{self.settings.key_prefix}idempotency:{hashlib.sha256(key.encode()).hexdigest()}"
        claimed = self.redis.set(idem_key, json.dumps({"fingerprint": fingerprint, "job_id": None}), nx=True,
                                 ex=IDEMPOTENCY_CLAIM_SECONDS)
        if not claimed:
            stored = json.loads(self.redis.get(idem_key) or b'{"fingerprint": null, "job_id": null}')
            if stored["fingerprint"] != fingerprint:
                raise ProblemError(422, "This Idempotency-Key was used for a different request.",
                                   [field_error("header.Idempotency-Key", "reused with another body",
                                                "use a new key for a new request")])
            if stored["job_id"] is None:
                raise ProblemError(409, "The first request with this Idempotency-Key is still being submitted.",
                                   [field_error("header.Idempotency-Key", "in progress", "retry in a moment")],
                                   headers={"Retry-After": "1"})
            return self.get(stored["job_id"])
        try:
            record = submit()
        except Exception:
            self.redis.delete(idem_key)
            raise
        self.redis.set(idem_key, json.dumps({"fingerprint": fingerprint, "job_id": record["id"]}),
                       ex=self.settings.result_ttl_seconds)
        return record

    def _enqueue_new(self, kind: str, spec: dict, *, job_id: str | None = None, parent_id: str | None = None,
                     cells: list[str] | None = None, depends_on: list[str] | None = None) -> dict:
        record = {
            "id": job_id or new_job_id(), "kind": kind, "status": QUEUED, "attempt": 1, "spec": spec,
            "queue": self.queue.name,
            "parent_id": parent_id, "cells": cells, "created_at": now(), "queued_at": now(),
            "started_at": None, "finished_at": None, "progress": {"phase": "queued"}, "timings": {},
            "error": None, "cache_hit": None, "summary": None, "history": [],
        }
        record["rq_job_id"] = rq_job_id(record["id"], 1)
        self.records.create(record)
        self.enqueue(record, depends_on)
        return record

    def enqueue(self, record: dict, depends_on: list[str] | None = None) -> None:
        """Queue one run of a job on the queue it was submitted to (retries stay with their workers)."""
        make_queue(record["queue"], self.redis).enqueue(
            TASKS[record["kind"]], record["id"], record["attempt"],
            job_id=record["rq_job_id"],
            job_timeout=self.settings.job_timeout + 120,  # the path stops at its own deadline first
            result_ttl=3600, failure_ttl=self.settings.result_ttl_seconds,
            depends_on=Dependency(jobs=depends_on, allow_failure=True) if depends_on else None,
        )

    # ---- reading ----------------------------------------------------------------------------------------

    def get(self, job_id: str) -> dict:
        record = self.records.get(job_id)
        if record is None:
            raise not_found("job", job_id)
        return self.reconcile(record)

    def list(self, limit: int = 100) -> list[dict]:
        records = self.records.get_many(self.records.recent_ids(limit))
        return [self.reconcile(r) for r in records if r is not None]

    def reconcile(self, record: dict) -> dict:
        """Detect a job whose worker died: retry it once more, or fail it with the reason."""
        reason = self._lost_reason(record)
        if reason is None:
            return record
        job_id, attempt = record["id"], record["attempt"]
        history = record["history"] + [{"attempt": attempt, "lost_at": now(), "reason": reason}]
        if attempt < self.settings.max_job_attempts:
            retried = {**record, "attempt": attempt + 1, "rq_job_id": rq_job_id(job_id, attempt + 1),
                       "status": QUEUED, "queued_at": now(), "started_at": None, "history": history,
                       "progress": {"phase": "queued", "retry_of_attempt": attempt}}
            if self.records.transition(job_id, ACTIVE, attempt, **{k: retried[k] for k in (
                    "attempt", "rq_job_id", "status", "queued_at", "started_at", "history", "progress")}):
                self.enqueue(retried)
        else:
            self.records.transition(job_id, ACTIVE, attempt, status=FAILED, finished_at=now(), history=history,
                                    error={"type": "worker_lost", "detail": f"{reason}; tried {attempt} times"})
        return self.records.get(job_id)

    def _lost_reason(self, record: dict) -> str | None:
        if record["status"] == RUNNING:
            if self.records.heartbeat_alive(record["id"]):
                return None
            if now() - (record["started_at"] or now()) < self.settings.heartbeat_ttl_seconds:
                return None
            return "the worker running this job stopped sending heartbeats (killed or crashed)"
        if record["status"] == QUEUED:
            try:
                rq_status = Job.fetch(record["rq_job_id"], connection=self.redis,
                                      serializer=JSONSerializer).get_status()
            except NoSuchJobError:
                return "the queued job vanished from the queue"
            if rq_status in _RQ_LOST:
                return f"the worker ended the job before it started ({rq_status})"
        return None

    def watch_running(self) -> int:
        """One watchdog pass over recent active jobs; returns how many it had to recover."""
        recovered = 0
        for record in self.records.get_many(self.records.recent_ids(1000)):
            if record is not None and record["status"] in ACTIVE:
                after = self.reconcile(record)
                recovered += (after["attempt"], after["status"]) != (record["attempt"], record["status"])
        return recovered

    def result(self, job_id: str) -> dict:
        record = self.get(job_id)
        if record["status"] != SUCCEEDED:
            raise ProblemError(409, f"Job {job_id} is {record['status']}: no result yet.",
                               [field_error("path.id", f"status {record['status']}",
                                            "wait for status succeeded (poll the job or stream its events)")],
                               headers={"Retry-After": "1"} if record["status"] in ACTIVE else None)
        result = self.blobs.get_json(self.records.result_key(job_id))
        if result is None:
            raise ProblemError(410, f"The result of job {job_id} has expired.",
                               [field_error("path.id", "expired", "run the job again")])
        return result

    def step_weights(self, job_id: str, step: int) -> tuple[dict, np.ndarray, float]:
        """(result, weights of that step (R,), intercept) of a succeeded path or grid job."""
        result = self.result(job_id)
        if result.get("kind") == "train":
            raise ProblemError(422, "A training job has no path steps.",
                               [field_error("path.id", "training job", "use a path job's id")])
        if not 0 <= step < len(result["steps"]):
            raise ProblemError(404, f"Job {job_id} has steps 0..{len(result['steps']) - 1}.",
                               [field_error("path.step", f"no step {step}",
                                            f"use a step in 0..{len(result['steps']) - 1}")])
        arrays = self.blobs.get_arrays(self.records.coefs_key(result["source_job_id"]))
        if arrays is None:
            raise ProblemError(410, f"The weights of job {job_id} have expired.",
                               [field_error("path.id", "expired", "run the job again")])
        start, stop = arrays["indptr"][step], arrays["indptr"][step + 1]
        weights = np.zeros(int(arrays["n_leaves"]))
        weights[arrays["indices"][start:stop]] = arrays["data"][start:stop]
        return result, weights, float(arrays["intercepts"][step])

    def step_rules(self, job_id: str, step: int):
        from solver.rules import RuleEnsemble

        result, weights, intercept = self.step_weights(job_id, step)
        forest = self.forests.load(result["forest_id"])
        return result, RuleEnsemble.from_weights(forest, weights, intercept)

    # ---- cancellation -----------------------------------------------------------------------------------

    def cancel(self, job_id: str) -> dict:
        record = self.get(job_id)
        if record["status"] in TERMINAL:
            raise ProblemError(409, f"Job {job_id} already {record['status']}.",
                               [field_error("path.id", f"status {record['status']}", "nothing to cancel")])
        for cell_id in record["cells"] or []:
            cell = self.records.get(cell_id)
            if cell is not None and cell["status"] in ACTIVE:
                self._cancel_one(cell)
        self._cancel_one(record)
        return self.records.get(job_id)

    def _cancel_one(self, record: dict) -> None:
        job_id = record["id"]
        self.records.request_cancel(job_id)  # the path callback sees it within one step
        if not self.records.transition(job_id, ACTIVE, status=CANCELED, finished_at=now(),
                                       progress={**record["progress"], "phase": "canceled"}):
            return
        try:
            rq_job = Job.fetch(record["rq_job_id"], connection=self.redis, serializer=JSONSerializer)
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
