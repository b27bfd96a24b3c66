"""Job results: the result document of a job and, for a path, the weights of every step.

The one module that writes and reads path weights: each step's leaf weights as a CSR matrix (steps x
leaves) with the intercepts, under the job's own key.
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
        """Every step's weights and intercepts of a path job (``solver.path.PathResult``): coef_path steps x leaves
        and intercepts (steps,), or for K classes steps x (leaves * K), a leaf's K weights side by side, and
        intercepts (steps, K)."""
        weights = sp.csr_matrix(coef_path)
        self.blobs.put_arrays(
            self.keys.job_weights(job_id),
            ttl=self.settings.result_ttl_seconds,
            data=weights.data,
            indices=weights.indices,
            indptr=weights.indptr,
            intercepts=np.asarray(intercepts, dtype=np.float64),
            n_leaves=np.asarray(weights.shape[1]),
        )

    def step_weights(self, job_id: str, step: int) -> tuple[np.ndarray, float | list[float]] | None:
        """(leaf weights (n_leaves,), intercept) of one step of a path job, or for K classes (weights (n_leaves, K),
        intercepts (K,)); None once expired."""
        arrays = self.blobs.get_arrays(self.keys.job_weights(job_id))
        if arrays is None:
            return None
        start, stop = arrays["indptr"][step], arrays["indptr"][step + 1]
        weights = np.zeros(int(arrays["n_leaves"]))  # the columns: leaves, or leaves x classes
        weights[arrays["indices"][start:stop]] = arrays["data"][start:stop]
        intercepts = arrays["intercepts"]
        if intercepts.ndim == 2:
            return weights.reshape(-1, intercepts.shape[1]), intercepts[step].tolist()
        return weights, float(intercepts[step])
