"""What every job function shares: ``JobRun`` claims a queued job for one attempt and records its progress and
outcome; a parent job's cells (``ended_cells``, ``check_cells``) and their stored results (``path_result``)."""

import os
import time
from contextlib import contextmanager
from functools import lru_cache
from typing import Any, Generic, TypeVar

from rq.timeouts import JobTimeoutException

from app.core.config import get_settings
from app.core.container import Core, build_core
from app.core.job_documents import (
    SUCCEEDED,
    TERMINAL,
    BestStep,
    JobError,
    JobRecord,
    PathJobSpec,
    Progress,
    TrainJobSpec,
    step_values,
)
from app.core.job_lifecycle import cells_of
from app.core.records import Ended, now
from app.core.result_documents import PathResultBase
from solver import threads
from solver.path import PathStep, best_step
from solver.spec import PathSpec


@lru_cache(maxsize=1)
def core() -> Core:
    settings = get_settings()
    return build_core(settings, redis_patience=settings.redis_outage_seconds)  # ride out a Redis restart


class JobCanceled(Exception):
    pass


class DeadlinePassed(Exception):
    """The job ran past FIRE_JOB_TIMEOUT (checked at every step and phase; RQ's alarm covers long phases)."""


SpecT = TypeVar("SpecT", bound=TrainJobSpec | PathJobSpec)  # the spec a job function runs


PROGRESS_INTERVAL_SECONDS = 0.1


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


def path_finished(run: JobRun[PathJobSpec]) -> bool:
    """After a path: False where the job must leave its record alone (orphaned: its lost heartbeat gets it run
    again); cancel and deadline raise."""
    run.report_progress(run.spec.path)
    run.check_cancel()
    if run.orphaned:
        run.claimed = False
        return False
    run.check_deadline()
    return True


def ended_cells(run: JobRun[Any], cell_ids: list[str]) -> list[JobRecord]:
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


def check_cells(run: JobRun[Any], cells: list[JobRecord], what: str) -> None:
    """Every one of ``cells`` (a parent's folds or stability fits) succeeded; else the parent fails naming them."""
    failed = [cell for cell in cells if cell.status != SUCCEEDED]
    if failed:
        raise RuntimeError(
            f"a {what} of job {run.job_id} did not succeed: "
            + "; ".join(f"{c.id}: {c.status} {c.error.detail if c.error else ''}" for c in failed)
        )


def path_result(run: JobRun[Any], cell_id: str) -> PathResultBase:
    """The stored result of a grid's or a cross-validation's succeeded cell: a path job's."""
    result = run.core.job_results.stored_result(cell_id)
    if not isinstance(result, PathResultBase):
        raise TypeError(f"cell {cell_id} holds a {result.kind} result, not a path's")
    return result
