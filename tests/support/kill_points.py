"""A `fire-rules worker` that is SIGKILLed at one point of taking and claiming its first job, as a machine that
dies there looks to Redis: the worker and its work horse gone at once (the horse ends with its worker,
``FireWorker.main_work_horse``). Run as ``python -c "from tests.support.kill_points import main; main(POINT)"``
with the worker's environment; the points are patched in here, the service's code has no hook."""

import os
import signal
import sys
import time

POINTS = {
    "taken": "the job taken from its tenant's queue, before anything else",
    "execution": "RQ recorded the run (its execution, the started registry), before the work horse is forked",
    "started": "in the work horse, RQ marked the job started, before the job's function runs",
    "claimed": "in the work horse, the job's record claimed (running, its heartbeat set)",
    "first beat": "the worker's first beat of the running job, before it is sent",
}


def kill_worker(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    time.sleep(60)  # (a work horse that killed its worker waits for its own end, the parent-death signal)


def install(point: str) -> None:
    from app.core.records import JobRecords
    from worker.main import FireWorker

    if point == "taken":
        take = FireWorker.take

        def taken_then_killed(self):
            taken = take(self)
            if taken is not None:
                kill_worker(os.getpid())
            return taken

        FireWorker.take = taken_then_killed  # type: ignore[method-assign]
    elif point == "execution":
        prepare_execution = FireWorker.prepare_execution

        def prepared_then_killed(self, job):
            prepare_execution(self, job)
            kill_worker(os.getpid())

        FireWorker.prepare_execution = prepared_then_killed  # type: ignore[method-assign]
    elif point == "started":
        prepare_job_execution = FireWorker.prepare_job_execution

        def started_then_killed(self, job, remove_from_intermediate_queue=False):
            prepare_job_execution(self, job, remove_from_intermediate_queue)
            kill_worker(os.getppid())

        FireWorker.prepare_job_execution = started_then_killed  # type: ignore[method-assign]
    elif point == "claimed":
        claim = JobRecords.claim

        def claimed_then_killed(self, *args, **kwargs):
            claimed = claim(self, *args, **kwargs)
            kill_worker(os.getppid())
            return claimed

        JobRecords.claim = claimed_then_killed  # type: ignore[method-assign]
    elif point == "first beat":

        def killed_before_beating(self, job, execution):
            kill_worker(os.getpid())

        FireWorker.maintain_heartbeats = killed_before_beating  # type: ignore[method-assign]
    else:
        raise ValueError(f"no kill point {point!r}: one of {sorted(POINTS)}")


def main(point: str) -> None:
    install(point)
    from app.cli import main as cli

    sys.argv = ["fire-rules", "worker"]
    cli(["worker"])
