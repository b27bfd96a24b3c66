"""One tenant cannot hold up another (issue 38, items 4 and 6), on the service core without a Redis server
(fakeredis): each tenant's jobs go to a queue of its own, taken from in turn; a tenant's limit counts work units
(chunks, folds, cells, stability fits); a job taken by a worker that died before claiming it is queued again by the
watchdog's next pass; the API's CPU lanes leave a lane to another tenant and serve waiting tenants in turn."""

import asyncio
import threading
import time

import fakeredis
import pytest
from rq.exceptions import NoSuchJobError
from rq.job import Job
from rq.serializers import JSONSerializer

from app.api.cpu_lanes import FairLanes
from app.core.config import Settings
from app.core.container import build_core
from app.core.errors import TooLarge, TooMany
from app.core.forests import ValidationSplit
from app.core.job_documents import Grid
from app.core.job_submission import PathJobRequest
from app.core.queues import make_queue
from app.core.workers import READY
from solver.spec import ForestSpec, PathSpec
from tests.support.data import KIN8NM

SMALL_FOREST = ForestSpec(n_estimators=3, max_depth=2)
POOL = "fair"


@pytest.fixture
def core():
    settings = Settings(
        redis_url="redis://fakeredis",
        key_prefix="fair:",
        queue_name=POOL,
        max_active_units=40,
        heartbeat_ttl_seconds=0.5,
    )
    return build_core(settings, redis=fakeredis.FakeRedis())


@pytest.fixture
def datasets(core):
    """The kin8nm table uploaded by tenants a, b and c: tenant -> dataset id."""
    return {
        tenant: core.datasets.create(
            KIN8NM.read_bytes(), tenant=tenant, target="y", content_type="text/csv", filename=None, declared_format=None
        )[0].id
        for tenant in ("a", "b", "c")
    }


def train(core, datasets, tenant: str, trees: int = 3):
    forest = ForestSpec(n_estimators=trees, max_depth=2)
    return core.job_submission.submit_training(
        datasets[tenant], forest, ValidationSplit.holdout(0.2, 0), None, tenant=tenant
    )


def test_each_tenant_s_jobs_go_to_its_queue_and_workers_take_the_tenants_in_turn(core, datasets):
    jobs = {
        tenant: [train(core, datasets, tenant, 3 + k).rq_job_id for k in range(n)]
        for tenant, n in zip("abc", (5, 1, 2))
    }
    queues = core.jobs.queues
    assert queues.names(POOL) == [POOL, f"{POOL}:a", f"{POOL}:b", f"{POOL}:c"]  # found as the tenants appeared
    assert {name: make_queue(name, core.redis).job_ids for name in queues.names(POOL)[1:]} == {
        f"{POOL}:{tenant}": ids for tenant, ids in jobs.items()
    }
    taken = [queues.take(POOL, "worker-1") for _ in range(9)]
    a, b, c = jobs["a"], jobs["b"], jobs["c"]
    # a, b, c in turn, each tenant's in the order queued; then those that still have jobs
    assert [rq_id for _, rq_id in taken[:8]] == [a[0], b[0], c[0], a[1], c[1], a[2], a[3], a[4]]
    assert taken[8] is None and queues.queued(POOL) == 0
    assert set(queues.taken()) == set(a + b + c) and set(queues.taken().values()) == {"worker-1"}
    queues.release(a[0])
    assert a[0] not in queues.taken()


def test_a_tenant_that_appears_takes_its_turn_before_the_one_that_queued_first(core, datasets):
    queued = [train(core, datasets, "a", 3 + k).rq_job_id for k in range(4)]
    queues = core.jobs.queues
    assert queues.take(POOL, "w")[1] == queued[0]
    late = train(core, datasets, "c").rq_job_id
    assert [queues.take(POOL, "w")[1] for _ in range(2)] == [late, queued[1]]


def test_a_tenant_s_limit_counts_work_units(core, datasets):
    """kin8nm, 40 units at most: a cross-validation of 5 folds and 10 stability fits that trains its forest first is
    17 units (5 folds, the refit, 10 fits, the forest)."""
    cv = PathJobRequest(
        dataset_id=datasets["a"], forest=SMALL_FOREST, path=PathSpec(cv_folds=5), stability_resamples=10
    )
    first = core.job_submission.submit_path(cv, None, tenant="a")
    second = core.job_submission.submit_path(cv.model_copy(update={"stability_resamples": 12}), None, tenant="a")
    with pytest.raises(TooMany) as caught:  # 36 held, 17 more
        core.job_submission.submit_path(cv, None, tenant="a")
    assert caught.value.retry_after and caught.value.faults[0].field == "tenant"
    assert caught.value.faults[0].message == "36 active work units, 17 more asked"
    assert "FIRE_MAX_ACTIVE_UNITS" in caught.value.faults[0].fix
    theirs = cv.model_copy(update={"dataset_id": datasets["b"]})
    core.job_submission.submit_path(theirs, None, tenant="b")  # another tenant's units are its own
    for _ in range(4):  # a path of its own is one unit: 40
        train(core, datasets, "a")
    with pytest.raises(TooMany):
        train(core, datasets, "a")
    core.jobs.cancel(first.id, tenant="a")  # a finished submission frees its units
    train(core, datasets, "a")
    grid = PathJobRequest(
        dataset_id=datasets["c"], forest=SMALL_FOREST, path=PathSpec(), grid=Grid(gamma=[2, 3, 4], fusion_ratio=[0, 1])
    )
    with pytest.raises(TooLarge) as too_large:  # 6 cells of 1 + 6 fits each, and the forest: more than 40 on its own
        core.job_submission.submit_path(grid.model_copy(update={"stability_resamples": 6}), None, tenant="c")
    assert too_large.value.faults[0].message.startswith("43 work units")
    assert second.status == "queued"


def test_a_batch_counts_its_chunks_as_they_are_read(core, datasets):
    submission = core.job_submission
    submission._admit("a", "job_batch", 1)  # the batch itself, then its chunks in groups
    submission._admit_more("a", "job_batch", 20)
    submission._admit("a", "job_other", 10)
    with pytest.raises(TooMany) as caught:
        submission._admit_more("a", "job_batch", 10)
    assert caught.value.faults[0].message == "31 active work units, 10 more asked"
    with pytest.raises(TooLarge):  # that batch alone would pass the limit: retrying does not help
        submission._admit_more("a", "job_batch", 20)
    core.records.withdraw("a", "job_batch")  # its submission failed: its units are free
    submission._admit("a", "job_third", 30)


def test_a_job_taken_by_a_worker_that_stopped_before_claiming_it_is_queued_again(core, datasets):
    record = train(core, datasets, "a")
    queues = core.jobs.queues
    core.workers.beat("alive", READY, [POOL], time.time())
    assert queues.take(POOL, "alive") == (f"{POOL}:a", record.rq_job_id)
    assert core.jobs.watch_running() == 0  # its worker beats: its run goes on
    time.sleep(0.6)  # the worker's last beat is past the heartbeat TTL: it is lost
    assert core.jobs.watch_running() == 1
    retried = core.jobs.get(record.id, tenant="a")
    assert retried.status == "queued" and retried.attempt == 2 and retried.progress.retry_of_attempt == 1
    assert "took the job from its queue" in retried.history[0].reason
    assert queues.taken() == {} and make_queue(f"{POOL}:a", core.redis).job_ids == [retried.rq_job_id]
    with pytest.raises(NoSuchJobError):  # the lost run is gone: no worker will end it
        Job.fetch(record.rq_job_id, connection=core.redis, serializer=JSONSerializer)
    # a mark whose job moved on (claimed, here by the retry) is dropped with its worker, nothing retried
    queues.take(POOL, "gone")
    assert core.records.claim(record.id, 2, started_at=time.time(), timings={})
    assert core.jobs.watch_running() == 0 and queues.taken() == {}
    assert core.jobs.get(record.id, tenant="a").attempt == 2


def test_a_tenant_leaves_a_lane_to_others_and_waiting_tenants_are_served_in_turn():
    """Two lanes, one a tenant's at most: tenant a's four uploads take one lane, b's and c's requests the other as
    it frees, in turn with a's (a, b, c, a), each tenant's in order."""
    started: list[str] = []
    release = {name: threading.Event() for name in ("a1", "a2", "a3", "a4", "b1", "c1")}

    def work(name: str) -> str:
        started.append(name)
        release[name].wait(5)
        return name

    async def scenario():
        lanes = FairLanes(2, 1)
        runs = {}
        for name in ("a1", "a2", "b1", "a3", "c1", "a4"):
            runs[name] = asyncio.create_task(lanes.run(name[0], work, name))
            await asyncio.sleep(0.02)
        assert started == ["a1", "b1"]  # a2 waits for a's lane though the other is free... for b
        for name in ("b1", "a1", "c1", "a2", "a3", "a4"):
            release[name].set()
            assert await runs[name] == name
            await asyncio.sleep(0.02)
        return lanes

    lanes = asyncio.run(scenario())
    # b1 freed its lane to c1 (a holds one already); a1's went to a2, then a3, a4
    assert started == ["a1", "b1", "c1", "a2", "a3", "a4"]
    assert lanes.held == {} and lanes.waiting == {}


def test_a_request_dropped_while_it_waits_for_a_lane_gives_its_turn_away():
    release = threading.Event()

    async def scenario():
        lanes = FairLanes(1, 1)
        held = asyncio.create_task(lanes.run("a", release.wait, 5))
        await asyncio.sleep(0.02)
        dropped = asyncio.create_task(lanes.run("b", lambda: "never"))
        waiting = asyncio.create_task(lanes.run("c", lambda: "c ran"))
        await asyncio.sleep(0.02)
        dropped.cancel()
        release.set()
        await held
        assert await waiting == "c ran" and dropped.cancelled()
        return lanes

    lanes = asyncio.run(scenario())
    assert lanes.held == {} and lanes.waiting == {}
