"""The service as its integration tests run it: a real Redis, real `fire-rules worker` processes and the API
in-process (the fixtures over these are in tests/service/conftest.py).

Every test session writes under its own key prefix and queue name on the Redis at FIRE_TEST_REDIS_URL
(default redis://127.0.0.1:6379/0) and removes only those keys afterwards.
"""

import contextlib
import functools
import gzip
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

from fastapi.testclient import TestClient
from redis import Redis
from rq import Worker

from app.core.config import Settings
from app.core.job_documents import TERMINAL
from app.core.keys import Keys
from app.core.processes import die_with_parent
from app.core.queues import make_queue
from app.main import create_app
from tests.support.data import ABALONE, REPO_ROOT

# a child of a test run ends when the run does, also when a timeout SIGKILLs it: a worker would otherwise live on
# with parent 1 (its own session keeps it from the run's process group); nothing of a test run needs a warm stop
END_WITH_THIS_RUN = functools.partial(die_with_parent, signal.SIGKILL)


def make_settings(**overrides) -> Settings:
    token = uuid.uuid4().hex[:10]
    values = {
        "redis_url": os.environ.get("FIRE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"),
        "key_prefix": f"fire-test-{token}:",
        "queue_name": f"fire-test-{token}",
        "heartbeat_seconds": 1,
        "heartbeat_ttl_seconds": 4.0,
        "watchdog_seconds": 1.0,
        "max_upload_bytes": 8 * 1024 * 1024,
        "batch_min_chunk_rows": 1,  # the tests split small tables into many chunks (the default's for real files)
    }
    return Settings(**{**values, **overrides})


def settings_env(settings: Settings) -> dict[str, str]:
    """The environment that gives a worker (or `serve`) these settings: every one that is not the default."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("FIRE_")}
    for name, value in settings.model_dump(exclude_defaults=True).items():
        env[f"FIRE_{name.upper()}"] = ",".join(value) if isinstance(value, list) else str(value)
    return {**env, "PYTHONPATH": str(REPO_ROOT)}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RedisServer:
    """A redis-server of a test's own on a free loopback port, its AOF (fsync always) in ``directory``: fault
    tests stop, restart and freeze it."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen | None = None

    def start(self) -> "RedisServer":
        self.process = subprocess.Popen(
            [
                "redis-server",
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--dir",
                str(self.directory),
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--save",
                "",
                "--maxmemory-policy",
                "noeviction",
            ],
            stdout=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=END_WITH_THIS_RUN,
        )
        client = Redis.from_url(self.url, socket_timeout=1)
        deadline = time.monotonic() + 15
        while True:
            try:
                client.ping()
                return self
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)  # a frozen server cannot act on SIGTERM
            self.process.terminate()
            self.process.wait(timeout=15)

    def freeze(self) -> None:
        self.process.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        self.process.send_signal(signal.SIGCONT)


def descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (children, grandchildren) that is still alive (not a zombie)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, frontier = set(), [pid]
    while frontier:
        for child in children.get(frontier.pop(), []):
            found.add(child)
            frontier.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z"


class WorkerProcess:
    """A `fire-rules worker` in its own process group, so a kill takes its work horse too."""

    def __init__(
        self, settings: Settings, env: dict[str, str] | None = None, argv: list[str] | None = None, stderr=None
    ):
        """``argv``: another command that runs a worker (default `fire-rules worker`); ``stderr``: where its log
        goes (default a pipe, read when it exits early: a worker that logs more than the pipe holds, 64 KiB, stops
        until it is read)."""
        self.settings = settings
        self.process = subprocess.Popen(
            argv or [sys.executable, "-m", "app.cli", "worker"],
            env={**settings_env(settings), **(env or {})},
            cwd=REPO_ROOT,
            start_new_session=True,
            preexec_fn=END_WITH_THIS_RUN,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE if stderr is None else stderr,
        )

    def wait_registered(self, redis: Redis, timeout: float = 300.0) -> None:
        # a first start compiles the solver when numba's cache is cold: 2 to 4 minutes on a busy 2-core machine
        queue = make_queue(self.settings.queue_name, redis)
        deadline = time.monotonic() + timeout
        while not any(w.pid == self.process.pid for w in Worker.all(queue=queue)):
            if self.process.poll() is not None:
                log = self.process.stderr.read().decode()[-3000:] if self.process.stderr else "(its log went elsewhere)"
                raise RuntimeError(f"worker exited: {log}")
            if time.monotonic() > deadline:
                raise TimeoutError("worker did not register")
            time.sleep(0.1)

    def work_horses(self) -> list[int]:
        """The worker's forked children; RQ puts each in its own process group."""
        children = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == self.process.pid:
                children.append(int(stat.parent.name))
        return children

    def kill(self) -> None:
        """SIGKILL the worker and its work horse: what a machine crash looks like to Redis."""
        horses = self.work_horses()
        os.killpg(self.process.pid, signal.SIGKILL)
        for pid in horses:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


def remove_session_keys(redis: Redis, settings: Settings) -> None:
    """Unlink every key of this session: ours under the prefix, RQ's for our queues, jobs and workers."""
    layout = Keys.from_settings(settings)
    job_ids = [i.decode() for i in redis.zrange(layout.all_jobs, 0, -1)]
    queue_keys = [key for key in redis.smembers("rq:queues") if settings.queue_name in key.decode()]
    worker_names = [
        name.decode()
        for key in redis.scan_iter(match=f"rq:workers:{settings.queue_name}*")
        for name in redis.smembers(key)
    ]
    if queue_keys:
        redis.srem("rq:queues", *queue_keys)
    if worker_names:
        redis.srem("rq:workers", *worker_names)
    patterns = [f"{layout.prefix}*", f"rq:*{settings.queue_name}*"]
    patterns += [f"rq:*{job_id}*" for job_id in job_ids] + [f"rq:worker:{name}*" for name in worker_names]
    for pattern in patterns:
        keys = list(redis.scan_iter(match=pattern, count=1000))
        for start in range(0, len(keys), 500):
            redis.unlink(*keys[start : start + 500])


class ServiceStack:
    def __init__(self, settings: Settings, n_workers: int, clean_keys: bool = True):
        self.settings = settings
        self.clean_keys = clean_keys
        self.redis = Redis.from_url(settings.redis_url)
        self.workers = [WorkerProcess(settings) for _ in range(n_workers)]
        self.client = TestClient(create_app(settings))

    def __enter__(self) -> "ServiceStack":
        self.client.__enter__()
        try:
            for worker in self.workers:
                worker.wait_registered(self.redis)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.client.__exit__(*exc)
        for worker in self.workers:
            worker.stop()
        if self.clean_keys:
            remove_session_keys(self.redis, self.settings)

    def add_worker(self, env: dict[str, str] | None = None) -> WorkerProcess:
        """One more worker (``env``: more environment variables for it, e.g. FIRE_NUM_THREADS)."""
        worker = WorkerProcess(self.settings, env)
        self.workers.append(worker)
        worker.wait_registered(self.redis)
        return worker

    def wait_for(self, job_id: str, statuses=TERMINAL, timeout: float = 90.0, predicate=None) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            job = self.client.get(f"/v1/jobs/{job_id}").json()
            if job["status"] in statuses and (predicate is None or predicate(job)):
                return job
            if job["status"] in TERMINAL and job["status"] not in statuses:
                raise AssertionError(f"job ended {job['status']}: {job.get('error')}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {job_id} still {job['status']}: {job['progress']}")
            time.sleep(0.1)

    def upload_dataset(self, path: Path = ABALONE, target: str = "rings", rows: int | None = None) -> dict:
        data = path.read_bytes()
        if rows is not None:
            text = gzip.decompress(data).decode().splitlines()
            data = ("\n".join(text[: rows + 1]) + "\n").encode()
        response = self.client.post(f"/v1/datasets?target={target}", content=data, headers={"Content-Type": "text/csv"})
        assert response.status_code in (200, 201), response.text
        return response.json()
