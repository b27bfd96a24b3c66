"""Issue 37, item 6: a job's progress names every phase and its timings each phase's time, true to the records.

A cross-validated job with half-sample fits runs in this process (the worker's job functions on fakeredis, every
step reported): its folds and its stability fits are cells of their own, and while it waits for them its progress
counts them (``unfinished`` folds, then stability ``fit`` of ``n_fits``) from the count that queues it once the
last ended (issue 38); it then refits (step k of the steps every fold reached), builds the rules and measures their
stability on the fits' rules; its queue wait, cells and wait after them add up to its recorded timestamps. The
browser test of the same figures on the page is tests/service/test_cv_dashboard.py.
"""

import fakeredis
import pytest
from sklearn.datasets import load_diabetes

import worker.runs
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
    monkeypatch.setattr(worker.runs, "core", lambda: core)
    monkeypatch.setattr(worker.runs, "PROGRESS_INTERVAL_SECONDS", 0.0)  # every step reports
    return core


@pytest.fixture
def written(core, monkeypatch) -> list[tuple[str, Progress]]:
    """Every progress write of a running job that applied, in order: (job id, progress)."""
    writes: list[tuple[str, Progress]] = []
    write = core.records.report_progress

    def spied(job_id, *args, **kwargs):
        applied = write(job_id, *args, **kwargs)
        if applied:
            writes.append((job_id, core.records.get(job_id).progress))
        return applied

    monkeypatch.setattr(core.records, "report_progress", spied)
    return writes


def queued_runs(core) -> list[str]:
    return core.jobs.queues.job_ids(core.settings.queue_name)


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
    parent = core.records.get(parent_id)
    cells, fits = parent.cells, parent.stability_fits
    assert len(cells) == FOLDS and len(fits) == FITS
    assert (parent.progress.phase, parent.progress.unfinished, parent.progress.fit) == ("folds", FOLDS, 0)
    for done, cell_id in enumerate(cells, start=1):
        assert parent.rq_job_id not in queued_runs(core)  # it waits for its cells: no run of it is queued
        worker.tasks.run_path(cell_id, 1)
        progress = core.records.get(parent_id).progress  # the parent, waiting for its cells, counts them
        phase = "folds" if done < FOLDS else "stability"  # once only its stability fits are left
        assert (progress.phase, progress.unfinished, progress.fit, progress.n_fits) == (phase, FOLDS - done, 0, FITS)
    for done, fit_id in enumerate(fits, start=1):
        assert parent.rq_job_id not in queued_runs(core)
        worker.tasks.run_stability_fit(fit_id, 1)
        progress = core.records.get(parent_id).progress
        assert (progress.phase, progress.unfinished, progress.fit, progress.n_fits) == ("stability", 0, done, FITS)
    assert queued_runs(core).count(parent.rq_job_id) == 1  # queued once, by the last cell to end
    worker.tasks.collect_folds(parent_id, 1)

    parent = core.records.get(parent_id)
    folds = [core.records.get(cell_id) for cell_id in cells]
    ended = folds + [core.records.get(fit_id) for fit_id in fits]
    result = core.job_results.path_result(parent_id, tenant=TENANT)
    common = min(len(core.job_results.path_result(cell_id, tenant=TENANT).steps) for cell_id in cells)
    assert parent.status == "succeeded" and len(result.steps) <= common

    ours = [progress for job_id, progress in written if job_id == parent_id]
    phases = [progress.phase for progress in ours]
    refit = [progress for progress in ours if progress.phase == "refit"]
    assert [p.step for p in refit[: len(result.steps) + 1]] == list(range(len(result.steps) + 1))
    assert all(p.n_steps == common for p in refit)  # at most the steps every fold reached
    assert all(p.n_terms == p.n_rules + p.n_linear for p in refit if p.step)  # a step's counts once it has one
    stability = [(p.fit, p.n_fits) for p in ours if p.phase == "stability"]
    assert stability == [(FITS, FITS)]  # every fit had ended: the parent measures on their rules
    order = [phase for k, phase in enumerate(phases) if k == 0 or phase != phases[k - 1]]
    assert order == ["loading", "matrix", "refit", "rules", "stability"]
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

    # the timings are the records' timestamps: its work began with its first cell (folds and fits)
    timings = parent.timings
    first, last = min(cell.started_at for cell in ended), max(cell.finished_at for cell in ended)
    assert timings["queue_wait"] == pytest.approx(first - parent.created_at, abs=1e-6)
    assert timings["cells"] == pytest.approx(last - first, abs=1e-6)
    assert timings["wait_after_cells"] == pytest.approx(parent.started_at - last, abs=1e-6)
    assert timings["total"] == pytest.approx(parent.finished_at - parent.created_at, abs=1e-6)
    assert timings["refit"] + timings["rules"] + timings["stability"] <= parent.finished_at - parent.started_at
    assert "path" not in timings  # the parent's path is its refit, named so
    for fold in folds:
        assert fold.timings["queue_wait"] == pytest.approx(fold.started_at - fold.queued_at, abs=1e-6)
        assert fold.timings["total"] == pytest.approx(fold.finished_at - fold.created_at, abs=1e-6)
        assert set(fold.timings) >= {"queue_wait", "path", "total"}
