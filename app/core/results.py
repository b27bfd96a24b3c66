"""Job results: the result document of a job and, for a path, the weights of every step.

The one module that writes and reads path weights: each step's weights as a CSR matrix (steps x candidate terms:
the columns of ``solver.fitting.candidate_terms``, rules then linear terms; a forest's leaves by default) with the
intercepts, under the job's own key.
"""

import numpy as np
import scipy.sparse as sp

from app.core.blobs import BlobStore
from app.core.config import Settings
from app.core.job_documents import JobResult
from app.core.keys import Keys


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
        self.blobs.delete(self.keys.job_result(job_id))
        self.blobs.delete(self.keys.job_weights(job_id))

    def put_weights(self, job_id: str, coef_path: sp.spmatrix, intercepts: np.ndarray) -> None:
        """Every step's weights and intercepts of a path job (``solver.path.PathResult``): coef_path steps x terms
        (the fit's candidate terms, ``Candidates.n_terms``) and intercepts (steps,), or for K classes
        steps x (terms * K), a term's K weights side by side, and intercepts (steps, K)."""
        weights = sp.csr_matrix(coef_path)
        self.blobs.put_arrays(
            self.keys.job_weights(job_id),
            ttl=self.settings.result_ttl_seconds,
            data=weights.data,
            indices=weights.indices,
            indptr=weights.indptr,
            intercepts=np.asarray(intercepts, dtype=np.float64),
            n_leaves=np.asarray(weights.shape[1]),  # the columns (named before there were other terms than leaves)
        )

    def step_weights(self, job_id: str, step: int) -> tuple[np.ndarray, float | list[float]] | None:
        """(weights (n_terms,), intercept) of one step of a path job, or for K classes (weights (n_terms, K),
        intercepts (K,)); None once expired."""
        arrays = self.blobs.get_arrays(self.keys.job_weights(job_id))
        if arrays is None:
            return None
        start, stop = arrays["indptr"][step], arrays["indptr"][step + 1]
        weights = np.zeros(int(arrays["n_leaves"]))  # the columns: terms, or terms x classes
        weights[arrays["indices"][start:stop]] = arrays["data"][start:stop]
        intercepts = arrays["intercepts"]
        if intercepts.ndim == 2:
            return weights.reshape(-1, intercepts.shape[1]), intercepts[step].tolist()
        return weights, float(intercepts[step])
