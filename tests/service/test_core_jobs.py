"""The service core without a Redis server or workers (fakeredis): job submission and idempotency, the record's
named transitions, lost-worker recovery (by the watchdog pass only), cancellation, and which rows a trained forest
learned from."""

import gzip
import time

import fakeredis
import numpy as np
import pytest

from app.core.config import Settings
from app.core.container import build_core
from app.core.errors import Conflict, Expired, IdempotencyKeyReused, Invalid, NotFound
from app.core.forests import ForestRecipe, ValidationSplit
from app.core.job_documents import Grid, JobError, LostAttempt, Progress, TrainSummary
from app.core.job_submission import PathJobRequest
from app.core.tenants import DEFAULT_TENANT as TENANT
from solver import TreeEnsemble
from solver.fitting import holdout_split, train_forest
from solver.spec import ForestSpec, PathSpec
from tests.support.data import KIN8NM

SMALL_FOREST = ForestSpec(n_estimators=3, max_depth=2)


@pytest.fixture
def core():
    settings = Settings(
        redis_url="redis://fakeredis",
        key_prefix="unit:",
        queue_name="unit",
        heartbeat_ttl_seconds=0.5,
        max_job_attempts=2,
    )
    return build_core(settings, redis=fakeredis.FakeRedis())


def queued_runs(core) -> list[str]:
    """The RQ ids waiting in the pool's queues (the tenants')."""
    return core.jobs.queues.job_ids(core.settings.queue_name)


def upload(core, data: bytes, target: str = "y"):
    return core.datasets.create(
        data, tenant=TENANT, target=target, content_type="text/csv", filename=None, declared_format=None
    )[0]


@pytest.fixture
def dataset(core):
    return upload(core, KIN8NM.read_bytes())


@pytest.fixture
def other_dataset(core):
    """The first 100 rows of kin8nm as a dataset of their own."""
    return upload(core, b"\n".join(gzip.decompress(KIN8NM.read_bytes()).splitlines()[:101]) + b"\n")


def store_trained_forest(core, dataset, rows: ValidationSplit) -> str:
    X, y = core.datasets.load_arrays(dataset.id)
    recipe = ForestRecipe(dataset_id=dataset.id, params=SMALL_FOREST, rows=rows)
    _, ensemble = train_forest(
        SMALL_FOREST, X[rows.training_rows(len(y))], y[rows.training_rows(len(y))], feature_names=dataset.feature_names
    )
    return core.forests.save(ensemble, recipe, TENANT).id


def test_a_path_job_with_training_parameters_trains_on_its_training_rows(core, dataset, other_dataset):
    record = core.job_submission.submit_path(
        PathJobRequest(
            dataset_id=dataset.id, forest=SMALL_FOREST, path=PathSpec(validation_fraction=0.25, random_state=7)
        ),
        None,
        tenant=TENANT,
    )
    assert record.status == "queued" and record.kind == "path"
    assert record.spec.recipe.rows == ValidationSplit(validation_fraction=0.25, random_state=7)
    assert record.spec.rows == record.spec.recipe.rows  # recorded once, for both
    assert record.spec.forest_id == record.spec.recipe.forest_id
    assert queued_runs(core) == [record.rq_job_id]
    train, validation = holdout_split(dataset.n_rows, 0.25, 7)
    assert np.array_equal(record.spec.recipe.rows.training_rows(dataset.n_rows), train) and len(validation) == 500

    elsewhere = core.job_submission.submit_path(
        PathJobRequest(
            dataset_id=dataset.id, forest=SMALL_FOREST, path=PathSpec(), validation_dataset_id=other_dataset.id
        ),
        None,
        tenant=TENANT,
    )
    assert elsewhere.spec.recipe.rows == ValidationSplit(validation_fraction=0, random_state=0)  # every row
    assert elsewhere.spec.rows == elsewhere.spec.recipe.rows


def test_a_forest_trained_on_the_validation_rows_is_refused(core, dataset, other_dataset):
    same_split = store_trained_forest(core, dataset, ValidationSplit.holdout(0.2, 0))
    every_row = store_trained_forest(core, dataset, ValidationSplit.holdout(0, 0))
    core.job_submission.submit_path(
        PathJobRequest(dataset_id=dataset.id, forest_id=same_split, path=PathSpec()), None, tenant=TENANT
    )
    for forest_id, path in (
        (same_split, PathSpec(random_state=1)),
        (same_split, PathSpec(validation_fraction=0.3)),
        (every_row, PathSpec()),
    ):
        with pytest.raises(Invalid) as caught:
            core.job_submission.submit_path(
                PathJobRequest(dataset_id=dataset.id, forest_id=forest_id, path=path), None, tenant=TENANT
            )
        assert caught.value.faults[0].field == "forest_id" and "validation split" in caught.value.faults[0].fix
    # validation rows from another dataset: a forest trained on every row of this one is fine
    core.job_submission.submit_path(
        PathJobRequest(
            dataset_id=dataset.id, forest_id=every_row, path=PathSpec(), validation_dataset_id=other_dataset.id
        ),
        None,
        tenant=TENANT,
    )
    with pytest.raises(Invalid) as caught:
        core.job_submission.submit_path(
            PathJobRequest(
                dataset_id=dataset.id, forest_id=every_row, path=PathSpec(), validation_dataset_id=dataset.id
            ),
            None,
            tenant=TENANT,
        )
    assert caught.value.faults[0].field == "validation.dataset_id"


def test_data_dependent_checks_name_the_domain_field(core, dataset):
    with pytest.raises(NotFound) as caught:
        core.job_submission.submit_path(
            PathJobRequest(
                dataset_id=dataset.id, forest=SMALL_FOREST, path=PathSpec(), validation_dataset_id="ds_nope"
            ),
            None,
            tenant=TENANT,
        )
    assert caught.value.faults[0].field == "validation.dataset_id"
    with pytest.raises(Invalid) as caught:
        core.job_submission.submit_training(
            dataset.id, SMALL_FOREST.replace(max_features=99), ValidationSplit.holdout(0.2, 0), None, tenant=TENANT
        )
    assert caught.value.faults[0].field == "max_features"
    tiny = upload(core, b"x,y\n1,2\n2,3\n3,5\n")
    with pytest.raises(Invalid) as caught:
        core.job_submission.submit_path(
            PathJobRequest(dataset_id=tiny.id, forest=SMALL_FOREST, path=PathSpec(validation_fraction=0.5)),
            None,
            tenant=TENANT,
        )
    assert caught.value.faults[0].field == "validation.fraction"
    with pytest.raises(NotFound) as caught:
        core.jobs.get("job_nope", tenant=TENANT)
    assert caught.value.faults[0].field == "job_id"


def test_missing_values_are_counted_per_column_and_only_numeric_ones_reach_the_forest(core):
    rng = np.random.default_rng(0)
    rows = [
        f"{'' if i % 7 == 0 else ['red', 'blue'][i % 2]},{rng.normal():.3f},{'' if i % 10 == 3 else i},{i % 3}"
        for i in range(60)
    ]
    table = ("colour,x,count,y\n" + "\n".join(rows) + "\n").encode()
    dataset = upload(core, table)
    assert dataset.missing_values == {"colour": 9, "count": 6}  # rows 0, 7, ..., 56 and 3, 13, ..., 53
    boosting = SMALL_FOREST.replace(kind="gradient_boosting")
    with pytest.raises(Invalid) as caught:  # the empty counts are NaN in the features
        core.job_submission.submit_training(dataset.id, boosting, ValidationSplit.holdout(0.2, 0), None, tenant=TENANT)
    assert caught.value.faults[0].field == "kind"
    categories_only = upload(
        core, ("colour,x,y\n" + "\n".join(r.rsplit(",", 2)[0] + "," + r[-1] for r in rows) + "\n").encode()
    )
    assert categories_only.missing_values == {"colour": 9} and not categories_only.has_missing_features
    record = core.job_submission.submit_training(
        categories_only.id, boosting, ValidationSplit.holdout(0.2, 0), None, tenant=TENANT
    )
    assert record.status == "queued"  # a missing category sets no indicator: nothing missing in the features


def test_idempotency_key_gives_the_same_job_and_refuses_another_request(core, dataset):
    submission = PathJobRequest(dataset_id=dataset.id, forest=SMALL_FOREST, path=PathSpec())
    first = core.job_submission.submit_path(submission, "key-1", tenant=TENANT)
    assert core.job_submission.submit_path(submission, "key-1", tenant=TENANT).id == first.id
    with pytest.raises(IdempotencyKeyReused) as caught:
        core.job_submission.submit_path(
            submission.model_copy(update={"path": PathSpec(n_lambdas=7)}), "key-1", tenant=TENANT
        )
    assert caught.value.faults[0].field == "idempotency_key"
    assert len(queued_runs(core)) == 1


def test_a_grid_trains_its_forest_once_then_runs_one_path_per_cell(core, dataset):
    parent = core.job_submission.submit_path(
        PathJobRequest(
            dataset_id=dataset.id,
            forest=SMALL_FOREST,
            path=PathSpec(max_rules=5),
            grid=Grid(gamma=[1.1, 3.0], fusion_ratio=[0.0, 0.5, 1.0]),
        ),
        None,
        tenant=TENANT,
    )
    cells = core.records.get_many(parent.cells)
    assert parent.kind == "grid" and len(cells) == 6 and len(queued_runs(core)) == 1  # the training job
    assert {(c.spec.path.gamma, c.spec.path.fusion_ratio) for c in cells} == {
        (g, r) for g in (1.1, 3.0) for r in (0.0, 0.5, 1.0)
    }
    assert all(c.spec.path.max_rules == 5 and c.parent_id == parent.id for c in cells)


def queued_training_job(core, dataset):
    return core.job_submission.submit_training(
        dataset.id, SMALL_FOREST, ValidationSplit.holdout(0.2, 0), None, tenant=TENANT
    )


def test_each_transition_applies_only_from_its_statuses_and_on_its_attempt(core, dataset):
    records, record = core.records, queued_training_job(core, dataset)
    progress, summary = Progress(phase="path", step=3), TrainSummary(forest_id="fo_x", n_trees=3, n_leaves=12)
    # queued: only a claim on the current attempt (or a cancel, a retry) applies
    assert not records.report_progress(record.id, 1, progress)
    assert not records.succeed(record.id, 1, summary=summary, cache_hit=None, timings={}, progress=progress)
    assert not records.fail(record.id, 1, JobError(type="x", detail="y"), timings={})
    assert not records.claim(record.id, 2, started_at=time.time(), timings={})  # not its attempt
    assert records.claim(record.id, 1, started_at=time.time(), timings={"queue_wait": 0.5})
    assert records.heartbeat_alive(record.id)  # the claim starts the heartbeat
    assert not records.claim(record.id, 1, started_at=time.time(), timings={})  # claimed once
    # running: the worker of attempt 1 reports and finishes; attempt 2 cannot
    assert not records.report_progress(record.id, 2, progress)
    assert records.report_progress(record.id, 1, progress)
    assert not records.succeed(record.id, 2, summary=summary, cache_hit=None, timings={}, progress=progress)
    assert records.succeed(record.id, 1, summary=summary, cache_hit=False, timings={"total": 1.0}, progress=progress)
    stored = records.get(record.id)
    assert stored.status == "succeeded" and stored.summary == summary and stored.progress.step == 3
    assert stored.finished_at is not None and stored.timings == {"total": 1.0} and stored.cache_hit is False
    # succeeded is final
    lost = LostAttempt(attempt=1, lost_at=time.time(), reason="gone")
    assert not records.cancel(record.id, Progress(phase="canceled"))
    assert not records.fail(record.id, 1, JobError(type="x", detail="y"), timings={})
    assert records.retry_lost(stored, lost) is None and not records.fail_lost(stored, lost)
    assert not records.report_progress(record.id, 1, progress)
    assert records.get(record.id) == stored
    assert record.id not in {r.id for r in records.unfinished()}


def test_a_canceled_job_is_never_overwritten_by_its_worker_learning_of_it_late(core, dataset):
    records, record = core.records, queued_training_job(core, dataset)
    assert records.claim(record.id, 1, started_at=time.time(), timings={})
    assert core.jobs.cancel(record.id, tenant=TENANT).status == "canceled"
    assert records.cancel_requested(record.id)
    assert not records.report_progress(record.id, 1, Progress(phase="path"))
    assert not records.succeed(record.id, 1, summary=None, cache_hit=None, timings={}, progress=Progress(phase="done"))
    assert not records.fail(record.id, 1, JobError(type="x", detail="y"), timings={})
    assert not records.cancel(record.id, Progress(phase="canceled"), attempt=1)  # canceled once
    assert records.get(record.id).status == "canceled"


def test_a_retried_attempt_is_never_overwritten_by_the_lost_one(core, dataset):
    records, record = core.records, queued_training_job(core, dataset)
    assert records.claim(record.id, 1, started_at=time.time(), timings={})
    lost = LostAttempt(attempt=1, lost_at=time.time(), reason="gone")
    retried = records.retry_lost(records.get(record.id), lost)
    assert retried.status == "queued" and retried.attempt == 2 and retried.rq_job_id == f"{record.id}-2"
    assert retried == records.get(record.id) and retried.history == [lost] and retried.started_at is None
    assert records.retry_lost(records.get(record.id), lost) is None  # once per lost attempt
    assert not records.fail_lost(records.get(record.id), lost)
    assert not records.claim(record.id, 1, started_at=time.time(), timings={})
    assert not records.report_progress(record.id, 1, Progress(phase="path"))
    assert not records.fail(record.id, 1, JobError(type="x", detail="y"), timings={})
    assert not records.cancel(record.id, Progress(phase="canceled"), attempt=1)
    assert records.claim(record.id, 2, started_at=time.time(), timings={})
    assert records.fail_lost(records.get(record.id), LostAttempt(attempt=2, lost_at=time.time(), reason="gone again"))
    failed = records.get(record.id)
    assert failed.status == "failed" and failed.error == JobError(
        type="worker_lost", detail="gone again; tried 2 times"
    )
    assert [entry.attempt for entry in failed.history] == [1, 2]


def test_reads_leave_a_lost_worker_s_job_alone_the_watchdog_retries_it_then_fails_it(core, dataset):
    record = queued_training_job(core, dataset)
    assert core.jobs.watch_running() == 0  # queued moments ago, in the queue
    for attempt in (1, 2):
        assert core.records.claim(record.id, attempt, started_at=time.time() - 5, timings={})
        core.records.stop_beating(record.id)  # the worker is gone
        queued = list(queued_runs(core))
        reads = [
            core.jobs.get(record.id, tenant=TENANT),
            core.jobs.read(record.id),
            *core.jobs.list(tenant=TENANT),
            *core.jobs.using(TENANT, dataset_id=dataset.id),
        ]
        assert [(read.status, read.attempt) for read in reads] == [("running", attempt)] * 4
        with pytest.raises(Conflict):
            core.job_results.result(record.id, tenant=TENANT)
        assert core.records.get(record.id) == reads[0] and queued_runs(core) == queued  # nothing changed
        assert core.jobs.watch_running() == 1
        after = core.jobs.get(record.id, tenant=TENANT)
        if attempt == 1:
            assert after.status == "queued" and after.attempt == 2 and after.progress.retry_of_attempt == 1
            assert after.rq_job_id in queued_runs(core)
    assert after.status == "failed" and after.error.type == "worker_lost"
    assert [lost.attempt for lost in after.history] == [1, 2]
    assert core.jobs.watch_running() == 0


def test_cancel_and_results_of_unfinished_jobs(core, dataset):
    record = core.job_submission.submit_training(
        dataset.id, SMALL_FOREST, ValidationSplit.holdout(0.2, 0), None, tenant=TENANT
    )
    with pytest.raises(Conflict) as caught:
        core.job_results.result(record.id, tenant=TENANT)
    assert caught.value.retry_after == 1
    canceled = core.jobs.cancel(record.id, tenant=TENANT)
    assert canceled.status == "canceled" and len(queued_runs(core)) == 0
    assert core.jobs.cancel(record.id, tenant=TENANT) == canceled  # a cancel sent again is answered as the first
    other = queued_training_job(core, dataset)
    core.records.claim(other.id, 1, started_at=time.time(), timings={})
    core.records.fail(other.id, 1, JobError(type="x", detail="y"), timings={})
    with pytest.raises(Conflict) as caught:
        core.jobs.cancel(other.id, tenant=TENANT)  # it ended otherwise: nothing to cancel
    assert caught.value.faults[0].field == "job_id" and caught.value.retry_after is None


def test_a_path_job_needs_a_forest(core, dataset):
    with pytest.raises(Invalid) as caught:
        core.job_submission.submit_path(PathJobRequest(dataset_id=dataset.id, path=PathSpec()), None, tenant=TENANT)
    assert caught.value.faults[0].field == "forest_id" and len(queued_runs(core)) == 0


def test_a_job_deleted_while_it_is_canceled_is_not_found(core, dataset, monkeypatch):
    record = queued_training_job(core, dataset)
    cancel_all = core.jobs._cancel_all

    def cancel_then_delete(jobs):
        cancel_all(jobs)
        core.records.delete_all(jobs)  # a DELETE of the job, answered meanwhile

    monkeypatch.setattr(core.jobs, "_cancel_all", cancel_then_delete)
    with pytest.raises(NotFound):
        core.jobs.cancel(record.id, tenant=TENANT)


def test_a_training_job_deleted_while_it_trains_ends_quietly(core, dataset, monkeypatch):
    import worker.fit_data
    import worker.runs
    import worker.tasks

    record = queued_training_job(core, dataset)
    train = worker.fit_data.train_ensemble

    def train_then_delete(*args, **kwargs):
        trained = train(*args, **kwargs)
        core.jobs.delete(record.id, tenant=TENANT)
        return trained

    monkeypatch.setattr(worker.runs, "core", lambda: core)
    monkeypatch.setattr(worker.fit_data, "train_ensemble", train_then_delete)
    worker.tasks.train_forest(record.id, record.attempt)
    assert core.records.get(record.id) is None


def test_a_stored_forest_records_its_training_rows(core, dataset):
    forest_id = store_trained_forest(core, dataset, ValidationSplit.holdout(0.2, 0))
    info = core.forests.get(forest_id, tenant=TENANT)
    assert info.source.type == "training" and info.source.rows == ValidationSplit(
        validation_fraction=0.2, random_state=0
    )
    assert isinstance(core.forests.load(forest_id), TreeEnsemble)
    assert [forest.id for forest in core.forests.list(tenant=TENANT)] == [forest_id]


def test_a_recipe_keeps_its_forest_id_and_stored_names():
    """ValidationSplit's ``random_state`` is stored and served as ``seed``: the ids of stored forests (a hash of the
    recipe's JSON) stay as they were, and a stored recipe reads back."""
    recipe = ForestRecipe(dataset_id="ds_0123", params=SMALL_FOREST, rows=ValidationSplit.holdout(0.25, 7))
    assert recipe.forest_id == "fo_d25e93a5b557bf6380c37ffe04e02e50"  # as computed before the rename
    assert (
        ForestRecipe(
            dataset_id="ds_0123", params=SMALL_FOREST, rows=ValidationSplit.holdout(0, 3), loss="logistic"
        ).forest_id
        == "fo_c57ca99ac2cfbcf379a0c5b3a0409051"
    )
    stored = recipe.model_dump(mode="json")
    assert stored["rows"] == {"validation_fraction": 0.25, "seed": 7}
    assert ForestRecipe.model_validate(stored) == recipe
    assert ForestRecipe.model_validate_json(recipe.model_dump_json()).rows.random_state == 7


def test_a_path_job_stores_every_steps_rules_and_reads_serve_them_as_stored(core, dataset, monkeypatch):
    """Issue 28, item 2: the worker builds each step's rules once, as the library does (``RuleFit.rules_at``),
    stores them with the result, and a read serves them without the table or the forest."""
    import worker.runs
    import worker.tasks
    from solver.fitting import fit_rules

    path = PathSpec(n_lambdas=6, validation_fraction=0.25, random_state=3)
    forest_id = store_trained_forest(core, dataset, ValidationSplit.for_path(path, None))
    job = core.job_submission.submit_path(
        PathJobRequest(dataset_id=dataset.id, forest_id=forest_id, path=path), None, tenant=TENANT
    )
    monkeypatch.setattr(worker.runs, "core", lambda: core)
    worker.tasks.run_path(job.id, job.attempt)
    result = core.job_results.path_result(job.id, tenant=TENANT)
    X, y = core.datasets.load_arrays(dataset.id)
    fit = fit_rules(X, y, path, forest=core.forests.load(forest_id), encoding=dataset.encoding)
    assert len(result.steps) == len(fit.path.steps)

    def unreachable(*args, **kwargs):
        raise AssertionError("a read of stored rules loads no table and no forest")

    monkeypatch.setattr(core.datasets, "load_arrays", unreachable)
    monkeypatch.setattr(core.forests, "load", unreachable)
    for step in range(len(result.steps)):
        _, served = core.job_results.step_rules(job.id, step, tenant=TENANT)
        assert served.to_dict() == fit.rules_at(step).to_dict()
    assert core.job_results.step_rules(job.id, fit.selected, tenant=TENANT)[1].to_dict() == fit.rules.to_dict()

    core.blobs.delete(core.results.keys.job_rules(job.id))
    with pytest.raises(Expired, match="not stored"):
        core.job_results.step_rules(job.id, 0, tenant=TENANT)
