"""What a succeeded job produced: its stored result, a path's steps, and the rules of one step rebuilt from the
stored weights, the forest and the training rows (as the library builds them: the same candidate terms as the
fit, ``solver.fitting.candidate_terms``, whose columns the weights index)."""

from app.core.datasets import DatasetStore
from app.core.errors import Conflict, Expired, FieldFault, Invalid, NotFound
from app.core.forests import ForestStore, ValidationSplit
from app.core.job_documents import (
    ACTIVE,
    CANCELED,
    FAILED,
    QUEUED,
    RUNNING,
    SUCCEEDED,
    JobResult,
    PathResultBase,
)
from app.core.job_lifecycle import JobLifecycle
from app.core.results import ResultStore
from solver import RuleEnsemble
from solver.fitting import RULE_LINKS, candidate_terms


class JobResults:
    def __init__(self, jobs: JobLifecycle, results: ResultStore, datasets: DatasetStore, forests: ForestStore):
        self.jobs = jobs
        self.results = results
        self.datasets = datasets
        self.forests = forests

    def result(self, job_id: str, *, tenant: str, field: str = "job_id") -> JobResult:
        record = self.jobs.get(job_id, tenant=tenant, field=field)
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
        """(result, rules of that step) of a succeeded path or grid job."""
        result = self.path_result(job_id, tenant=tenant, field=field)
        if not 0 <= step < len(result.steps):
            raise NotFound("step", step, "step", f"use a step in 0..{len(result.steps) - 1}")
        stored = self.results.step_weights(result.source_job_id, step)
        if stored is None:
            raise Expired(
                f"The weights of job {job_id} have expired.", [FieldFault(field, "expired", "run the job again")]
            )
        weights, intercept = stored
        if self.forests.find(result.forest_id) is None:
            raise _deleted("forest", result.forest_id, job_id, field)
        if self.datasets.find(result.dataset_id) is None:
            raise _deleted("dataset", result.dataset_id, job_id, field)
        # as the library builds them (solver.fitting.fit_rules): the fit's candidate terms (leaves or every node,
        # capped at max_rule_length, and linear terms winsorized on the training rows; the service has no row
        # weights), in the table's columns, with the support and threshold precision of the training rows, a
        # multinomial path's per class (its link softmax), a Poisson path's as log rates (link log)
        X, _ = self.datasets.load_arrays(result.dataset_id)
        dataset = self.datasets.read(result.dataset_id)
        path = result.parameters.path
        split = ValidationSplit.for_path(path, result.parameters.validation_dataset_id)
        X_train = X[split.training_rows(len(X))]
        candidates = candidate_terms(self.forests.load(result.forest_id), path, X_train, None, dataset.encoding)
        loss = path.loss
        return result, RuleEnsemble.from_weights(
            candidates,
            weights,
            intercept,
            classes=dataset.classes if loss == "multinomial" else None,
            link=RULE_LINKS.get(loss),
            encoding=dataset.encoding,
            X=X_train,
            response=dataset.response(loss),
        )


def _deleted(kind: str, stored_id: str, job_id: str, field: str) -> Expired:
    return Expired(
        f"The {kind} of job {job_id} was deleted: its rules cannot be rebuilt.",
        [FieldFault(field, f"{kind} {stored_id} deleted", "run the job again")],
    )


_NO_RESULT_FIX = {
    QUEUED: "wait for status succeeded (poll the job or follow its events)",
    RUNNING: "wait for status succeeded (poll the job or follow its events)",
    FAILED: "the job failed: read its error, fix the cause and submit it again",
    CANCELED: "the job was canceled: submit it again for a result",
}
