"""Job results: the result document of a job and, for a path, the rules of every step.

The one module that writes and reads a path's rules: each step's rule ensemble as the worker built it
(``solver.fitting.RuleFit.rules_at``: a fire-rules document, read back through ``RuleEnsemble.from_dict``),
one part per step under the job's own key, so that a read decompresses one step's rules only.
"""

import json
from collections.abc import Sequence

from app.core.blobs import BlobStore, jsonable
from app.core.config import Settings
from app.core.keys import Keys
from app.core.result_documents import JobResult
from solver import RuleEnsemble


class ResultStore:
    def __init__(self, settings: Settings, blobs: BlobStore):
        self.settings = settings
        self.blobs = blobs
        self.keys = Keys.from_settings(settings)

    def put(self, result: JobResult) -> None:
        self.blobs.put_document(self.keys.job_result(result.job_id), result, ttl=self.settings.result_ttl_seconds)

    def get(self, job_id: str) -> JobResult | None:
        return self.blobs.get_document(self.keys.job_result(job_id), JobResult)

    def delete(self, job_id: str) -> None:
        self.delete_all([job_id])

    def delete_all(self, job_ids: Sequence[str]) -> None:
        """The results of the jobs, their rules, and the weights of paths run before rules were stored with them."""
        keys = [self.keys.job_result, self.keys.job_rules, self.keys.job_weights]
        self.blobs.delete_all([key(job_id) for job_id in job_ids for key in keys])

    def put_rules(self, job_id: str, ensembles: Sequence[RuleEnsemble]) -> None:
        """Every step's rules of a path job, in step order."""
        parts = [json.dumps(jsonable(ensemble.to_dict()), separators=(",", ":")).encode() for ensemble in ensembles]
        self.blobs.put_parts(self.keys.job_rules(job_id), parts, ttl=self.settings.result_ttl_seconds)

    def step_rules(self, job_id: str, step: int) -> RuleEnsemble | None:
        """The rules of one step of a path job as the worker stored them; None once expired (or for a path that ran
        before rules were stored with results)."""
        data = self.blobs.get_part(self.keys.job_rules(job_id), step)
        return None if data is None else RuleEnsemble.from_dict(json.loads(data))
