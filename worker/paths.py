"""The path job: a path on one dataset (``solver.fitting.fit_rules``), or one fold of a cross-validated path."""

from functools import partial

from app.core.job_documents import PathJobSpec
from app.core.result_documents import FoldRuleKeys
from solver import TreeEnsemble
from solver.cross_validation import fold_rows
from solver.fitting import cross_validation_grid, fit_fold, fit_rules
from solver.stability import path_rule_keys
from worker.fit_data import PathData, load_path_data, stored_or_trained_forest
from worker.fit_results import path_job_result, store_fit
from worker.runs import JobRun, check_cells, ended_cells, path_finished


def run_path(job_id: str, attempt: int) -> None:
    with JobRun(job_id, attempt, PathJobSpec) as run:
        if not run.claimed:
            return
        spec = run.spec
        check_cells(run, ended_cells(run, run.record.stability_fits or []), "stability fit")
        forest = stored_or_trained_forest(run, spec.forest_id, spec.recipe)
        data = load_path_data(run, forest)
        if spec.fold is not None:
            _run_fold(run, forest, data)
            return
        fit_and_store(run, data, forest)


def fit_and_store(run: JobRun[PathJobSpec], data: PathData, forest) -> None:
    """The library's path on ``data`` (its validation rows and cached leaf indices where it has them), stored with
    what it measured: a path job's, and a half-sample fit's on its half."""
    spec = run.spec
    run.start_path("path", spec.path.n_steps)
    with run.timed("path"):
        fit = fit_rules(
            data.X,
            data.y,
            spec.path,
            forest=forest,
            X_val=data.X_val,
            y_val=data.y_val,
            encoding=data.dataset.encoding,  # names the features; linear terms only on numeric columns
            classes=data.dataset.classes,
            leaves=data.leaves,
            val_leaves=data.val_leaves,
            sample_weight=data.sample_weight,
            callback=partial(run.on_step, spec.path),
        )
    if path_finished(run):
        store_fit(run, data, fit)


def _fold_forest(spec: PathJobSpec, forest: TreeEnsemble):
    """The forest of a fold, or of a half-sample fit: trained there from the recipe (the stored forest learned from
    every row), or the uploaded forest itself."""
    return spec.recipe.params if spec.recipe is not None else forest


def _run_fold(run: JobRun[PathJobSpec], forest: TreeEnsemble, data: PathData) -> None:
    """One fold of a cross-validated path (``spec.fold``): its path on the grid of all the rows, stored as a path
    result without rules (the parent, collect_folds, refits on all the rows)."""
    spec = run.spec
    assert spec.fold is not None and spec.path.cv_folds is not None
    run.start_path("path", spec.path.n_steps)
    shared = dict(encoding=data.dataset.encoding, sample_weight=data.sample_weight)
    with run.timed("path"):
        grid = cross_validation_grid(data.X, data.y, spec.path, forest=forest, leaves=data.leaves, **shared)
        fit = fit_fold(
            data.X,
            data.y,
            spec.path,
            grid,
            spec.fold,
            forest=_fold_forest(spec, forest),
            classes=data.dataset.classes,
            callback=partial(run.on_step, spec.path),
            **shared,
        )
    if not path_finished(run):
        return
    with run.timed("rules"):  # what its parent's fold stability reads of its rules (a small document)
        keys = path_rule_keys(fit.step_terms(), data.X)
    train_rows, val_rows = fold_rows(len(data.y), spec.path.cv_folds, spec.path.random_state, spec.fold)
    with run.timed("store"):
        result = path_job_result(
            run,
            data,
            fit.path,
            fit.selected,
            len(train_rows),
            len(val_rows),
            data.cache_hit,
            fold_rules=FoldRuleKeys(**keys.to_dict()),
        )
        run.core.results.put(result)
    run.succeed(result.summary(), cache_hit=data.cache_hit)
