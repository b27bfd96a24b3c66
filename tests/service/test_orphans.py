"""A killed test run leaves nothing behind: the workers a run starts, and their work horses, end when the run is
SIGKILLed (a timeout), instead of living on with parent 1."""

import os
import signal
import subprocess
import sys
import time

from tests.support.data import REPO_ROOT
from tests.support.service import alive, descendants, settings_env

# a test run in miniature: one worker of the test stacks, busy with a job that would sleep for ten minutes
RUN = """
import time
from redis import Redis
from app.core.config import Settings
from app.core.queues import make_queue
from tests.support.service import WorkerProcess

settings = Settings()
redis = Redis.from_url(settings.redis_url)
worker = WorkerProcess(settings)
worker.wait_registered(redis)
make_queue(settings.queue_name, redis).enqueue("time.sleep", 600, job_id=f"{settings.queue_name}-sleep")
while not worker.work_horses():
    time.sleep(0.05)
print("busy", flush=True)
time.sleep(600)
"""


def test_a_killed_run_takes_its_workers_and_their_work_horses_along(isolated_settings):
    run = subprocess.Popen(
        [sys.executable, "-c", RUN],
        env=settings_env(isolated_settings),
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    children: set[int] = set()
    try:
        assert run.stdout.readline() == b"busy\n", "the run's worker never started its job"
        children = descendants(run.pid)
        assert len(children) == 2, children  # the worker and its work horse
        os.kill(run.pid, signal.SIGKILL)
        run.wait(timeout=10)
        deadline = time.monotonic() + 10
        while any(alive(pid) for pid in children) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not {pid for pid in children if alive(pid)}, "processes left behind"
    finally:
        for pid in {run.pid, *children, *descendants(run.pid)}:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        run.wait(timeout=10)
