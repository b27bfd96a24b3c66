"""Faults with real processes on loopback: a Redis of the test's own stopped and frozen under traffic, the cache
Redis down, a job past its deadline, a worker SIGKILLed mid-job, and `fire-rules serve` stopped by SIGTERM and
SIGKILL (and one of its workers killed). Each test is bounded to about 10-25 s."""

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from redis import Redis

from tests.support.data import ELEVATORS, REPO_ROOT
from tests.support.jobs import FEATURE_COLUMNS
from tests.support.problems import assert_problem
from tests.support.service import (
    END_WITH_THIS_RUN,
    RedisServer,
    ServiceStack,
    WorkerProcess,
    alive,
    descendants,
    free_port,
    make_settings,
    settings_env,
)

pytestmark = pytest.mark.integration

SMALL_FOREST = {"n_estimators": 20, "max_depth": 3, "max_features": "sqrt"}
OUTAGE_SECONDS = 6  # the workers of the issue died 2-3 s into an outage
REDIS_TIMEOUT = 1.0


@pytest.fixture
def own_redis(tmp_path):
    server = RedisServer(tmp_path).start()
    yield server
    server.stop()


def fault_settings(redis_url: str, **overrides):
    return make_settings(
        redis_url=redis_url,
        redis_socket_timeout=REDIS_TIMEOUT,
        redis_connect_timeout=REDIS_TIMEOUT,
        heartbeat_seconds=1,
        heartbeat_ttl_seconds=4.0,
        **overrides,
    )


def run_job(stack: ServiceStack, dataset_id: str, **extra) -> dict:
    response = stack.client.post(
        "/v1/jobs", json={"dataset_id": dataset_id, "forest": SMALL_FOREST, "n_lambdas": 8, "max_rules": 8, **extra}
    )
    assert response.status_code == 202, response.text
    return stack.wait_for(response.json()["id"], ("succeeded",), timeout=60)


def scored(stack: ServiceStack, model_id: str) -> list[float]:
    rows = {
        "dataframe_split": {
            "columns": FEATURE_COLUMNS,
            "data": [
                ["M", 0.455, 0.365, 0.095, 0.514, 0.2245, 0.101, 0.15],
                ["F", 0.53, 0.42, 0.135, 0.677, 0.2565, 0.1415, 0.21],
            ],
        }
    }
    response = stack.client.post(f"/v1/models/{model_id}/predict", json=rows)
    assert response.status_code == 200, response.text
    return response.json()["predictions"]


def assert_unavailable_quickly(stack: ServiceStack, within: float) -> None:
    """Every kind of request answers 503 problem+json with Retry-After, none waits longer than ``within``."""
    for method, url, body in (
        ("GET", "/v1/datasets", None),
        ("POST", "/v1/jobs", {"dataset_id": "ds_x", "forest_id": "fo_x"}),
        ("GET", "/v1/jobs/job_x", None),
        ("GET", "/readyz", None),
    ):
        started = time.monotonic()
        response = stack.client.request(method, url, json=body)
        assert time.monotonic() - started < within, (url, time.monotonic() - started)
        assert_problem(response, 503)
        assert response.headers["Retry-After"]


def wait_ready(stack: ServiceStack, timeout: float = 20.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        response = stack.client.get("/readyz")
        if response.status_code == 200 and response.json()["workers"] >= 1:
            return response.json()
        assert time.monotonic() < deadline, response.text
        time.sleep(0.2)


@pytest.mark.parametrize("fault", ["stopped", "frozen"])
def test_workers_and_data_outlive_redis_stopped_or_frozen_under_traffic(own_redis, fault):
    with ServiceStack(fault_settings(own_redis.url), n_workers=1) as stack:
        dataset = stack.upload_dataset(rows=600)
        job = run_job(stack, dataset["id"])
        model = stack.client.post("/v1/models", json={"job_id": job["id"], "name": "outage"}).json()
        before = scored(stack, model["id"])
        worker_pid = stack.workers[0].process.pid

        own_redis.stop() if fault == "stopped" else own_redis.freeze()
        outage_started = time.monotonic()
        assert_unavailable_quickly(stack, within=2 * REDIS_TIMEOUT + 1)
        time.sleep(max(0.0, OUTAGE_SECONDS - (time.monotonic() - outage_started)))
        assert stack.workers[0].process.poll() is None, "the worker exited during the outage"
        own_redis.start() if fault == "stopped" else own_redis.thaw()

        assert wait_ready(stack)["workers"] == 1
        assert stack.workers[0].process.pid == worker_pid and stack.workers[0].process.poll() is None
        assert scored(stack, model["id"]) == before  # nothing lost: the AOF kept every write
        assert [d["id"] for d in stack.client.get("/v1/datasets").json()] == [dataset["id"]]
        assert run_job(stack, dataset["id"], penalty="l1")["status"] == "succeeded"


def test_jobs_queued_during_an_outage_run_after_it(own_redis):
    """Jobs submitted just before Redis went away run once it is back, on the same worker."""
    with ServiceStack(fault_settings(own_redis.url), n_workers=1) as stack:
        dataset = stack.upload_dataset(rows=400)
        submitted = [
            stack.client.post(
                "/v1/jobs",
                json={
                    "dataset_id": dataset["id"],
                    "forest": SMALL_FOREST,
                    "n_lambdas": 5,
                    "max_rules": 5,
                    "gamma": 1.1 + k,
                },
            )
            for k in range(4)
        ]
        assert all(response.status_code == 202 for response in submitted)
        own_redis.stop()
        time.sleep(OUTAGE_SECONDS)
        own_redis.start()
        for response in submitted:
            assert stack.wait_for(response.json()["id"], ("succeeded",), timeout=120)["attempt"] <= 2


def test_a_worker_waits_for_a_redis_down_at_its_start_and_starts_in_seconds_from_a_warm_cache(own_redis):
    """As an operator saw it: a worker that prepared its solver while Redis was down died in RQ's registration
    (a ConnectionError from ``client_setname``), so every job stayed queued. Now it waits, logging the wait, and
    registers once Redis is back; and with numba's cache warm (the session's workers filled it) and Redis up, a worker
    registers within seconds (it took 26 s: the warm-up's tiny paths ran on to max_iter)."""
    settings = fault_settings(own_redis.url)
    redis = Redis.from_url(own_redis.url)
    started = time.monotonic()
    warm = WorkerProcess(settings)
    warm.wait_registered(redis, timeout=60)
    start_up = time.monotonic() - started
    warm.stop()
    own_redis.stop()
    waiting = WorkerProcess(settings)
    time.sleep(start_up + 5)  # its solver is ready by now, and Redis still down
    assert waiting.process.poll() is None, waiting.process.stderr.read().decode()[-2000:]
    own_redis.start()
    waiting.wait_registered(redis, timeout=60)
    waiting.stop()
    log = waiting.process.stderr.read().decode()
    assert "waiting for it" in log and "Redis answers again" in log, log[-2000:]
    assert "Traceback" not in log, log[-3000:]
    assert start_up < 20, f"a worker took {start_up:.1f} s to register from a warm cache"


def test_a_cache_redis_that_is_down_means_no_cache(stack):
    closed = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    settings = fault_settings(
        stack.settings.redis_url,
        cache_redis_url=closed,
        queue_name=f"{stack.settings.queue_name}-nocache",
        key_prefix=stack.settings.key_prefix,
    )
    with ServiceStack(settings, n_workers=1, clean_keys=False) as own:
        dataset = own.upload_dataset(rows=500)
        first, second = run_job(own, dataset["id"]), run_job(own, dataset["id"], penalty="l1")
        assert first["cache_hit"] is False and second["cache_hit"] is False


def test_a_job_past_its_deadline_stops_within_its_phase(stack):
    """Training a forest has no step callback: RQ's alarm stops it a few seconds past FIRE_JOB_TIMEOUT."""
    settings = fault_settings(
        stack.settings.redis_url,
        job_timeout=2,
        queue_name=f"{stack.settings.queue_name}-deadline",
        key_prefix=stack.settings.key_prefix,
    )
    with ServiceStack(settings, n_workers=1, clean_keys=False) as own:
        dataset = own.upload_dataset(ELEVATORS, target="Goal")
        response = own.client.post(
            "/v1/jobs",
            json={
                "dataset_id": dataset["id"],
                "forest": {"n_estimators": 5000, "max_depth": 12, "max_features": 1.0},
                "n_lambdas": 5,
            },
        )
        failed = own.wait_for(response.json()["id"], ("failed",), timeout=30)
        assert failed["error"]["type"] == "deadline_exceeded" and "training" in failed["error"]["detail"]
        overrun = failed["finished_at"] - failed["started_at"] - settings.job_timeout
        assert overrun < 7, overrun  # the deadline's grace (5 s) and one tree


def test_a_killed_worker_s_job_is_retried_and_succeeds(stack):
    settings = fault_settings(
        stack.settings.redis_url, queue_name=f"{stack.settings.queue_name}-kill", key_prefix=stack.settings.key_prefix
    )
    with ServiceStack(settings, n_workers=2, clean_keys=False) as own:
        dataset = own.upload_dataset(rows=1000)
        response = own.client.post(
            "/v1/jobs",
            json={
                "dataset_id": dataset["id"],
                "forest": {"n_estimators": 150, "max_depth": 5},
                "n_lambdas": 30,
                "max_rules": 15,
            },
        )
        job_id = response.json()["id"]
        own.wait_for(job_id, ("running",))
        [busy] = [worker for worker in own.workers if worker.work_horses()]
        busy.kill()  # the other worker runs attempt 2
        done = own.wait_for(job_id, ("succeeded",), timeout=90)
        assert done["attempt"] == 2 and "stopped sending heartbeats" in done["history"][0]["reason"]


class Serve:
    """`fire-rules serve` with its embedded Redis and one worker, in a process of its own."""

    def __init__(self, data_dir):
        self.port = free_port()
        env = {
            **settings_env(make_settings(redis_url=None)),
            "FIRE_DATA_DIR": str(data_dir),
            "FIRE_EMBEDDED_WORKERS": "1",
            "FIRE_HEARTBEAT_SECONDS": "1",
            "FIRE_HEARTBEAT_TTL_SECONDS": "4",
        }
        env.pop("FIRE_REDIS_URL", None)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "serve", "--port", str(self.port), "--log-level", "warning"],
            env=env,
            cwd=REPO_ROOT,
            start_new_session=True,
            preexec_fn=END_WITH_THIS_RUN,  # a killed test run leaves no service behind
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )

    def wait_ready(self, timeout: float = 60.0) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.process.stderr.read().decode()[-3000:]
            try:
                response = httpx.get(f"http://127.0.0.1:{self.port}/readyz", timeout=2)
                if response.status_code == 200 and response.json()["workers"] >= 1:
                    return response.json()
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise TimeoutError("serve did not become ready")

    def children(self) -> set[int]:
        return descendants(self.process.pid)

    def kill_everything(self) -> None:
        for pid in {self.process.pid, *self.children()}:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def wait_gone(pids: set[int], timeout: float) -> set[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(alive(pid) for pid in pids):
        time.sleep(0.1)
    return {pid for pid in pids if alive(pid)}


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_serve_restarts_a_dead_worker_and_leaves_no_process_behind(tmp_path, stop_signal):
    serve = Serve(tmp_path)
    try:
        serve.wait_ready()
        children = serve.children()
        assert len(children) >= 2, children  # redis-server and a worker (and no work horse: nothing runs)
        if stop_signal == signal.SIGTERM:  # the supervisor restarts a worker that dies
            [worker] = [pid for pid in children if b"worker" in Path(f"/proc/{pid}/cmdline").read_bytes()]
            os.kill(worker, signal.SIGKILL)
            deadline = time.monotonic() + 15
            while not (serve.children() - children):
                assert time.monotonic() < deadline, "the killed worker was not restarted"
                time.sleep(0.2)
            serve.wait_ready()
            children = serve.children()
        serve.process.send_signal(stop_signal)
        serve.process.wait(timeout=30)
        assert not wait_gone(children, timeout=15), "processes left behind"
    finally:
        serve.kill_everything()
