"""What a succeeded job produced: its stored result, a path's steps, and the rules of one step as its worker
built and stored them (``app.core.results``)."""

from app.core.errors import Conflict, Expired, FieldFault, Invalid, NotFound
from app.core.job_documents import ACTIVE, CANCELED, FAILED, QUEUED, RUNNING, SUCCEEDED
from app.core.job_lifecycle import JobLifecycle
from app.core.result_documents import JobResult, PathResultBase
from app.core.results import ResultStore
from solver import RuleEnsemble


class JobResults:
    def __init__(self, jobs: JobLifecycle, results: ResultStore):
        self.jobs = jobs
        self.results = results

    def result(self, job_id: str, *, tenant: str, field: str = "job_id") -> JobResult:
        record = self.jobs.get(job_id, tenant=tenant, field=field)
        if record.kind in ("batch", "batch_chunk"):  # its scored rows are chunks of a table, not a result document
            batch_id = getattr(record.spec, "batch_id", job_id)
            raise Invalid(
                f"Job {job_id} scores a batch: its rows are at the batch's result route.",
                [FieldFault(field, f"{record.kind} job", f"GET /v1/models/batch/{batch_id}/result")],
            )
        if record.status != SUCCEEDED:
            raise Conflict(
                f"Job {job_id} is {record.status}: it has no result" + (" yet." if record.status in ACTIVE else "."),
                [FieldFault(field, f"status {record.status}", _NO_RESULT_FIX[record.status])],
                retry_after=1 if record.status in ACTIVE else None,
            )
        return self.stored_result(job_id, field)

    def stored_result(self, job_id: str, field: str = "job_id") -> JobResult:
        """The result of a succeeded job whoever owns it (a grid's best cell, read for its parent)."""
        result = self.results.get(job_id)
        if result is None:
            raise Expired(
                f"The result of job {job_id} has expired.", [FieldFault(field, "expired", "run the job again")]
            )
        return result

    def path_result(self, job_id: str, *, tenant: str, field: str = "job_id") -> PathResultBase:
        result = self.result(job_id, tenant=tenant, field=field)
        if not isinstance(result, PathResultBase):
            raise Invalid(
                "A training job has no path steps.",
                [FieldFault(field, "training job", "use the id of a path or grid job")],
            )
        return result

    def step_rules(
        self, job_id: str, step: int, *, tenant: str, field: str = "job_id"
    ) -> tuple[PathResultBase, RuleEnsemble]:
        """(result, rules of that step) of a succeeded path or grid job: the rules its worker built and stored."""
        result = self.path_result(job_id, tenant=tenant, field=field)
        fold = result.parameters.fold
        if fold is not None:  # a fold's path chose nothing: its parent refits on every row and holds the rules
            raise Invalid(
                f"Job {job_id} is fold {fold} of a cross-validation: it stores the fold's path, not rules.",
                [FieldFault(field, f"fold {fold} of a cross-validated path", "use the id of its parent (the cv job)")],
            )
        if not 0 <= step < len(result.steps):
            raise NotFound("step", step, "step", f"use a step in 0..{len(result.steps) - 1}")
        ensemble = self.results.step_rules(result.source_job_id, step)
        if ensemble is None:
            raise Expired(
                f"The rules of job {job_id} are not stored: they expired, or the job ran before rules were stored "
                "with results.",
                [FieldFault(field, "no stored rules", "run the job again")],
            )
        return result, ensemble


_NO_RESULT_FIX = {
    QUEUED: "wait for status succeeded (poll the job or follow its events)",
    RUNNING: "wait for status succeeded (poll the job or follow its events)",
    FAILED: "the job failed: read its error, fix the cause and submit it again",
    CANCELED: "the job was canceled: submit it again for a result",
}
