"""The Redis key layout is the one app/core/keys.py documents: the keys are those written before (data stored by an
earlier version is still found), and every key the stores write under the prefix is one of them (fakeredis, a
path job run in-process)."""

import gzip
import re
import time

import fakeredis
import pytest

from app.core.config import Settings
from app.core.container import build_core
from app.core.drift import DriftThresholds
from app.core.forests import ForestRecipe, ValidationSplit
from app.core.job_submission import PathJobRequest
from app.core.keys import Keys
from app.core.tenants import DEFAULT_TENANT
from app.core.workers import READY
from solver.fitting import train_forest
from solver.spec import ForestSpec, PathSpec
from tests.support.data import KIN8NM

OTHER = "acme"
SMALL_FOREST = ForestSpec(n_estimators=3, max_depth=2)
ANY = "*"  # stands for one id, tenant or name in the patterns below


def test_the_keys_are_the_documented_ones():
    keys = Keys("p:")
    assert keys.dataset("ds_1") == "p:dataset:ds_1" and keys.dataset_arrays("ds_1") == "p:dataset:ds_1:arrays"
    assert keys.forest("fo_1") == "p:forest:fo_1" and keys.forest_trees("fo_1") == "p:forest:fo_1:trees"
    assert keys.model("mdl_1") == "p:model:mdl_1"
    assert [
        keys.job("j"),
        keys.job_heartbeat("j"),
        keys.job_cancel("j"),
        keys.job_result("j"),
        keys.job_rules("j"),
        keys.job_weights("j"),
        keys.job_waiting("j"),
    ] == [
        "p:job:j",
        "p:job:j:heartbeat",
        "p:job:j:cancel",
        "p:job:j:result",
        "p:job:j:rules",
        "p:job:j:coefs",
        "p:job:j:waiting",
    ]
    assert [keys.batch_counts("j", 3), keys.batch_counted("j")] == ["p:job:j:batch-counts:3", "p:job:j:batch-counted"]
    assert [keys.all_jobs, keys.unfinished_jobs, keys.stats, keys.worker_beats, keys.worker_states] == [
        "p:jobs",
        "p:unfinished-jobs",
        "p:stats",
        "p:workers",
        "p:worker-states",
    ]
    assert [keys.queues, keys.queue_turn("fire"), keys.taken_jobs] == ["p:queues", "p:queue-turn:fire", "p:taken-jobs"]
    assert keys.leaf_cache("fo_1", "ds_1") == "p:leafcache:fo_1:ds_1"
    assert keys.leaf_caches(forest_id="fo_1") == "p:leafcache:fo_1:*"
    assert keys.leaf_caches(dataset_id="ds_1") == "p:leafcache:*:ds_1"
    for tenant, scope in ((DEFAULT_TENANT, "p:"), (OTHER, "p:tenant:acme:")):  # the default keeps the old keys
        assert [
            keys.datasets(tenant),
            keys.forests(tenant),
            keys.models(tenant),
            keys.jobs(tenant),
            keys.active_jobs(tenant),
            keys.active_units(tenant),
            keys.model_version(tenant, "m"),
            keys.idempotency(tenant, "job", "h"),
        ] == [
            scope + name
            for name in (
                "datasets",
                "forests",
                "models",
                "jobs",
                "active-jobs",
                "active-units",
                "model-version:m",
                "idempotency:job:h",
            )
        ]


def documented_patterns(keys: Keys) -> list[re.Pattern]:
    """Every key of the layout, ``ANY`` standing for one id; blobs with their chunks (``{key}:{i}``)."""
    blobs = [
        keys.dataset(ANY),
        keys.dataset_arrays(ANY),
        keys.forest(ANY),
        keys.forest_trees(ANY),
        keys.model(ANY),
        keys.model_profile(ANY),
        keys.model_monitoring(ANY),
        keys.job_result(ANY),
        keys.job_rules(ANY),
        keys.job_weights(ANY),
        keys.leaf_cache(ANY, ANY),
    ]
    others = [
        keys.job(ANY),
        keys.job_heartbeat(ANY),
        keys.job_cancel(ANY),
        keys.job_waiting(ANY),
        keys.batch_counts(ANY, ANY),
        keys.batch_counted(ANY),
        keys.all_jobs,
        keys.unfinished_jobs,
        keys.stats,
        keys.worker_beats,
        keys.worker_states,
        keys.drift_window(ANY, ANY, ANY, ANY),
        keys.drift_models,
        keys.queues,
        keys.queue_turn(ANY),
        keys.taken_jobs,
    ]
    for tenant in (DEFAULT_TENANT, ANY):
        others += [
            keys.datasets(tenant),
            keys.forests(tenant),
            keys.models(tenant),
            keys.jobs(tenant),
            keys.active_jobs(tenant),
            keys.active_units(tenant),
            keys.model_version(tenant, ANY),
            keys.model_names(tenant),
            keys.name_versions(tenant, ANY),
            keys.name_aliases(tenant, ANY),
            keys.name_history(tenant, ANY),
            keys.names_registered(tenant),
            keys.idempotency(tenant, ANY, ANY),
        ]

    def regex(key: str, suffix: str = "") -> re.Pattern:
        return re.compile(re.escape(key).replace(re.escape(ANY), "[^:]+") + suffix)

    return [regex(key, r"(:\d+)?") for key in blobs] + [regex(key) for key in others]


@pytest.fixture
def core():
    settings = Settings(redis_url="redis://fakeredis", key_prefix="keys:", queue_name="keys")
    return build_core(settings, redis=fakeredis.FakeRedis())


def test_every_key_written_is_a_documented_one_in_its_tenants_place(core, monkeypatch):
    import worker.runs
    import worker.tasks

    keys, redis = Keys.from_settings(core.settings), core.redis
    rows = b"\n".join(gzip.decompress(KIN8NM.read_bytes()).splitlines()[:201]) + b"\n"
    dataset, _ = core.datasets.create(
        rows, tenant=DEFAULT_TENANT, target="y", content_type="text/csv", filename=None, declared_format=None
    )
    theirs, _ = core.datasets.create(
        rows, tenant=OTHER, target="y", content_type="text/csv", filename=None, declared_format=None
    )
    path = PathSpec(n_lambdas=5)
    X, y = core.datasets.load_arrays(dataset.id)
    recipe = ForestRecipe(dataset_id=dataset.id, params=SMALL_FOREST, rows=ValidationSplit.for_path(path, None))
    train = recipe.rows.training_rows(len(y))
    _, ensemble = train_forest(SMALL_FOREST, X[train], y[train], feature_names=dataset.feature_names)
    forest = core.forests.save(ensemble, recipe, DEFAULT_TENANT)
    job = core.job_submission.submit_path(
        PathJobRequest(dataset_id=dataset.id, forest_id=forest.id, path=path), "first", tenant=DEFAULT_TENANT
    )
    monkeypatch.setattr(worker.runs, "core", lambda: core)
    worker.tasks.run_path(job.id, job.attempt)  # its result, its steps' rules and the leaf-matrix cache
    model = core.models.promote(job.id, None, "kin", None, tenant=DEFAULT_TENANT, idempotency_key="promoted")
    core.monitor.record(core.models.scoring_model(model.id, DEFAULT_TENANT), X[:5])  # drift windows
    core.monitor.flush()
    core.monitoring.set_thresholds(model.id, DriftThresholds(psi=0.1), tenant=DEFAULT_TENANT)
    waiting = core.job_submission.submit_training(
        theirs.id, SMALL_FOREST, ValidationSplit.holdout(0, 0), "again", tenant=OTHER
    )
    core.jobs.cancel(waiting.id, tenant=OTHER)
    cross_validation = core.job_submission.submit_path(  # its folds wait for their forest, it for them and its fits
        PathJobRequest(
            dataset_id=theirs.id, forest=SMALL_FOREST, path=PathSpec(n_lambdas=5, cv_folds=2), stability_resamples=2
        ),
        None,
        tenant=OTHER,
    )
    core.workers.beat("w1", READY, ["keys"], time.time())

    written = {key.decode() for key in redis.scan_iter(match=keys.prefix + "*")}
    patterns = documented_patterns(keys)
    assert [key for key in written if not any(p.fullmatch(key) for p in patterns)] == []
    assert {
        keys.dataset(dataset.id),
        keys.dataset_arrays(dataset.id),
        keys.forest(forest.id),
        keys.forest_trees(forest.id),
        keys.model(model.id),
        keys.model_profile(model.id),
        keys.model_monitoring(model.id),
        keys.drift_models,
        keys.job(job.id),
        keys.job_result(job.id),
        keys.job_rules(job.id),
        keys.leaf_cache(forest.id, dataset.id),
        keys.job_cancel(waiting.id),
        keys.job_waiting(cross_validation.id),
        *(keys.job_waiting(fold) for fold in cross_validation.cells),
        keys.stats,
        keys.worker_beats,
        keys.worker_states,
    } <= written
    assert any(key.startswith(keys.drift_windows(model.id)[:-1]) for key in written)
    # the default tenant's indexes where they were before tenants existed, another tenant's under its scope
    assert redis.zscore("keys:datasets", dataset.id) and redis.zscore("keys:forests", forest.id)
    assert redis.zscore("keys:models", model.id) and redis.get("keys:model-version:kin") == b"1"
    assert redis.zscore("keys:tenant:acme:datasets", theirs.id) and redis.zscore("keys:tenant:acme:jobs", waiting.id)
    assert not redis.exists("keys:tenant:default:datasets") and not redis.zscore("keys:datasets", theirs.id)
    idempotency = [key for key in written if ":idempotency:" in key]
    assert sorted(key.rsplit(":", 1)[0] for key in idempotency) == [
        "keys:idempotency:job",
        "keys:idempotency:model",
        "keys:tenant:acme:idempotency:job",
    ]

    core.leaf_cache.forget(forest_id=forest.id)  # through the blob store, chunks included
    assert not list(redis.scan_iter(match=keys.leaf_caches(forest_id=forest.id) + "*"))
