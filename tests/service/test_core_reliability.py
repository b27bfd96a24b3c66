"""The core's reliability rules without a Redis server (fakeredis): idempotent submission and promotion that
survive a failure half-way, the per-tenant limit on active jobs, API keys kept hashed, readiness from fresh
worker heartbeats, the leaf-matrix cache degrading to no cache, and bounded metrics labels."""

import time

import fakeredis
import numpy as np
import pytest
from fastapi.testclient import TestClient
from redis.exceptions import ConnectionError as RedisConnectionError

from app.core.blobs import BlobStore
from app.core.config import Settings
from app.core.container import build_core
from app.core.errors import TooMany
from app.core.job_submission import PathJobRequest
from app.core.leaf_cache import LeafMatrixCache
from app.core.tenants import TenantKeys, key_digest, parse_entry
from app.core.workers import READY, WARMING, WorkerRegistry
from app.main import create_app
from solver.spec import ForestSpec, PathSpec
from tests.support.data import KIN8NM
from tests.support.problems import assert_problem

TENANT = "acme"
SMALL_FOREST = ForestSpec(n_estimators=3, max_depth=2)


@pytest.fixture
def core():
    settings = Settings(
        redis_url="redis://fakeredis", key_prefix="rel:", queue_name="rel", max_active_jobs=3, heartbeat_ttl_seconds=0.2
    )
    return build_core(settings, redis=fakeredis.FakeRedis())


@pytest.fixture
def dataset(core):
    return core.datasets.create(
        KIN8NM.read_bytes(), tenant=TENANT, target="y", content_type="text/csv", filename=None, declared_format=None
    )[0]


def submission(dataset, **path) -> PathJobRequest:
    return PathJobRequest(dataset_id=dataset.id, forest=SMALL_FOREST, path=PathSpec(**path))


def test_a_submission_that_fails_after_recording_its_job_keeps_its_idempotency_key(core, dataset, monkeypatch):
    def enqueue_fails(records):
        raise RedisConnectionError("lost the connection while queueing")

    monkeypatch.setattr(core.jobs, "enqueue_all", enqueue_fails)
    with pytest.raises(RedisConnectionError):
        core.job_submission.submit_path(submission(dataset), "retry-me", tenant=TENANT)
    monkeypatch.undo()
    retried = core.job_submission.submit_path(submission(dataset), "retry-me", tenant=TENANT)
    assert [record.id for record in core.jobs.list(tenant=TENANT)] == [retried.id]  # no duplicate job
    # the job was recorded but never queued: the watchdog's pass after the heartbeat TTL queues it again
    time.sleep(0.25)
    assert core.jobs.get(retried.id, tenant=TENANT).attempt == 1  # a read changes nothing
    assert core.jobs.watch_running() == 1
    requeued = core.jobs.get(retried.id, tenant=TENANT)
    assert requeued.attempt == 2 and requeued.rq_job_id in core.jobs.queues.job_ids(core.settings.queue_name)


def test_a_submission_that_stored_nothing_frees_its_idempotency_key(core, dataset, monkeypatch):
    monkeypatch.setattr(core.records, "create", lambda record: (_ for _ in ()).throw(RedisConnectionError("down")))
    with pytest.raises(RedisConnectionError):
        core.job_submission.submit_path(submission(dataset), "fresh", tenant=TENANT)
    monkeypatch.undo()
    assert core.job_submission.submit_path(submission(dataset), "fresh", tenant=TENANT).attempt == 1


def test_a_tenant_may_have_so_many_active_submissions(core, dataset):
    jobs = [
        core.job_submission.submit_path(submission(dataset, n_lambdas=5 + k), None, tenant=TENANT) for k in range(3)
    ]
    with pytest.raises(TooMany) as caught:
        core.job_submission.submit_path(submission(dataset, n_lambdas=9), None, tenant=TENANT)
    assert caught.value.retry_after and caught.value.faults[0].field == "tenant"
    core.jobs.cancel(jobs[0].id, tenant=TENANT)  # a finished submission frees its place
    core.job_submission.submit_path(submission(dataset, n_lambdas=9), None, tenant=TENANT)


def test_api_keys_are_kept_hashed_and_name_their_tenant():
    keys = TenantKeys(
        [
            parse_entry("alice=s3cret"),
            parse_entry(f"bob=sha256:{key_digest(b'other').hex()}"),
            parse_entry("anonymous-key"),
        ]
    )
    assert all(b"s3cret" not in key.digest for key in keys.keys)
    assert keys.tenant_of(b"s3cret") == "alice" and keys.tenant_of(b"other") == "bob"
    assert keys.tenant_of(b"anonymous-key").startswith("key-") and keys.tenant_of(b"wrong") is None
    assert keys.tenant_of("kéy".encode("latin-1")) is None
    for bad in ("alice=", "bad name=key", "x=k\u00e9y"):
        with pytest.raises(ValueError, match=r"API key|tenant name"):
            parse_entry(bad)


def test_readiness_counts_only_workers_with_a_fresh_heartbeat():
    settings = Settings(redis_url="redis://fakeredis", key_prefix="beat:", heartbeat_ttl_seconds=0.3)
    registry = WorkerRegistry(settings, fakeredis.FakeRedis())
    registry.beat("a", WARMING, ["fire"], time.time())
    registry.beat("b", READY, ["fire", "other"], time.time())
    registry.beat("c", READY, ["elsewhere"], time.time())
    assert sorted((w.name, w.state) for w in registry.alive("fire")) == [("a", WARMING), ("b", READY)]
    time.sleep(0.35)
    registry.beat("b", READY, ["fire"], time.time())
    assert [w.name for w in registry.alive("fire")] == ["b"]


class DownRedis(fakeredis.FakeRedis):
    def execute_command(self, *args, **kwargs):
        raise RedisConnectionError("cache down")


def test_the_leaf_matrix_cache_degrades_to_no_cache_when_its_redis_fails():
    from solver import leaf_matrix
    from solver.fitting import train_forest

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(50, 3)), rng.normal(size=50)
    _, forest = train_forest(SMALL_FOREST, X, y)
    stats = fakeredis.FakeRedis()
    settings = Settings(
        redis_url="redis://fakeredis", key_prefix="deg:", cache_ttl_seconds=60, cache_backoff_seconds=30
    )
    cache = LeafMatrixCache(settings, BlobStore(DownRedis(), 1 << 20), stats)
    leaves, hit, _ = cache.leaves(forest, "fo_a", "ds_a", X)
    assert not hit and np.array_equal(leaves, leaf_matrix(forest, X).leaves)
    assert cache.counts()["failure"] == 1
    cache.leaves(forest, "fo_a", "ds_a", X)
    assert cache.counts()["failure"] == 1  # skipped during the backoff, not waited for again


def test_metrics_labels_stay_bounded_whatever_the_requests():
    settings = Settings(redis_url="redis://fakeredis", key_prefix="metrics:", queue_name="metrics")
    client = TestClient(create_app(core=build_core(settings, redis=fakeredis.FakeRedis())))
    size_before = len(client.get("/metrics").text)
    for index in range(200):
        client.request(f"M{index}", f"/made/up/{index}")
    text = client.get("/metrics").text
    assert 'method="OTHER"' in text and "M17" not in text and "/made/up/17" not in text
    assert len(text) < size_before + 4000


def test_unknown_job_events_are_404_before_any_stream():
    settings = Settings(redis_url="redis://fakeredis", key_prefix="events:", queue_name="events")
    client = TestClient(create_app(core=build_core(settings, redis=fakeredis.FakeRedis())))
    response = client.get("/v1/jobs/job_unknown/events")
    assert_problem(response, 404, "path.job_id")


def test_blobs_read_and_written_by_many_threads_at_once():
    """The API answers reads in a thread pool: blobs compressed and inflated in parallel come back intact
    (one zstd context shared by the threads failed such reads now and then with a 500)."""
    from concurrent.futures import ThreadPoolExecutor

    blobs = BlobStore(fakeredis.FakeRedis(), chunk_bytes=1 << 16)
    rng = np.random.default_rng(0)
    payloads = {f"blob:{i}": rng.integers(0, 4, 200_000, dtype=np.uint8).tobytes() for i in range(8)}

    def round_trips(key: str) -> bool:
        for _ in range(40):
            blobs.put(key, payloads[key])
            if blobs.get(key) != payloads[key]:
                return False
        return True

    with ThreadPoolExecutor(len(payloads)) as pool:
        assert all(pool.map(round_trips, payloads))


def test_a_blob_of_parts_reads_one_part_without_the_others_and_goes_whole():
    """A path's rules are one blob of parts (a step each, ``BlobStore.put_parts``): each part is compressed and
    chunked on its own, a read inflates that part only, and delete and touch treat the blob as any other."""
    redis = fakeredis.FakeRedis()
    blobs = BlobStore(redis, chunk_bytes=64)
    rng = np.random.default_rng(1)
    parts = [b"", b"short", rng.integers(0, 255, 5_000, dtype=np.uint8).tobytes(), b"x" * 300]
    blobs.put_parts("parts", parts, ttl=60)
    assert [blobs.get_part("parts", index) for index in range(len(parts))] == parts
    assert blobs.get_part("parts", len(parts)) is None and blobs.get_part("parts", -1) is None
    assert blobs.get_part("absent", 0) is None
    assert 0 < redis.ttl("parts") <= 60 and 0 < redis.ttl("parts:3") <= 60
    blobs.delete("parts")
    assert list(redis.scan_iter()) == []
