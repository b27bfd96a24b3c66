"""Cross-validated paths (``PathSpec.cv_folds``): the pieces ``solver.fitting`` puts together, and the service's
workers too, one fold per job.

glmnet's ``cv.glmnet`` is the model: the lambda grid is that of all the rows; each of K folds holds its rows out of
a path on that grid fitted on the other folds (here with a forest of its own, trained on those rows only, so no
fold is validated on rows its forest saw); a step's cross-validated loss is the folds' mean validation loss at its
lambda, with the standard error ``sd / sqrt(K)``; the rules are those of the path on all the rows, refitted at the
chosen lambda. The folds' paths may stop early (rule budget, ``patience``): the steps the refit offers are those
every fold reached.

    all rows ─► forest ─► lambda_max ─► grid ──┬─► fold 1: forest, path on grid (rows of fold 1 held out) ─┐
                                               ├─► ...                                                   ├─► mean, SE
                                               └─► fold K ─────────────────────────────────────────────────┘     │
    all rows, forest ─► path on grid[:steps every fold reached] ─► steps with the folds' means ─► selected ◄───┘
"""

from dataclasses import replace

import numpy as np

from .path import METRIC_NAMES, PathResult, PathStep
from .spec import PathSpec

# the validation values a cross-validated step holds as the folds' means
FOLD_MEANS = ("val_loss", *(f"val_{name}" for name in METRIC_NAMES))


def check_fold_rows(n_rows: int, n_folds: int) -> None:
    """A ValueError where ``n_rows`` rows cannot be dealt into ``n_folds`` folds of at least one row each."""
    if n_rows < n_folds:
        raise ValueError(f"{n_folds} folds need at least {n_folds} rows, got {n_rows}")


def fold_of_rows(n_rows: int, n_folds: int, seed: int) -> np.ndarray:
    """The fold (0..K-1) of each of ``n_rows`` rows: a seeded permutation dealt in turn, so fold sizes differ by
    at most one row."""
    check_fold_rows(n_rows, n_folds)
    folds = np.empty(n_rows, dtype=np.int64)
    folds[np.random.default_rng(seed).permutation(n_rows)] = np.arange(n_rows) % n_folds
    return folds


def fold_rows(n_rows: int, n_folds: int, seed: int, fold: int) -> tuple[np.ndarray, np.ndarray]:
    """(training rows, validation rows) of fold ``fold``, each sorted."""
    folds = fold_of_rows(n_rows, n_folds, seed)
    return np.flatnonzero(folds != fold), np.flatnonzero(folds == fold)


def fold_spec(spec: PathSpec, grid) -> PathSpec:
    """The path of one fold: the spec on the grid of all the rows, validated on the fold's rows (its selection
    a plain one: the standard error is the folds' together)."""
    return spec.replace(cv_folds=None, lambdas=tuple(float(v) for v in grid), selection=_fold_selection(spec.selection))


def refit_spec(spec: PathSpec, grid, n_steps: int) -> PathSpec:
    """The path on all the rows: the grid's first ``n_steps`` steps (those every fold reached), to its rule budget,
    without validation rows of its own."""
    return spec.replace(
        cv_folds=None,
        lambdas=tuple(float(v) for v in grid[:n_steps]),
        patience=None,
        selection=_fold_selection(spec.selection),
    )


def _fold_selection(selection: str) -> str:
    return "loss" if selection == "1se" else selection


def common_steps(fold_steps: list[list[PathStep]]) -> int:
    """How many steps every fold's path reached (``fold_steps``: each fold's ``PathResult.steps``)."""
    if not fold_steps:
        raise ValueError("cross-validation needs the paths of its folds")
    return min(len(steps) for steps in fold_steps)


def with_fold_means(refit: PathResult, fold_steps: list[list[PathStep]], spec: PathSpec) -> PathResult:
    """The refitted path whose steps hold the folds' mean validation loss and metrics, and the standard error of
    the loss, at their lambda; its spec ``spec`` (the cross-validated one)."""
    steps = []
    for k, step in enumerate(refit.steps):
        at_step = [steps_of_fold[k] for steps_of_fold in fold_steps]
        if any(not np.isclose(s.lambda_s, step.lambda_s, rtol=1e-12) for s in at_step):
            raise ValueError(f"the folds' step {k} is not at the refit's lambda_s {step.lambda_s:g}")
        means = {name: _mean([getattr(s, name) for s in at_step]) for name in FOLD_MEANS}
        steps.append(replace(step, **means, val_loss_se=standard_error([s.val_loss for s in at_step])))
    return replace(refit, steps=steps, spec=spec)


def _mean(values: list) -> float | None:
    return None if any(v is None for v in values) else float(np.mean(values))


def standard_error(values: list) -> float | None:
    """The standard error of the mean of the folds' ``values``: their sample standard deviation over sqrt(K)
    (glmnet's ``cvsd`` for equal folds); None where a fold has none or there is one fold."""
    if len(values) < 2 or any(v is None for v in values):
        return None
    return float(np.std(values, ddof=1) / np.sqrt(len(values)))
