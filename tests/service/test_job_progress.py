"""Issue 37, item 6: a job's progress names every phase and its timings each phase's time, true to the records.

A cross-validated job with half-sample fits runs in this process (the worker's job functions on fakeredis, every
step reported): each fold that ends counts in its parent's progress while the parent is queued behind them, the
parent then refits (step k of the steps every fold reached), builds the rules and counts its stability fits; its
queue wait, folds and wait after them add up to its recorded timestamps. The browser test of the same figures on
the page is tests/service/test_cv_dashboard.py.
"""

import fakeredis
import pytest
from sklearn.datasets import load_diabetes

import worker.tasks
from app.core.config import Settings
from app.core.container import build_core
from app.core.job_documents import Progress
from app.core.job_submission import PathJobRequest
from app.core.tenants import DEFAULT_TENANT as TENANT
from solver.spec import ForestSpec, PathSpec

FOLDS, FITS = 3, 2


@pytest.fixture
def core(monkeypatch):
    settings = Settings(redis_url="redis://fakeredis", key_prefix="progress:", queue_name="progress")
    core = build_core(settings, redis=fakeredis.FakeRedis())
    monkeypatch.setattr(worker.tasks, "core", lambda: core)
    monkeypatch.setattr(worker.tasks, "PROGRESS_INTERVAL_SECONDS", 0.0)  # every step reports
    return core


@pytest.fixture
def written(core, monkeypatch) -> list[tuple[str, Progress]]:
    """Every progress write that applied, in order: (job id, progress)."""
    writes: list[tuple[str, Progress]] = []
    records = core.records
    for name in ("report_progress", "report_cells"):
        write = getattr(records, name)

        def spied(job_id, *args, write=write, **kwargs):
            applied = write(job_id, *args, **kwargs)
            if applied:
                writes.append((job_id, core.records.get(job_id).progress))
            return applied

        monkeypatch.setattr(records, name, spied)
    return writes


def submit(core) -> str:
    table = load_diabetes(as_frame=True).frame.to_csv(index=False).encode()
    dataset = core.datasets.create(
        table, tenant=TENANT, target="target", content_type="text/csv", filename=None, declared_format=None
    )[0]
    request = PathJobRequest(
        dataset_id=dataset.id,
        forest=ForestSpec(n_estimators=10, max_depth=3, random_state=0),
        path=PathSpec(n_lambdas=12, max_rules=20, cv_folds=FOLDS, selection="1se", random_state=0),
        stability_resamples=FITS,
    )
    return core.job_submission.submit_path(request, None, tenant=TENANT).id


def test_a_cross_validation_reports_its_folds_refit_and_stability_fits_and_times_each(core, written):
    parent_id = submit(core)
    cells = core.records.get(parent_id).cells
    for done, cell_id in enumerate(cells, start=1):
        worker.tasks.run_path(cell_id, 1)
        progress = core.records.get(parent_id).progress  # the parent, queued behind its folds, counts them
        assert (progress.phase, progress.unfinished) == ("folds", FOLDS - done)
    worker.tasks.collect_folds(parent_id, 1)

    parent = core.records.get(parent_id)
    folds = [core.records.get(cell_id) for cell_id in cells]
    result = core.job_results.path_result(parent_id, tenant=TENANT)
    common = min(len(core.job_results.path_result(cell_id, tenant=TENANT).steps) for cell_id in cells)
    assert parent.status == "succeeded" and len(result.steps) <= common

    ours = [progress for job_id, progress in written if job_id == parent_id]
    phases = [progress.phase for progress in ours]
    assert phases[:FOLDS] == ["folds"] * FOLDS and [p.unfinished for p in ours[:FOLDS]] == [2, 1, 0]
    refit = [progress for progress in ours if progress.phase == "refit"]
    assert [p.step for p in refit[: len(result.steps) + 1]] == list(range(len(result.steps) + 1))
    assert all(p.n_steps == common for p in refit)  # at most the steps every fold reached
    assert all(p.n_terms == p.n_rules + p.n_linear for p in refit if p.step)  # a step's counts once it has one
    stability = [(p.fit, p.n_fits) for p in ours if p.phase == "stability"]
    assert stability == [(k, FITS) for k in range(FITS + 1)]
    order = [phase for k, phase in enumerate(phases) if k == 0 or phase != phases[k - 1]]
    assert order == ["folds", "loading", "matrix", "refit", "rules", "stability"]
    done = parent.progress  # where the refit ended, and the fits
    assert (done.phase, done.step, done.n_steps, done.fit, done.n_fits) == (
        "done",
        len(result.steps),
        common,
        FITS,
        FITS,
    )
    assert (done.n_terms, done.n_rules, done.n_linear) == tuple(
        getattr(result.steps[-1], name) for name in ("n_terms", "n_rules", "n_linear")
    )

    # the timings are the records' timestamps: its work began with its first fold
    timings = parent.timings
    first, last = min(fold.started_at for fold in folds), max(fold.finished_at for fold in folds)
    assert timings["queue_wait"] == pytest.approx(first - parent.created_at, abs=1e-6)
    assert timings["folds"] == pytest.approx(last - first, abs=1e-6)
    assert timings["wait_after_folds"] == pytest.approx(parent.started_at - last, abs=1e-6)
    assert timings["total"] == pytest.approx(parent.finished_at - parent.created_at, abs=1e-6)
    assert timings["refit"] + timings["rules"] + timings["stability"] <= parent.finished_at - parent.started_at
    assert "path" not in timings  # the parent's path is its refit, named so
    for fold in folds:
        assert fold.timings["queue_wait"] == pytest.approx(fold.started_at - fold.queued_at, abs=1e-6)
        assert fold.timings["total"] == pytest.approx(fold.finished_at - fold.created_at, abs=1e-6)
        assert set(fold.timings) >= {"queue_wait", "path", "total"}


def test_a_fold_that_counts_late_does_not_undo_a_later_count(core):
    """Two folds ending at once may count their parent's unfinished cells in either order: the smaller stays."""
    parent_id = submit(core)
    assert core.records.report_cells(parent_id, Progress(phase="folds", unfinished=1))
    assert not core.records.report_cells(parent_id, Progress(phase="folds", unfinished=2))
    assert core.records.get(parent_id).progress.unfinished == 1
    assert core.records.report_cells(parent_id, Progress(phase="folds", unfinished=0))
    core.records.claim(parent_id, 1, started_at=0.0, timings={})
    assert not core.records.report_cells(parent_id, Progress(phase="folds", unfinished=0))  # running: its own now
