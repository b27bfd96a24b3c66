"""Models: a promoted path step as a named, versioned rule ensemble, and fast scoring with it."""
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import Field

from app.core.blobs import BlobStore, Document, jsonable
from app.core.config import Settings
from app.core.datasets import DatasetStore, table_invalid
from app.core.errors import NotFound
from app.core.job_documents import PathJobSpec
from app.core.jobs import JobService
from solver import RuleEnsemble
from solver.encoding import TableEncoding, TableError


class ModelMetrics(Document):
    train_loss: float
    val_loss: float | None
    n_rules: int
    n_trees: int
    n_antecedents: int | None
    lambda_s: float
    lambda_f: float


class ModelProvenance(Document):
    job_id: str
    step: int
    selected_step: int
    dataset_id: str
    forest_id: str
    parameters: PathJobSpec
    grid_cell: str | None = Field(description="the grid cell whose path this is, for a grid job")


class ModelSummary(Document):
    id: str
    name: str
    version: int
    created_at: float
    n_rules: int
    metrics: ModelMetrics
    provenance: ModelProvenance


class ModelInfo(ModelSummary):
    description: str | None
    target: str
    columns: list[dict[str, Any]] = Field(description="the training table's encoding: scoring rows use these columns")
    intercept: float
    ensemble: dict[str, Any] = Field(description="the rules (solver.rules.RuleEnsemble.to_dict)")
    text: str

# column names in the model's order -> (column -> values, n_rows, the field holding the rows)
TableReader = Callable[[list[str]], tuple[Mapping[str, Sequence], int, str]]


@dataclass
class ScoringModel:
    ensemble: RuleEnsemble
    encoding: TableEncoding


@dataclass
class Scores:
    predictions: np.ndarray
    explanations: list[list[int]] | None  # indices of the rules that fired, per row, where asked for


class ModelStore:
    def __init__(self, settings: Settings, blobs: BlobStore, datasets: DatasetStore, jobs: JobService):
        self.settings = settings
        self.blobs = blobs
        self.datasets = datasets
        self.jobs = jobs
        self.index_key = f"{settings.key_prefix}models"
        self._scoring_cache: OrderedDict[str, ScoringModel] = OrderedDict()
        self._cache_lock = threading.Lock()

    def _key(self, model_id: str) -> str:
        return f"{self.settings.key_prefix}model:{model_id}"

    def promote(self, job_id: str, step: int | None, name: str, description: str | None) -> ModelInfo:
        """A path step (the selected one by default) of a succeeded path or grid job as a new model version."""
        result = self.jobs.path_result(job_id)
        step = result.selected if step is None else step
        result, ensemble = self.jobs.step_rules(job_id, step)
        chosen = result.steps[step]
        dataset = self.datasets.get(result.dataset_id)
        model = ModelInfo(
            id="mdl_" + uuid.uuid4().hex[:24], name=name,
            version=int(self.blobs.redis.incr(f"{self.settings.key_prefix}model-version:{name}")),
            description=description, created_at=time.time(), target=dataset.target, columns=dataset.columns,
            n_rules=len(ensemble.rules), intercept=ensemble.intercept, ensemble=jsonable(ensemble.to_dict()),
            text=ensemble.to_text(),
            metrics=ModelMetrics(**{metric: getattr(chosen, metric) for metric in ModelMetrics.model_fields}),
            provenance=ModelProvenance(job_id=job_id, step=step, selected_step=result.selected,
                                       dataset_id=result.dataset_id, forest_id=result.forest_id,
                                       parameters=result.parameters, grid_cell=getattr(result, "best_cell_id", None)))
        self.blobs.put_document(self._key(model.id), model)
        self.blobs.index(self.index_key, model.id, model.created_at)
        return model

    def get(self, model_id: str) -> ModelInfo:
        model = self.blobs.get_document(self._key(model_id), ModelInfo)
        if model is None:
            raise NotFound("model", model_id)
        return model

    def list(self, limit: int = 100) -> list[ModelInfo]:
        return self.blobs.newest_documents(self.index_key, self._key, ModelInfo, limit)

    def scoring_model(self, model_id: str) -> ScoringModel:
        with self._cache_lock:
            cached = self._scoring_cache.get(model_id)
            if cached is not None:
                self._scoring_cache.move_to_end(model_id)
                return cached
        model = self.get(model_id)
        scoring = ScoringModel(RuleEnsemble.from_dict(model.ensemble), TableEncoding.from_dict(model.columns))
        with self._cache_lock:
            self._scoring_cache[model_id] = scoring  # models never change, so entries never go stale
            while len(self._scoring_cache) > self.settings.model_cache_size:
                self._scoring_cache.popitem(last=False)
        return scoring

    def score(self, model_id: str, read_table: TableReader, explain: bool) -> Scores:
        """Predictions for rows in the training table's original columns. ``read_table(column_names)`` gives
        (column -> values, n_rows, the field holding the rows, which faults name as ``{field}.{column}``)."""
        scoring = self.scoring_model(model_id)
        table, n_rows, location = read_table(scoring.encoding.column_names)
        try:
            X = scoring.encoding.encode(table, n_rows, location)
        except TableError as error:
            raise table_invalid(error) from error
        explanations = [list(map(int, fired)) for fired in scoring.ensemble.explain(X)] if explain else None
        return Scores(scoring.ensemble.predict(X), explanations)
