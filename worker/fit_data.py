"""What a job fits on: its forest (stored, or trained here from its recipe), the dataset's arrays and the forest's
leaf indices on them (from the cache where they are)."""

from dataclasses import dataclass
from typing import Any

import numpy as np

from app.core.forests import ForestRecipe
from app.core.job_documents import PathJobSpec
from solver import TreeEnsemble
from solver.fitting import train_forest as train_ensemble
from worker.runs import JobRun


def stored_or_trained_forest(run: JobRun[Any], forest_id: str, recipe: ForestRecipe | None) -> TreeEnsemble:
    """The job's forest; trained here, on the recipe's rows only, when no job has stored it yet."""
    forests = run.core.forests
    if recipe is None or forests.find(forest_id) is not None:
        with run.timed("load_forest"):
            return forests.load(forest_id)
    run.phase("training")
    with run.timed("load_data"):
        X, y, weight = run.core.datasets.load_fit_arrays(recipe.dataset_id, recipe.fit_path())
        feature_names = run.core.datasets.read(recipe.dataset_id).feature_names
    with run.timed("train"):
        rows = recipe.rows.training_rows(len(y))
        _, ensemble = train_ensemble(
            recipe.params,
            X[rows],
            y[rows],
            None if weight is None else weight[rows],
            feature_names=feature_names,
            loss=recipe.loss,
        )
    run.check_deadline()
    forests.save(ensemble, recipe, run.record.tenant)
    return ensemble


def _cached_leaves(
    run: JobRun[PathJobSpec], forest: TreeEnsemble, dataset_id: str, X: np.ndarray
) -> tuple[np.ndarray, bool]:
    leaves, hit, seconds = run.core.leaf_cache.leaves(forest, run.spec.forest_id, dataset_id, X)
    run.timings["matrix_build"] = run.timings.get("matrix_build", 0.0) + seconds
    return leaves, hit


@dataclass
class PathData:
    """What a path job loads: the dataset's arrays and encoding, validation rows from another dataset, the forest's
    leaf indices on both (from the cache where they are)."""

    X: np.ndarray
    y: np.ndarray
    dataset: Any
    X_val: np.ndarray | None
    y_val: np.ndarray | None
    leaves: np.ndarray | None  # None: a stability fit's (its forest is its own)
    val_leaves: np.ndarray | None
    cache_hit: bool
    # the exposure and offset weights, where the dataset has those columns (y is then the rate, and the library's
    # offset_target of it: DatasetStore.load_fit_arrays)
    sample_weight: np.ndarray | None = None


def load_path_data(run: JobRun[PathJobSpec], forest: TreeEnsemble) -> PathData:
    spec = run.spec
    run.phase("loading")
    with run.timed("load_data"):
        X, y, weight = run.core.datasets.load_fit_arrays(spec.dataset_id, spec.path)
        dataset = run.core.datasets.read(spec.dataset_id)
        X_val = y_val = val_leaves = None
        validation_id = spec.validation_dataset_id
        if validation_id is not None:
            X_val, y_val, _ = run.core.datasets.load_fit_arrays(validation_id, spec.path)
    run.phase("matrix")
    leaves, cache_hit = _cached_leaves(run, forest, spec.dataset_id, X)
    if validation_id is not None and X_val is not None:
        val_leaves, val_hit = _cached_leaves(run, forest, validation_id, X_val)
        cache_hit = cache_hit and val_hit
    return PathData(X, y, dataset, X_val, y_val, leaves, val_leaves, cache_hit, weight)
