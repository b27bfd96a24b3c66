"""Deleting a tenant's datasets, forests, jobs and models, with what depends on them handled explicitly:

- a dataset or forest that a queued or running job reads is not deleted (Conflict naming those jobs: cancel or
  wait for them); otherwise its cached leaf matrices go with it. Finished jobs keep their results and their steps'
  rules (stored with the result, they outlive the forest); one whose dataset is gone can no longer be promoted.
  Models are self-contained (rules and column encoding): they keep predicting.
- a job is canceled first if it is queued or running, then removed with its result (and a grid's cells).
- a model is removed; its name's version numbers are never reused.
"""

from app.core.datasets import DatasetStore
from app.core.errors import Conflict, FieldFault
from app.core.forests import ForestStore
from app.core.job_documents import JobRecord
from app.core.job_lifecycle import JobLifecycle
from app.core.leaf_cache import LeafMatrixCache
from app.core.models import ModelStore


class Deletion:
    def __init__(
        self,
        datasets: DatasetStore,
        forests: ForestStore,
        jobs: JobLifecycle,
        models: ModelStore,
        leaf_cache: LeafMatrixCache,
    ):
        self.datasets = datasets
        self.forests = forests
        self.jobs = jobs
        self.models = models
        self.leaf_cache = leaf_cache

    def dataset(self, dataset_id: str, *, tenant: str) -> None:
        info = self.datasets.get(dataset_id, tenant=tenant)
        _refuse_while_used("dataset", self.jobs.using(tenant, dataset_id=dataset_id), "dataset_id")
        self.datasets.delete(info)
        self.leaf_cache.forget(dataset_id=dataset_id)

    def forest(self, forest_id: str, *, tenant: str) -> None:
        info = self.forests.get(forest_id, tenant=tenant)
        _refuse_while_used("forest", self.jobs.using(tenant, forest_id=forest_id), "forest_id")
        self.forests.delete(info)
        self.leaf_cache.forget(forest_id=forest_id)

    def job(self, job_id: str, *, tenant: str) -> None:
        self.jobs.delete(job_id, tenant=tenant)

    def model(self, model_id: str, *, tenant: str) -> None:
        self.models.delete(model_id, tenant=tenant)


def _refuse_while_used(kind: str, active: list[JobRecord], field: str) -> None:
    if active:
        ids = [record.id for record in active]
        raise Conflict(
            f"The {kind} is read by {len(ids)} queued or running jobs.",
            [
                FieldFault(
                    field, f"used by jobs {ids[:10]}", "cancel those jobs or wait for them to finish, then delete again"
                )
            ],
            retry_after=5,
        )
