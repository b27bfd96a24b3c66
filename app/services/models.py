"""Models: a promoted path step as a named, versioned rule ensemble, and fast scoring with it."""
import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass

from app.core.config import Settings
from app.errors import ProblemError, field_error, not_found
from app.schemas import PredictRequest, PromoteRequest
from app.services.blobs import BlobStore
from app.services.datasets import DatasetStore
from app.services.encoding import TableEncoding
from app.services.forests import jsonable


@dataclass
class ScoringModel:
    ensemble: object  # solver.rules.RuleEnsemble
    encoding: TableEncoding

    @property
    def column_names(self) -> list[str]:
        return [column.name for column in self.encoding.columns]


class ModelStore:
    def __init__(self, settings: Settings, blobs: BlobStore, datasets: DatasetStore, jobs):
        self.settings = settings
        self.blobs = blobs
        self.datasets = datasets
        self.jobs = jobs
        self.index_key = f"{settings.key_prefix}models"
        self._scoring_cache: OrderedDict[str, ScoringModel] = OrderedDict()
        self._cache_lock = threading.Lock()

    def _key(self, model_id: str) -> str:
        return f"{self.settings.key_prefix}model:{model_id}"

    def promote(self, request: PromoteRequest) -> dict:
        result = self.jobs.result(request.job_id)
        if result.get("kind") == "train":
            raise ProblemError(422, "A training job has no rules to promote.",
                               [field_error("job_id", "training job", "promote a path or grid job")])
        step = result["selected"] if request.step is None else request.step
        result, ensemble = self.jobs.step_rules(request.job_id, step)
        chosen = result["steps"][step]
        dataset = self.datasets.get(result["dataset_id"])
        version = int(self.blobs.redis.incr(f"{self.settings.key_prefix}model-version:{request.name}"))
        model = {
            "id": "mdl_" + uuid.uuid4().hex[:24],
            "name": request.name,
            "version": version,
            "description": request.description,
            "created_at": time.time(),
            "target": dataset["target"],
            "columns": dataset["columns"],
            "n_rules": len(ensemble.rules),
            "intercept": float(ensemble.intercept),
            "ensemble": jsonable(ensemble.to_dict()),
            "text": ensemble.to_text(),
            "metrics": {key: chosen.get(key) for key in
                        ("train_loss", "val_loss", "n_rules", "n_trees", "n_antecedents", "lambda_s", "lambda_f")},
            "provenance": {"job_id": request.job_id, "step": step, "selected_step": result["selected"],
                           "dataset_id": result["dataset_id"], "forest_id": result["forest_id"],
                           "parameters": result["parameters"], "grid_cell": result.get("best_cell_id")},
        }
        self.blobs.put_json(self._key(model["id"]), model)
        self.blobs.redis.zadd(self.index_key, {model["id"]: model["created_at"]})
        return model

    def get(self, model_id: str) -> dict:
        model = self.blobs.get_json(self._key(model_id))
        if model is None:
            raise not_found("model", model_id)
        return model

    def list(self, limit: int = 100) -> list[dict]:
        return [{k: m[k] for k in ("id", "name", "version", "created_at", "n_rules", "metrics", "provenance")}
                for m in self.blobs.newest_json(self.index_key, self._key, limit)]

    def scoring_model(self, model_id: str) -> ScoringModel:
        with self._cache_lock:
            cached = self._scoring_cache.get(model_id)
            if cached is not None:
                self._scoring_cache.move_to_end(model_id)
                return cached
        from solver.rules import RuleEnsemble

        model = self.get(model_id)
        scoring = ScoringModel(RuleEnsemble.from_dict(model["ensemble"]), TableEncoding.from_dict(model["columns"]))
        with self._cache_lock:
            self._scoring_cache[model_id] = scoring  # models never change, so entries never go stale
            while len(self._scoring_cache) > self.settings.model_cache_size:
                self._scoring_cache.popitem(last=False)
        return scoring

    def predict(self, model_id: str, body: PredictRequest, explain: bool) -> dict:
        scoring = self.scoring_model(model_id)
        columns, n_rows, location = table_from_body(body, scoring.column_names)
        X = scoring.encoding.encode(columns, n_rows, location)
        answer = {"predictions": scoring.ensemble.predict(X).tolist()}
        if explain:
            answer["explanations"] = [list(map(int, fired)) for fired in scoring.ensemble.explain(X)]
        return answer


def _row_length_errors(rows: list[list], width: int, location: str) -> list[dict]:
    return [field_error(f"{location}[{i}]", f"{len(row)} values for {width} columns",
                        "send one value per column") for i, row in enumerate(rows) if len(row) != width][:10]


def _columns_from_records(records: list[dict], location: str) -> tuple[dict, int]:
    names = list(records[0]) if records else []
    errors = [field_error(f"{location}[{i}]", f"columns {sorted(set(row) ^ set(names))} differ from row 0's",
                          "send the same columns in every record")
              for i, row in enumerate(records) if row.keys() != records[0].keys()][:10]
    if errors:
        raise ProblemError(422, "The records do not share their columns.", errors)
    return {name: [row[name] for row in records] for name in names}, len(records)


def _columns_from_rows(names: list[str], rows: list[list], location: str) -> tuple[dict, int]:
    errors = _row_length_errors(rows, len(names), location)
    if errors:
        raise ProblemError(422, "Rows and columns do not match.", errors)
    values = list(zip(*rows)) if rows else [[] for _ in names]
    return dict(zip(names, values)), len(rows)


def table_from_body(body: PredictRequest, column_names: list[str]) -> tuple[dict, int, str]:
    """(column -> values, n_rows, field name for errors) of any of the four MLflow body shapes."""
    if body.dataframe_split is not None:
        split = body.dataframe_split
        return *_columns_from_rows(split.columns, split.data, "dataframe_split.data"), "dataframe_split.columns"
    if body.dataframe_records is not None:
        return *_columns_from_records(body.dataframe_records, "dataframe_records"), "dataframe_records"
    name = "instances" if body.instances is not None else "inputs"
    payload = body.instances if body.instances is not None else body.inputs
    if isinstance(payload, dict):
        lengths = {len(values) for values in payload.values()}
        if len(lengths) > 1:
            raise ProblemError(422, "Columns of different lengths.",
                               [field_error(name, f"lengths {sorted(lengths)}", "send equally long columns")])
        return payload, lengths.pop() if lengths else 0, name
    if payload and all(isinstance(row, dict) for row in payload):
        return *_columns_from_records(payload, name), name
    if all(isinstance(row, list) for row in payload):
        return *_columns_from_rows(column_names, payload, name), name
    raise ProblemError(422, f"'{name}' must be a list of records, a list of rows or an object of columns.",
                       [field_error(name, "unrecognized shape",
                                    f"send rows in the column order {column_names}, or records")])
