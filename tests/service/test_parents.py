"""Parents queued by the count of their cells (issue 38, item 5), and stability fits run as cells (issue 39).

A parent (a grid, a cross-validation, a batch, a path that measures stability) is recorded with no RQ run; the
transition that ends each of its cells counts it down, and the one that ends the last queues it, once: whatever the
order in which the cells end, however often one was retried, and when the last two end at the same moment (real
Redis, threads). The watchdog leaves a waiting parent alone and queues again one whose queueing was lost; a parent
queued twice runs once (its run claims its record). The half-sample fits of a stability measurement, each a job of
its own, give the library's serial computation bit for bit: each fit's rules are solver.fitting.fit_half's on
solver.stability.half_sample_pairs' rows, and the job's stability is solver.stability.rule_stability of those.
(A cell's worker killed and the cell retried while its parent completes, once: tests/service/test_cross_validation.py
and test_batch_scoring.py.)
"""

import threading
import time

import fakeredis
import numpy as np
import pytest
from redis import Redis
from sklearn.datasets import load_diabetes

import worker.runs
import worker.tasks
from app.core.config import Settings
from app.core.container import build_core
from app.core.job_documents import BatchChunkSpec, BatchJobSpec, JobError, LostAttempt, Progress
from app.core.job_submission import PathJobRequest
from app.core.result_documents import FoldStability
from app.core.tenants import DEFAULT_TENANT as TENANT
from solver.fitting import fit_half_samples, fit_rules
from solver.spec import ForestSpec, PathSpec
from solver.stability import half_sample_pairs, reference_cuts, rule_stability

FOREST = ForestSpec(n_estimators=10, max_depth=3, random_state=0)


@pytest.fixture
def core(monkeypatch):
    settings = Settings(
        redis_url="redis://fakeredis", key_prefix="parents:", queue_name="parents", heartbeat_ttl_seconds=0.2
    )
    core = build_core(settings, redis=fakeredis.FakeRedis())
    monkeypatch.setattr(worker.runs, "core", lambda: core)
    return core


def queued_runs(core) -> list[str]:
    return core.jobs.queues.job_ids(core.settings.queue_name)


def diabetes(core):
    table = load_diabetes(as_frame=True).frame.to_csv(index=False).encode()
    return core.datasets.create(
        table, tenant=TENANT, target="target", content_type="text/csv", filename=None, declared_format=None
    )[0]


def submit(core, *, folds: int | None = 3, resamples: int | None = None) -> str:
    path = PathSpec(n_lambdas=12, max_rules=20, cv_folds=folds, random_state=0)
    request = PathJobRequest(dataset_id=diabetes(core).id, forest=FOREST, path=path, stability_resamples=resamples)
    return core.job_submission.submit_path(request, None, tenant=TENANT).id


def batch(core, n_chunks: int) -> tuple[str, list[str]]:
    """A batch parent and its chunk jobs, recorded and queued as a submission records them (no rows: the
    transitions alone are exercised)."""
    parent_id = f"job_{time.time_ns():x}"
    chunks = [
        core.jobs.new(
            "batch_chunk",
            BatchChunkSpec(batch_id=parent_id, model_id="mdl_x", chunk=k, first_row=k, n_rows=1, explain=False),
            TENANT,
            parent_id=parent_id,
        )
        for k in range(n_chunks)
    ]
    core.jobs.create_all([(chunk, {}) for chunk in chunks])
    spec = BatchJobSpec(
        model_id="mdl_x",
        model_name="m",
        model_version=1,
        source="a.csv",
        output_format="parquet",
        explain=False,
        chunk_rows=1,
        n_rows=n_chunks,
        n_chunks=n_chunks,
    )
    parent = core.jobs.new("batch", spec, TENANT, job_id=parent_id, cells=[chunk.id for chunk in chunks])
    core.jobs.create_all([(parent, {"batch_chunk": n_chunks})])
    return parent_id, [chunk.id for chunk in chunks]


def end(core, job_id: str, attempt: int = 1):
    """Claim ``job_id`` on ``attempt`` and end it (succeeded): the transition's answer."""
    assert core.records.claim(job_id, attempt, started_at=time.time(), timings={})
    return core.records.succeed(
        job_id, attempt, summary=None, cache_hit=None, timings={}, progress=Progress(phase="done")
    )


def test_a_parent_is_queued_once_by_the_last_of_its_cells_however_they_end_and_were_retried(core):
    parent_id, chunks = batch(core, 4)
    parent = core.records.get(parent_id)
    assert parent.rq_job_id not in queued_runs(core) and parent.progress.unfinished == 4

    # chunk 0: its worker lost, retried on attempt 2, which ends it: counted once
    assert core.records.claim(chunks[0], 1, started_at=time.time(), timings={})
    lost = LostAttempt(attempt=1, lost_at=time.time(), reason="killed")
    retried = core.records.retry_lost(core.records.get(chunks[0]), lost)
    assert core.records.get(parent_id).progress.unfinished == 4  # a retry ends nothing
    assert end(core, retried.id, attempt=2).ready == ()
    again = core.records.succeed(chunks[0], 2, summary=None, cache_hit=None, timings={}, progress=Progress(phase="x"))
    assert again is None  # ended once: no second count
    assert core.records.get(parent_id).progress.unfinished == 3
    # chunk 1 fails, chunk 2 is canceled by the API, chunk 3 succeeds: the last to end names the parent
    assert core.records.claim(chunks[1], 1, started_at=time.time(), timings={})
    assert core.records.fail(chunks[1], 1, JobError(type="x", detail="y"), timings={}).ready == ()
    assert core.records.cancel(chunks[2], Progress(phase="canceled")).ready == ()
    assert core.records.get(parent_id).progress.unfinished == 1 and parent.rq_job_id not in queued_runs(core)
    ended = end(core, chunks[3])
    assert ended.ready == (parent_id,)
    core.jobs.queue_ready(ended.ready)
    assert queued_runs(core).count(parent.rq_job_id) == 1 and core.records.get(parent_id).progress.unfinished == 0
    assert core.records.cancel(chunks[3], Progress(phase="canceled")) is None  # final: nothing counts again

    # queued twice (a run of it duplicated): the first run claims the record, the second finds it claimed
    assert core.records.claim(parent_id, 1, started_at=time.time(), timings={})
    assert not core.records.claim(parent_id, 1, started_at=time.time(), timings={})


def test_cells_that_all_ended_before_their_parent_was_recorded_queue_it_as_it_is_recorded(core):
    parent_id = "job_recordedlast"
    chunk = core.jobs.new(
        "batch_chunk",
        BatchChunkSpec(batch_id=parent_id, model_id="mdl_x", chunk=0, first_row=0, n_rows=1, explain=False),
        TENANT,
        parent_id=parent_id,
    )
    core.jobs.create_all([(chunk, {})])
    assert end(core, chunk.id).ready == ()  # its parent is not recorded yet: counted below 0
    spec = BatchJobSpec(
        model_id="mdl_x",
        model_name="m",
        model_version=1,
        source="a.csv",
        output_format="parquet",
        explain=False,
        chunk_rows=1,
        n_rows=1,
        n_chunks=1,
    )
    parent = core.jobs.new("batch", spec, TENANT, job_id=parent_id, cells=[chunk.id])
    core.jobs.create_all([(parent, {"batch_chunk": 1})])
    assert queued_runs(core).count(parent.rq_job_id) == 1


def test_the_watchdog_leaves_a_waiting_parent_alone_and_queues_a_ready_one_whose_queueing_was_lost(core):
    parent_id, chunks = batch(core, 2)
    time.sleep(0.25)  # past the heartbeat TTL: a job with no run would read as lost
    assert core.jobs.watch_running() == 0  # the parent waits: it has no run to lose
    for chunk in chunks:
        end(core, chunk)  # the cells' worker died before queueing the parent (no queue_ready)
    parent = core.records.get(parent_id)
    assert parent.status == "queued" and parent.rq_job_id not in queued_runs(core)
    assert core.jobs.watch_running() == 0  # ready moments ago (queued_at): not lost yet
    time.sleep(0.25)
    assert core.jobs.watch_running() == 1
    again = core.records.get(parent_id)
    assert again.attempt == 2 and queued_runs(core).count(again.rq_job_id) == 1
    assert parent.rq_job_id not in queued_runs(core)  # attempt 1 never queued: one run in all


@pytest.mark.integration
def test_the_last_two_cells_ending_at_the_same_moment_queue_their_parent_once(isolated_settings):
    core = build_core(isolated_settings, redis=Redis.from_url(isolated_settings.redis_url))
    for _ in range(30):
        parent_id, chunks = batch(core, 2)
        for chunk in chunks:
            assert core.records.claim(chunk, 1, started_at=time.time(), timings={})
        answers = end_at_once(core, chunks)
        assert sorted(answers) == [(), (parent_id,)]
        assert queued_runs(core).count(core.records.get(parent_id).rq_job_id) == 1


def end_at_once(core, chunks: list[str]) -> list[tuple[str, ...]]:
    """End the claimed ``chunks`` from a thread each, released together, each queueing what it names as ready: what
    each transition answered."""
    start = threading.Barrier(len(chunks))
    answers: list[tuple[str, ...]] = []

    def finish(chunk: str) -> None:
        start.wait()
        ended = core.records.succeed(chunk, 1, summary=None, cache_hit=None, timings={}, progress=Progress(phase="x"))
        answers.append(ended.ready)
        core.jobs.queue_ready(ended.ready)

    threads = [threading.Thread(target=finish, args=(chunk,)) for chunk in chunks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


# ---- stability fits as cells --------------------------------------------------------------------------------------


def timeless(step) -> dict:
    """A path step's figures but its seconds."""
    return {name: value for name, value in step.to_dict().items() if name != "seconds"}


def run_cells(core, parent_id: str) -> None:
    """Every cell of a parent, in this process, as the worker pool would run them (any order)."""
    parent = core.records.get(parent_id)
    for fit_id in reversed(parent.stability_fits or []):
        worker.tasks.run_stability_fit(fit_id, 1)
    for cell_id in parent.cells or []:
        worker.tasks.run_path(cell_id, 1)


@pytest.mark.parametrize("folds", [3, None], ids=["cross-validation", "path"])
def test_stability_fits_as_cells_give_the_librarys_serial_stability_bit_for_bit(core, folds):
    resamples = 4
    parent_id = submit(core, folds=folds, resamples=resamples)
    parent = core.records.get(parent_id)
    assert len(parent.stability_fits) == resamples and (parent.cells is None) == (folds is None)
    assert (parent.progress.phase, parent.progress.fit, parent.progress.n_fits) == (
        "folds" if folds else "stability",
        0,
        resamples,
    )
    run_cells(core, parent_id)
    assert queued_runs(core).count(parent.rq_job_id) == 1
    (worker.tasks.collect_folds if folds else worker.tasks.run_path)(parent_id, 1)
    assert core.records.get(parent_id).status == "succeeded"
    result = core.job_results.path_result(parent_id, tenant=TENANT)

    # the library's serial computation on the rows the job read
    spec = parent.spec.path
    X, y, _ = core.datasets.load_fit_arrays(parent.spec.dataset_id, spec)
    encoding = core.datasets.read(parent.spec.dataset_id).encoding
    fit = fit_rules(X, y, spec, forest=FOREST, encoding=encoding)
    pairs = fit_half_samples(X, y, spec, resamples // 2, forest=FOREST, encoding=encoding)
    halves = [rows for pair in half_sample_pairs(len(y), resamples // 2, spec.random_state) for rows in pair]
    for k, fit_id in enumerate(parent.stability_fits):
        half = core.job_results.path_result(fit_id, tenant=TENANT)
        assert half.parameters.resample == k
        if folds:  # cross-validated: every row of the half is a training row and a validation row of a fold
            assert half.n_train == half.n_val == len(halves[k])
        else:
            assert half.n_train + half.n_val == len(halves[k])
        rules = core.results.step_rules(fit_id, half.selected)
        assert rules.to_dict() == pairs[k // 2][k % 2].to_dict()
    cuts = reference_cuts(fit.X_train)
    expected = [rule_stability(fit.rules_at(step), pairs, cuts) for step in range(len(fit.path.steps))]
    assert [timeless(step) for step in result.steps] == [timeless(step) for step in fit.path.steps]
    assert result.selected == fit.selected
    assert result.stability.dice == expected[0].dice and result.stability.pair_dice == expected[0].pair_dice
    assert result.stability.n_resamples == resamples
    assert result.stability.frequencies == [[float(f) for f in e.frequencies] for e in expected]
    assert np.isfinite(result.stability.dice)
    if folds:  # issue 39: the folds' stability too, from what each fold job stored of its rules, as the library's
        assert result.cv is not None and fit.fold_stability is not None
        assert result.cv.stability == FoldStability(
            dice=fit.fold_stability.dice, frequencies=fit.fold_stability.to_dict()["frequencies"]
        )
        half = core.job_results.path_result(
            parent.stability_fits[0], tenant=TENANT
        )  # a fit of one job measures its own
        alone_fit = fit_rules(X[halves[0]], y[halves[0]], spec, forest=FOREST, encoding=encoding)
        alone = alone_fit.fold_stability
        assert half.cv.stability.model_dump() == {"dice": alone.dice, "frequencies": alone.to_dict()["frequencies"]}
        # and the frontier of loss, terms and that stability, the library's, both ways
        assert [f.model_dump() for f in result.cv.frontier] == [f.to_dict() for f in fit.frontier]
        assert [f.model_dump() for f in half.cv.frontier] == [f.to_dict() for f in alone_fit.frontier]
