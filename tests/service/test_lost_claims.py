"""A worker killed anywhere between taking a job and the job's first heartbeat (issue 38, item 6): the API's
watchdog queues the job again within seconds, not after RQ's cleanup of its intermediate queue minutes later, and
the job runs to success exactly once.

Each point is patched into a worker of the test's own (tests/support/kill_points.py) that is SIGKILLed there with
its work horse; a sound worker started after the kill runs the job's next attempt. The test stack's heartbeats
(1 s, lost after 4 s, a watchdog pass each second) make the recovery take seconds; with the defaults (5 s, 20 s,
10 s) it takes at most the heartbeat TTL and one watchdog pass, 30 s."""

import sys
import time

import pytest
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus
from rq.serializers import JSONSerializer

from tests.support.kill_points import POINTS
from tests.support.service import ServiceStack, WorkerProcess, make_settings

# a forest that takes a few seconds to train (on the 2-core machine): its worker beats for the job before it ends
SLOW_FOREST = {"n_estimators": 1000, "max_depth": 10, "max_features": 0.5}


@pytest.fixture(scope="module")
def watched():
    """The API (its watchdog) on a queue of its own, no worker: each test starts its own."""
    with ServiceStack(make_settings(), n_workers=0) as running:
        yield running


@pytest.fixture(scope="module")
def abalone(watched) -> str:
    return watched.upload_dataset()["id"]


def killed_at(point: str, stack: ServiceStack) -> WorkerProcess:
    argv = [sys.executable, "-c", f"from tests.support.kill_points import main; main({point!r})"]
    return WorkerProcess(stack.settings, argv=argv)


@pytest.mark.parametrize("point", list(POINTS))
def test_a_worker_killed_in_the_claim_is_replaced_within_seconds_and_the_job_runs_once(watched, abalone, point):
    stack = watched
    settings = stack.settings
    killer = killed_at(point, stack)
    killer.wait_registered(stack.redis)
    forest = {**SLOW_FOREST, "random_state": list(POINTS).index(point)}  # a forest of its own: none is stored yet
    submitted = stack.client.post("/v1/forests/train", json={"dataset_id": abalone, **forest})
    assert submitted.status_code == 202, submitted.text
    job_id = submitted.json()["id"]
    killer.process.wait(timeout=60)  # it took the job and died at the point (not a job that ended first)
    killed = time.time()
    rescuer = WorkerProcess(settings)
    try:
        done = stack.wait_for(job_id, ("succeeded",), timeout=120)
    finally:
        rescuer.stop()

    assert done["attempt"] == 2 and [lost["attempt"] for lost in done["history"]] == [1]
    lost = done["history"][0]
    reason = "stopped sending heartbeats" if point in ("claimed", "first beat") else "took the job from its queue"
    assert reason in lost["reason"], lost
    # queued again within the heartbeat TTL and two watchdog passes of the kill (1 s of slack for a busy machine)
    recovered_in = lost["lost_at"] - killed
    assert recovered_in <= settings.heartbeat_ttl_seconds + 2 * settings.watchdog_seconds + 1, recovered_in
    # once: the lost run never ended, the retry's did
    runs = {}
    for attempt in (1, 2):
        try:
            runs[attempt] = Job.fetch(f"{job_id}-{attempt}", connection=stack.redis, serializer=JSONSerializer)
        except NoSuchJobError:
            runs[attempt] = None  # the watchdog deleted a run no worker will end
    assert runs[1] is None or runs[1].get_status() != JobStatus.FINISHED
    assert runs[2] is not None and runs[2].get_status() == JobStatus.FINISHED
    assert stack.redis.hlen(f"{settings.key_prefix}taken-jobs") == 0  # no mark left behind
