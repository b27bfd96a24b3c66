"""RQ job functions. Each takes (job id, attempt) only and loads everything else from storage.

A job reports through its record (status, progress, timings) and stores its result under its own keys;
the RQ return value stays empty. The fitting itself is the library's (``solver.fitting``): the path job
only loads the dataset, the forest and the cached leaf indices, and stores what ``fit_rules`` returns.
"""

import os
import time
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Any, Generic, TypeVar

import numpy as np
from rq.timeouts import JobTimeoutException

from app.core.config import get_settings
from app.core.container import Core, build_core
from app.core.forests import ForestRecipe
from app.core.job_documents import (
    SUCCEEDED,
    TERMINAL,
    BestStep,
    CrossValidation,
    FoldRuleKeys,
    FoldStability,
    FrontierStep,
    GridCell,
    GridJobResult,
    GridJobSpec,
    GridSummary,
    JobError,
    JobRecord,
    PathJobResult,
    PathJobSpec,
    PathResultBase,
    Progress,
    RuleStability,
    RuleStepChoice,
    SurvivalCurves,
    TrainJobSpec,
    TrainResult,
    TrainSummary,
    step_values,
)
from app.core.job_lifecycle import cells_of
from app.core.records import Ended, now
from solver import RuleEnsemble, TreeEnsemble, threads
from solver.cross_validation import common_steps, fold_rows
from solver.fitting import (
    RuleFit,
    cross_validation_grid,
    fit_fold,
    fit_rules,
    refit_cross_validated,
)
from solver.fitting import train_forest as train_ensemble
from solver.losses.cox import kaplan_meier
from solver.path import PathStep, best_step
from solver.spec import PathSpec
from solver.stability import PathRuleKeys, half_sample, path_rule_keys, reference_cuts, rule_stability

PROGRESS_INTERVAL_SECONDS = 0.1
SpecT = TypeVar("SpecT", bound=TrainJobSpec | PathJobSpec)  # the spec a job function runs


@lru_cache(maxsize=1)
def core() -> Core:
    settings = get_settings()
    return build_core(settings, redis_patience=settings.redis_outage_seconds)  # ride out a Redis restart


class JobCanceled(Exception):
    pass


class DeadlinePassed(Exception):
    """The job ran past FIRE_JOB_TIMEOUT (checked at every step and phase; RQ's alarm covers long phases)."""


class JobRun(Generic[SpecT]):
    """Claims a queued job for one attempt, records its progress and its outcome, through the record store's
    transitions (app/core/records.py), each guarded by this attempt. ``spec_type``: the spec the job function
    runs (``spec`` is the record's, refused as a failure of the job when it is another)."""

    def __init__(self, job_id: str, attempt: int, spec_type: type[SpecT]):
        self.core = core()
        self.spec_type: type[SpecT] = spec_type
        self.records = self.core.records
        self.job_id = job_id
        self.attempt = attempt
        self.timings: dict[str, float] = {}
        self.claimed = False
        self.steps: list[PathStep] = []
        self.current_phase = "starting"
        self.path_phase = ("path", 0)  # the path phase whose steps on_step reports, and its steps at most
        self.path_progress: Progress | None = None  # the last step's progress, which the job's final one keeps
        self._last_progress = 0.0
        self.parent_pid = os.getppid()

    def __enter__(self) -> "JobRun[SpecT]":
        started = now()
        record = self.records.get(self.job_id)
        if record is None:
            return self
        self.record = record
        cells = self.records.get_many(cells_of(record))
        self.timings.update(waits(record, started, [cell for cell in cells if cell is not None]))
        self.deadline = started + self.core.settings.job_timeout
        # the claim starts the job's heartbeat; FireWorker keeps it fresh from here on
        self.claimed = self.records.claim(
            self.job_id, self.attempt, started_at=started, timings=self.timings, threads=threads.current()
        )
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if not self.claimed:
            return False
        self.records.stop_beating(self.job_id)
        return self._record_outcome(exc_type, exc)

    def _record_outcome(self, exc_type, exc) -> bool:
        """The job's end where it did not succeed (canceled or failed); whether the exception is handled."""
        if exc_type is JobCanceled:
            canceled = Progress(phase="canceled")
            self._ended(self.records.cancel(self.job_id, canceled, attempt=self.attempt, timings=self.timings))
            return True
        if exc is not None:
            error = JobError(type=exc_type.__name__, detail=str(exc))
            if isinstance(exc, (DeadlinePassed, JobTimeoutException)):
                error = JobError(
                    type="deadline_exceeded",
                    detail=(
                        f"the job ran past FIRE_JOB_TIMEOUT={self.core.settings.job_timeout}s "
                        f"(in phase {self.current_phase!r}); it was stopped"
                    ),
                )
            self._ended(self.records.fail(self.job_id, self.attempt, error, timings=self.timings))
        return False  # re-raise: RQ records the traceback too

    def _ended(self, ended: Ended | None) -> None:
        """This job ended (``ended``: where the transition applied): queue the jobs that waited for it and for
        nothing else any more (its parent once its last cell ended, the cells of a training job)."""
        if ended is not None:
            self.core.jobs.queue_ready(ended.ready)

    @property
    def spec(self) -> SpecT:
        spec = self.record.spec
        if not isinstance(spec, self.spec_type):
            raise TypeError(
                f"job {self.job_id} holds a {type(spec).__name__}, not the {self.spec_type.__name__} it runs"
            )
        return spec

    def phase(self, name: str, **progress) -> None:
        self.check_cancel()
        self.check_deadline()
        self.current_phase = name
        self.records.report_progress(self.job_id, self.attempt, Progress(phase=name, **progress), self.timings)

    @contextmanager
    def timed(self, name: str):
        started = time.perf_counter()
        try:
            yield
        finally:
            self.timings[name] = self.timings.get(name, 0.0) + time.perf_counter() - started

    def check_cancel(self) -> None:
        if self.records.cancel_requested(self.job_id):
            raise JobCanceled()

    def check_deadline(self) -> None:
        if time.time() > self.deadline:
            raise DeadlinePassed()

    def start_path(self, name: str, n_steps: int) -> None:
        """Enter a path phase (a path job's path, a fold's, a cross-validation's refit) of at most ``n_steps`` steps,
        whose progress on_step reports."""
        self.path_phase = (name, n_steps)
        self.phase(name, step=0, n_steps=n_steps)

    def on_step(self, path: PathSpec, step: PathStep) -> bool:
        """Path callback (``path``: the settings of the path it follows): progress at most every
        PROGRESS_INTERVAL_SECONDS; truthy stops the path (canceled, past the deadline, or orphaned: the worker
        that forked this horse is gone and the job will run again elsewhere)."""
        self.steps.append(step)
        if time.monotonic() - self._last_progress >= PROGRESS_INTERVAL_SECONDS:
            self.report_progress(path)
        return self.records.cancel_requested(self.job_id) or time.time() > self.deadline or self.orphaned

    def report_progress(self, path: PathSpec) -> None:
        self._last_progress = time.monotonic()
        step = self.steps[-1]
        best = best_step(self.steps, path.max_rules, path.selection)
        name, n_steps = self.path_phase
        self.path_progress = Progress(
            phase=name,
            step=step.index + 1,
            n_steps=n_steps,
            best=None if best is None else BestStep.of(self.steps[best]),
            **step_values(step, Progress),  # counts of terms, lambda_s, losses and metrics
        )
        self.records.report_progress(self.job_id, self.attempt, self.path_progress)

    @property
    def orphaned(self) -> bool:
        return os.getppid() != self.parent_pid

    def succeed(self, summary, cache_hit: bool | None = None) -> None:
        finished = now()
        self.timings["total"] = finished - self.record.created_at
        record = self.records.get(self.job_id)
        if record is None:
            return  # deleted while it ran: there is nothing left to record the outcome in
        # done: where the path ended (its last step) and the stability fits, where there were any
        progress = (self.path_progress or record.progress).model_copy(
            update={"phase": "done", "fit": record.progress.fit, "n_fits": record.progress.n_fits}
        )
        self._ended(
            self.records.succeed(
                self.job_id,
                self.attempt,
                summary=summary,
                cache_hit=cache_hit,
                timings=self.timings,
                progress=progress,
                finished_at=finished,
            )
        )


def waits(record: JobRecord, started: float, cells: list[JobRecord]) -> dict[str, float]:
    """The waits of a job claimed at ``started``: ``queue_wait``, the time before it started (from its queueing).

    A parent (a cross-validation, a grid, a batch, a path that measures stability) is recorded with its ``cells``
    (``cells_of``: its cells and its stability fits) and queued once they have ended: its work started with its first
    cell. Its ``queue_wait`` runs from its submission to that start, then from there to the last cell's end (the cells
    run side by side): ``folds`` (a cross-validation with folds only), ``stability_fits`` (a path with those only) or
    ``cells``; then ``wait_after_folds`` (``wait_after_stability_fits``, ``wait_after_cells``) from that end to its
    own start. The three add up to ``started - created_at``.
    """
    ran = [cell for cell in cells if cell.started_at is not None and cell.finished_at is not None]
    if not cells_of(record) or len(cells) < len(cells_of(record)) or len(ran) < len(cells):
        # no cells, or some gone (deleted) or never started (canceled while queued)
        return {"queue_wait": max(0.0, started - record.queued_at)}
    first = min(cell.started_at for cell in ran if cell.started_at is not None)
    last = max(cell.finished_at for cell in ran if cell.finished_at is not None)
    if not record.stability_fits:
        name = "folds" if record.kind == "cv" else "cells"
    else:
        name = "cells" if record.cells else "stability_fits"
    return {"queue_wait": first - record.created_at, name: last - first, f"wait_after_{name}": started - last}


def _stored_or_trained_forest(run: JobRun[Any], forest_id: str, recipe: ForestRecipe | None) -> TreeEnsemble:
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


def train_forest(job_id: str, attempt: int) -> None:
    with JobRun(job_id, attempt, TrainJobSpec) as run:
        if not run.claimed:
            return
        spec = run.spec
        _stored_or_trained_forest(run, spec.forest_id, spec.recipe)
        forest = run.core.forests.find(spec.forest_id)
        if forest is None:
            raise RuntimeError(f"forest {spec.forest_id} was deleted while the job ran")
        run.core.results.put(TrainResult(job_id=job_id, forest_id=forest.id, forest=forest))
        run.succeed(TrainSummary(forest_id=forest.id, n_trees=forest.n_trees, n_leaves=forest.n_leaves))


def _cached_leaves(
    run: JobRun[PathJobSpec], forest: TreeEnsemble, dataset_id: str, X: np.ndarray
) -> tuple[np.ndarray, bool]:
    leaves, hit, seconds = run.core.leaf_cache.leaves(forest, run.spec.forest_id, dataset_id, X)
    run.timings["matrix_build"] = run.timings.get("matrix_build", 0.0) + seconds
    return leaves, hit


@dataclass
class _PathData:
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


def _load_path_data(run: JobRun[PathJobSpec], forest: TreeEnsemble) -> _PathData:
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
    return _PathData(X, y, dataset, X_val, y_val, leaves, val_leaves, cache_hit, weight)


def _path_finished(run: JobRun[PathJobSpec]) -> bool:
    """After a path: False where the job must leave its record alone (orphaned: its lost heartbeat gets it run
    again); cancel and deadline raise."""
    run.report_progress(run.spec.path)
    run.check_cancel()
    if run.orphaned:
        run.claimed = False
        return False
    run.check_deadline()
    return True


def run_path(job_id: str, attempt: int) -> None:
    with JobRun(job_id, attempt, PathJobSpec) as run:
        if not run.claimed:
            return
        spec = run.spec
        _check_cells(run, _ended_cells(run, run.record.stability_fits or []), "stability fit")
        forest = _stored_or_trained_forest(run, spec.forest_id, spec.recipe)
        data = _load_path_data(run, forest)
        if spec.fold is not None:
            _run_fold(run, forest, data)
            return
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
        if _path_finished(run):
            _store_fit(run, data, fit)


def _fold_forest(spec: PathJobSpec, forest: TreeEnsemble):
    """The forest of a fold, or of a half-sample fit: trained there from the recipe (the stored forest learned from
    every row), or the uploaded forest itself."""
    return spec.recipe.params if spec.recipe is not None else forest


def _run_fold(run: JobRun[PathJobSpec], forest: TreeEnsemble, data: _PathData) -> None:
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
    if not _path_finished(run):
        return
    with run.timed("rules"):  # what its parent's fold stability reads of its rules (a small document)
        keys = path_rule_keys(fit.step_terms(), data.X)
    train_rows, val_rows = fold_rows(len(data.y), spec.path.cv_folds, spec.path.random_state, spec.fold)
    with run.timed("store"):
        result = _path_job_result(
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


def collect_folds(job_id: str, attempt: int) -> None:
    """Parent of a cross-validated path, queued once every fold and stability fit ended: refits on all the rows over
    the steps every fold reached, each step holding the folds' means (solver.fitting.refit_cross_validated), and
    stores it as a path job stores its fit (the stability measured on the fits' rules)."""
    with JobRun(job_id, attempt, PathJobSpec) as run:
        if not run.claimed:
            return
        cells = _ended_cells(run, run.record.cells or [])
        _check_cells(run, cells, "fold")
        _check_cells(run, _ended_cells(run, run.record.stability_fits or []), "stability fit")
        folds = sorted((_path_result(run, cell.id) for cell in cells), key=lambda r: r.parameters.fold or 0)
        spec = run.spec
        forest = _stored_or_trained_forest(run, spec.forest_id, spec.recipe)
        data = _load_path_data(run, forest)
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
        if _path_finished(run):
            fold_keys = [
                None if f.fold_rules is None else PathRuleKeys.from_dict(f.fold_rules.model_dump()) for f in folds
            ]
            _store_fit(
                run, data, fit, cache_hit=data.cache_hit and all(c.cache_hit for c in cells), fold_keys=fold_keys
            )


def _ended_cells(run: JobRun[Any], cell_ids: list[str]) -> list[JobRecord]:
    """The cells of a parent job (a grid's cells, a cross-validation's folds, a batch's chunks, stability fits),
    every one ended: a parent is queued only once the last of them ended (app/core/records.py)."""
    cells = [cell for cell in run.records.get_many(cell_ids) if cell is not None]
    unfinished = [cell.id for cell in cells if cell.status not in TERMINAL]
    if unfinished or len(cells) < len(cell_ids):
        raise RuntimeError(
            f"job {run.job_id} ran before its cells ended: {unfinished[:5]} unfinished, "
            f"{len(cell_ids) - len(cells)} gone"
        )
    return cells


def _check_cells(run: JobRun[Any], cells: list[JobRecord], what: str) -> None:
    """Every one of ``cells`` (a parent's folds or stability fits) succeeded; else the parent fails naming them."""
    failed = [cell for cell in cells if cell.status != SUCCEEDED]
    if failed:
        raise RuntimeError(
            f"a {what} of job {run.job_id} did not succeed: "
            + "; ".join(f"{c.id}: {c.status} {c.error.detail if c.error else ''}" for c in failed)
        )


def run_stability_fit(job_id: str, attempt: int) -> None:
    """One half-sample fit of a stability measurement (``spec.resample``), a cell of the path that measures it: the
    library's fit of that half alone (solver.stability.half_sample's rows, as solver.fitting.fit_half fits them: the
    path's settings, its row weights, its own forest where the path trains one), stored as a path job stores its fit
    (its steps, and every step's rules: the parent reads the selected step's)."""
    with JobRun(job_id, attempt, PathJobSpec) as run:
        if not run.claimed:
            return
        spec = run.spec
        assert spec.resample is not None
        run.phase("loading")
        with run.timed("load_data"):
            X, y, weight = run.core.datasets.load_fit_arrays(spec.dataset_id, spec.path)
            dataset = run.core.datasets.read(spec.dataset_id)
            # the forest of a half: trained there from the recipe, or the uploaded forest itself
            forest = spec.recipe.params if spec.recipe is not None else run.core.forests.load(spec.forest_id)
        rows = half_sample(len(y), spec.resample, spec.path.random_state)
        half = _PathData(  # the half alone: no validation rows of another dataset, no cached leaves of its forest
            X=X[rows],
            y=y[rows],
            dataset=dataset,
            X_val=None,
            y_val=None,
            leaves=None,
            val_leaves=None,
            cache_hit=False,
            sample_weight=None if weight is None else weight[rows],
        )
        run.start_path("path", spec.path.n_steps)
        with run.timed("path"):
            fit = fit_rules(
                half.X,
                half.y,
                spec.path,
                forest=forest,
                sample_weight=half.sample_weight,
                encoding=dataset.encoding,
                classes=dataset.classes,
                callback=partial(run.on_step, spec.path),
            )
        if _path_finished(run):
            _store_fit(run, half, fit)


def _store_fit(
    run: JobRun[PathJobSpec],
    data: _PathData,
    fit: RuleFit,
    cache_hit: bool | None = None,
    fold_keys: list[PathRuleKeys | None] | None = None,
) -> None:
    """Every step's rules, the stability of the rules where asked, and the path's result; a cross-validation's
    ``fold_keys``: each fold's rules at every step (None: a fold stored before folds kept them)."""
    spec = run.spec
    if fit.val_rows is not None:
        n_val = len(fit.val_rows)
    elif fit.fold_steps is not None:
        n_val = len(fit.train_rows)  # every row, each in its fold
    else:
        assert data.y_val is not None  # fit_rules holds no rows out only where it is given validation rows
        n_val = len(data.y_val)
    run.phase("rules")
    with run.timed("rules"):  # every step's, built once here as the library builds the selected step's
        ensembles = [fit.rules if step == fit.selected else fit.rules_at(step) for step in range(len(fit.path.steps))]
    run.check_deadline()
    stability = None
    if spec.stability_resamples is not None:
        run.phase("stability", fit=spec.stability_resamples, n_fits=spec.stability_resamples)  # every fit ended
        with run.timed("stability"):
            stability = _rule_stability(run, fit, ensembles)
        run.check_deadline()
    cache_hit = data.cache_hit if cache_hit is None else cache_hit
    with run.timed("store"):
        run.core.results.put_rules(run.job_id, ensembles)
        result = _path_job_result(
            run,
            data,
            fit.path,
            fit.selected,
            len(fit.train_rows),
            n_val,
            cache_hit,
            cv=_cross_validation(fit, _fold_stability(data, fit, ensembles, fold_keys)),
            stability=stability,
            survival=_survival_curves(data, fit, ensembles),
        )
        run.core.results.put(result)
    run.succeed(result.summary(), cache_hit=cache_hit)


SURVIVAL_GRID_POINTS = 50


def _survival_curves(data: _PathData, fit: RuleFit, ensembles: list[RuleEnsemble]) -> SurvivalCurves | None:
    """The rules of every step of a path whose rules give survival curves (a Cox model's: a baseline hazard) on its
    validation rows (held out, another dataset's, or every row of a cross-validation): their Kaplan–Meier curve
    beside the mean of each step's S(t | x), on a grid of SURVIVAL_GRID_POINTS times from 0 to their last time or
    the training rows' last follow-up, where the curves end (the library's kaplan_meier and predict_survival)."""
    selected = ensembles[fit.selected]
    if selected.baseline_hazard is None:
        return None
    if fit.val_rows is not None and len(fit.val_rows):
        X, y = data.X[fit.val_rows], data.y[fit.val_rows]
    elif data.X_val is not None and data.y_val is not None:
        X, y = data.X_val, data.y_val
    else:
        X, y = data.X, data.y
    # every step's baseline hazard is of the same training rows: it ends at their last follow-up time
    end = min(float(np.abs(y).max()), float(selected.baseline_hazard[0][-1]))
    times = np.linspace(0.0, end, SURVIVAL_GRID_POINTS)
    steps = [ensemble.predict_survival(X, times).mean(axis=0).tolist() for ensemble in ensembles]
    return SurvivalCurves(
        times=times.tolist(),
        kaplan_meier=kaplan_meier(y, times).tolist(),
        model=steps[fit.selected],
        steps=steps,
    )


def _path_job_result(
    run: JobRun[PathJobSpec], data: _PathData, path, selected: int, n_train: int, n_val: int, cache_hit: bool, **extra
) -> PathJobResult:
    """The stored result of a path job's path (a whole path's, or a fold's): ``extra`` its cv and stability."""
    spec = run.spec
    return PathJobResult(
        job_id=run.job_id,
        source_job_id=run.job_id,
        dataset_id=spec.dataset_id,
        forest_id=spec.forest_id,
        parameters=spec,
        lambda_max=path.lambda_max,
        stop_reason=path.stop_reason,
        n_train=n_train,
        n_val=n_val,
        cache_hit=cache_hit,
        selected=selected,
        steps=path.steps,
        classes=data.dataset.rule_classes(spec.path.loss),
        rule_step=RuleStepChoice.model_validate(path.rule_step(selected).to_dict()),
        **extra,
    )


def _fold_stability(data: _PathData, fit: RuleFit, ensembles: list[RuleEnsemble], fold_keys) -> FoldStability | None:
    """How the refit's rules at each step (``ensembles``) repeat over its folds' paths (the library's
    fold_stability, binned on every row as each fold binned its own; a cross-validated fit in one job, a stability
    fit's, measured it itself); None without every fold's rules."""
    if fold_keys is not None:
        if any(keys is None for keys in fold_keys):
            return None
        fit.measure_fold_stability(fold_keys, data.X, ensembles)
    if fit.fold_stability is None:
        return None
    measured = fit.fold_stability.to_dict()
    return FoldStability(**{name: value for name, value in measured.items() if name != "n_folds"})


def _cross_validation(fit: RuleFit, stability: FoldStability | None) -> CrossValidation | None:
    """What a cross-validated fit chose and from what, how its rules repeat over its folds and the frontier of loss,
    terms and that stability it gives (None for a path with validation rows)."""
    if fit.fold_steps is None:
        return None
    spec, steps = fit.path.spec, fit.path.steps
    best_min, best_1se = best_step(steps, spec.max_rules, "loss"), best_step(steps, spec.max_rules, "1se")
    assert best_min is not None and best_1se is not None  # fit_rules selected a step within the budget
    frontier = None if fit.frontier is None else [FrontierStep.model_validate(step.to_dict()) for step in fit.frontier]
    return CrossValidation(
        folds=len(fit.fold_steps),
        selection=spec.selection,
        best_min=best_min,
        best_1se=best_1se,
        fold_steps=fit.fold_steps,
        stability=stability,
        frontier=frontier,
    )


def _rule_stability(run: JobRun[PathJobSpec], fit: RuleFit, ensembles) -> RuleStability:
    """The selection frequency of every step's rules over the job's half-sample fits (solver.stability), each a
    stability_fit job that ended before this one: the selected rules of each, in resample order (pairs of halves),
    conditions binned on the quantile cuts of this fit's training rows."""
    fits = sorted((_path_result(run, fit_id) for fit_id in run.record.stability_fits or []), key=_resample)
    if len(fits) != run.spec.stability_resamples or [_resample(f) for f in fits] != list(range(len(fits))):
        raise RuntimeError(f"job {run.job_id} has not the {run.spec.stability_resamples} stability fits it measures")
    rules = [_selected_rules(run, half) for half in fits]
    pairs = list(zip(rules[::2], rules[1::2]))
    cuts = reference_cuts(fit.X_train)
    measured = [rule_stability(ensemble, pairs, cuts) for ensemble in ensembles]
    first = measured[0]
    return RuleStability(
        dice=first.dice,
        pair_dice=first.pair_dice,
        n_resamples=first.n_resamples,
        frequencies=[[float(f) for f in m.frequencies] for m in measured],
    )


def _resample(result: PathResultBase) -> int:
    return -1 if result.parameters.resample is None else result.parameters.resample


def _selected_rules(run: JobRun[Any], result: PathResultBase) -> RuleEnsemble:
    """The rules a stability fit selected, as its job stored them."""
    rules = run.core.results.step_rules(result.job_id, result.selected)
    if rules is None:
        raise RuntimeError(f"the rules of stability fit {result.job_id} expired before job {run.job_id} read them")
    return rules


def collect_grid(job_id: str, attempt: int) -> None:
    """Parent of a grid, queued once every cell ended: keeps the cell whose selected step is best by the path's own
    rule (solver.path.best_step)."""
    with JobRun(job_id, attempt, GridJobSpec) as run:
        if not run.claimed:
            return
        cells = _ended_cells(run, run.record.cells or [])
        done = [cell for cell in cells if cell.status == SUCCEEDED]
        if not done:
            raise RuntimeError(
                "no grid cell succeeded: "
                + "; ".join(f"{c.id}: {c.status} {c.error.detail if c.error else ''}" for c in cells)
            )
        results = [_path_result(run, cell.id) for cell in done]
        best = results[
            best_step([r.steps[r.selected] for r in results], run.spec.path.max_rules, run.spec.path.selection)
        ]
        table = [_grid_cell(c) for c in cells]
        result = GridJobResult(
            **{**dict(best), "kind": "grid", "job_id": job_id, "best_cell_id": best.job_id, "grid": table}
        )
        run.core.results.put(result)
        best_path = best.parameters.path
        run.succeed(
            GridSummary(
                **dict(result.summary()),
                best_cell_id=best.job_id,
                best_gamma=best_path.gamma,
                best_fusion_ratio=best_path.fusion_ratio,
            ),
            cache_hit=all(c.cache_hit for c in done),
        )


def _path_result(run: JobRun[Any], cell_id: str) -> PathResultBase:
    """The stored result of a grid's or a cross-validation's succeeded cell: a path job's."""
    result = run.core.job_results.stored_result(cell_id)
    if not isinstance(result, PathResultBase):
        raise TypeError(f"cell {cell_id} holds a {result.kind} result, not a path's")
    return result


def _grid_cell(cell: JobRecord) -> GridCell:
    """A grid's cell (a path job) as its result lists it."""
    if not isinstance(cell.spec, PathJobSpec):
        raise TypeError(f"grid cell {cell.id} holds a {type(cell.spec).__name__}, not a path job's spec")
    path = cell.spec.path
    return GridCell(
        job_id=cell.id, gamma=path.gamma, fusion_ratio=path.fusion_ratio, status=cell.status, summary=cell.summary
    )
