"""The cross-validation job: the parent of a cross-validated path's folds, which refits on all the rows."""

from functools import partial

from app.core.job_documents import PathJobSpec
from solver.cross_validation import common_steps
from solver.fitting import cross_validation_grid, refit_cross_validated
from solver.stability import PathRuleKeys
from worker.fit_data import load_path_data, stored_or_trained_forest
from worker.fit_results import store_fit
from worker.runs import JobRun, check_cells, ended_cells, path_finished, path_result


def collect_folds(job_id: str, attempt: int) -> None:
    """Parent of a cross-validated path, queued once every fold and stability fit ended: refits on all the rows over
    the steps every fold reached, each step holding the folds' means (solver.fitting.refit_cross_validated), and
    stores it as a path job stores its fit (the stability measured on the fits' rules)."""
    with JobRun(job_id, attempt, PathJobSpec) as run:
        if not run.claimed:
            return
        cells = ended_cells(run, run.record.cells or [])
        check_cells(run, cells, "fold")
        check_cells(run, ended_cells(run, run.record.stability_fits or []), "stability fit")
        folds = sorted((path_result(run, cell.id) for cell in cells), key=lambda r: r.parameters.fold or 0)
        spec = run.spec
        forest = stored_or_trained_forest(run, spec.forest_id, spec.recipe)
        data = load_path_data(run, forest)
        fold_steps = [fold.steps for fold in folds]
        run.start_path("refit", common_steps(fold_steps))  # the refit's steps: those every fold reached
        shared = dict(encoding=data.dataset.encoding, leaves=data.leaves, sample_weight=data.sample_weight)
        with run.timed("refit"):
            grid = cross_validation_grid(data.X, data.y, spec.path, forest=forest, **shared)
            fit = refit_cross_validated(
                data.X,
                data.y,
                spec.path,
                grid,
                fold_steps,
                forest=forest,
                classes=data.dataset.classes,
                callback=partial(run.on_step, spec.path),
                **shared,
            )
        if path_finished(run):
            fold_keys = [
                None if f.fold_rules is None else PathRuleKeys.from_dict(f.fold_rules.model_dump()) for f in folds
            ]
            store_fit(run, data, fit, cache_hit=data.cache_hit and all(c.cache_hit for c in cells), fold_keys=fold_keys)
