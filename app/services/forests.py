"""Forests: uploaded in a safe format or trained from a dataset; stored as the fire JSON schema."""
import hashlib
import json
import time

import numpy as np
import pandas as pd

from app.core.config import Settings
from app.errors import ProblemError, field_error, not_found
from app.services.blobs import BlobStore

TRAINERS = {
    "random_forest": "sklearn.ensemble.RandomForestRegressor",
    "extra_trees": "sklearn.ensemble.ExtraTreesRegressor",
    "gradient_boosting": "sklearn.ensemble.GradientBoostingRegressor",
}


def jsonable(value):
    """JSON-ready copy of a structure holding numpy arrays and scalars."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def canonical_hash(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:32]


def training_forest_id(dataset_id: str, params: dict) -> str:
    """Training is deterministic for a fixed random_state, so the recipe identifies the forest."""
    return "fo_" + canonical_hash({"dataset_id": dataset_id, "training": params})


def train_ensemble(X: np.ndarray, y: np.ndarray, params: dict, feature_names: list[str]):
    from sklearn.ensemble import ExtraTreesRegressor, GradientBoostingRegressor, RandomForestRegressor
    from solver.forest import TreeEnsemble

    common = {"n_estimators": params["n_estimators"], "max_depth": params["max_depth"],
              "max_features": params["max_features"], "random_state": params["random_state"]}
    if params["kind"] == "gradient_boosting":
        estimator = GradientBoostingRegressor(learning_rate=params["learning_rate"], **common)
    elif params["kind"] == "extra_trees":
        estimator = ExtraTreesRegressor(n_jobs=1, **common)
    else:
        estimator = RandomForestRegressor(n_jobs=1, **common)
    estimator.fit(pd.DataFrame(X, columns=feature_names), y)  # from_sklearn takes the names from the fit
    return TreeEnsemble.from_sklearn(estimator)


def describe_forest(ensemble, forest_id: str, source: dict) -> dict:
    return {
        "id": forest_id,
        "kind": getattr(ensemble, "kind", "custom"),
        "n_trees": int(ensemble.n_trees),
        "n_leaves": int(ensemble.n_leaves),
        "n_features": int(ensemble.n_features),
        "feature_names": list(ensemble.feature_names),
        "source": source,
        "created_at": time.time(),
    }


class ForestStore:
    def __init__(self, settings: Settings, blobs: BlobStore):
        self.settings = settings
        self.blobs = blobs
        self.index_key = f"{settings.key_prefix}forests"

    def _meta_key(self, forest_id: str) -> str:
        return f"{self.settings.key_prefix}forest:{forest_id}"

    def _trees_key(self, forest_id: str) -> str:
        return f"{self.settings.key_prefix}forest:{forest_id}:trees"

    def upload(self, data: bytes, filename: str | None, declared_format: str | None,
               dataset: dict | None = None) -> tuple[dict, bool]:
        """(metadata, created); with a dataset, a forest whose features differ is refused before it is stored."""
        from solver.formats import ForestFormatError, load_forest

        try:
            ensemble = load_forest(data, filename=filename, declared_format=declared_format)
        except ForestFormatError as exc:
            fix = ("export the forest with TreeEnsemble.to_dict(), XGBoost save_model(.json), "
                   "LightGBM dump_model() or skops")
            raise ProblemError(exc.status, exc.detail, [field_error(exc.field, exc.detail, fix)]) from exc
        document = jsonable(ensemble.to_dict())
        forest_id = "fo_" + canonical_hash(document)  # the same trees in any format get the same id
        existing = self.find(forest_id)
        if existing is not None:
            if dataset is not None:
                check_forest_features(existing, dataset, "dataset_id")
            return existing, False
        meta = describe_forest(ensemble, forest_id, {"type": "upload", "filename": filename,
                                                     "format": declared_format})
        if dataset is not None:
            check_forest_features(meta, dataset, "dataset_id")
        self._store(document, meta)
        return meta, True

    def save(self, ensemble, forest_id: str, source: dict) -> dict:
        meta = describe_forest(ensemble, forest_id, source)
        self._store(jsonable(ensemble.to_dict()), meta)
        return meta

    def _store(self, document: dict, meta: dict) -> None:
        self.blobs.put_json(self._trees_key(meta["id"]), document)
        self.blobs.put_json(self._meta_key(meta["id"]), meta)
        self.blobs.redis.zadd(self.index_key, {meta["id"]: meta["created_at"]})

    def find(self, forest_id: str) -> dict | None:
        return self.blobs.get_json(self._meta_key(forest_id))

    def get(self, forest_id: str) -> dict:
        meta = self.find(forest_id)
        if meta is None:
            raise not_found("forest", forest_id)
        return meta

    def list(self, limit: int = 100) -> list[dict]:
        return self.blobs.newest_json(self.index_key, self._meta_key, limit)

    def load(self, forest_id: str):
        from solver.forest import TreeEnsemble

        trees = self.blobs.get_json(self._trees_key(forest_id))
        if trees is None:
            raise not_found("forest", forest_id)
        return TreeEnsemble.from_dict(trees)


def check_forest_features(forest: dict, dataset: dict, field: str = "forest_id") -> None:
    """422 unless the forest splits on exactly the dataset's encoded columns, in order."""
    expected, actual = dataset["feature_names"], forest["feature_names"]
    if actual == expected:
        return
    generic = [f"x{i}" for i in range(forest["n_features"])]
    if actual == generic and forest["n_features"] == len(expected):
        return  # a forest saved without names is taken positionally
    errors = []
    missing = [name for name in expected if name not in actual]
    extra = [name for name in actual if name not in expected]
    if missing:
        errors.append(field_error(field, f"the forest lacks dataset columns {missing[:10]}",
                                  "train the forest on this dataset's encoded columns"))
    if extra:
        errors.append(field_error(field, f"the forest uses columns the dataset lacks {extra[:10]}",
                                  "use a forest trained on this dataset"))
    if not errors:
        errors.append(field_error(field, "same columns in another order",
                                  f"order the forest's features as {expected}"))
    raise ProblemError(422, "The forest's features do not match the dataset's encoded columns.", errors)
