"""`fire-rules worker`: compile the numba solver once, then fork a work horse per job (RQ Worker), and outlive
Redis outages: a lost connection is waited out with backoff, never a reason to exit."""

import fcntl
import logging
import os
import signal
import socket
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from rq import Worker
from rq.serializers import JSONSerializer

from app.core.config import Settings
from app.core.connections import BACKOFF_CAP_SECONDS, REDIS_FAILURES, connect, data_redis
from app.core.processes import die_with_parent
from app.core.queues import TASKS, make_queue
from app.core.records import JobRecords
from app.core.workers import READY, WARMING, WorkerRegistry
from worker import tasks

log = logging.getLogger(__name__)
RECONNECT_CAP_SECONDS = 10.0
# RQ blocks on its queues for worker_ttl - 15 s between beats: beat every heartbeat_seconds when idle too
RQ_DEQUEUE_MARGIN_SECONDS = 15
WARM_UP_PASSES = 50  # of each warm-up path step (warm_solver)


def warm_solver() -> None:
    """Fit a tiny path of every kind (every registered loss; leaf candidates, and node candidates with linear
    terms) so the forked work horses inherit compiled kernels. Each step stops after WARM_UP_PASSES: the kernels
    compile (or load from numba's cache) on their first call, and a tiny path's later passes only cost time (some
    run to max_iter: a 64-row Cox or multinomial target is nearly separable)."""
    from solver.fitting import fit_rules
    from solver.losses import LOSSES
    from solver.spec import ForestSpec, PathSpec

    rng = np.random.default_rng(0)
    X = rng.normal(size=(64, 3))
    y = X[:, 0] + 0.1 * rng.normal(size=64)
    forest = ForestSpec(n_estimators=3, max_depth=2, max_features=None)
    for loss, descriptor in LOSSES.items():
        target = descriptor.warmup_target(y)
        for penalty, fusion_ratio in (("l1", 0.0), ("mcp", 0.0), ("mcp", 1.0), ("l1", 1.0)):
            spec = PathSpec(loss=loss, penalty=penalty, fusion_ratio=fusion_ratio, n_lambdas=3, max_iter=WARM_UP_PASSES)
            fit_rules(X, target, spec, forest=forest)
        terms = PathSpec(
            loss=loss, candidates="nodes", max_rule_length=1, linear_terms=True, n_lambdas=3, max_iter=WARM_UP_PASSES
        )
        fit_rules(X, target, terms, forest=forest)


@contextmanager
def one_compiler_at_a_time():
    """Workers of one machine compile in turn: the first fills numba's on-disk cache (the solver's kernels are
    ``cache=True``), the others then load it in about a second instead of all compiling at once."""
    path = Path(tempfile.gettempdir()) / f"fire-rules-compile-{os.getuid()}.lock"
    with open(path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


class Presence:
    """This worker process in the registry readiness reads; one name for the life of the process."""

    def __init__(self, registry: WorkerRegistry, queues: list[str]):
        self.registry = registry
        self.queues = queues
        self.name = f"{socket.gethostname()}:{os.getpid()}"
        self.started_at = time.time()

    def beat(self, state: str) -> None:
        self.registry.beat(self.name, state, self.queues, self.started_at)

    def try_beat(self, state: str) -> None:
        try:
            self.beat(state)
        except REDIS_FAILURES as error:
            log.debug("no heartbeat (%s)", error)

    @contextmanager
    def beating(self, state: str, every: float):
        """Beat from a thread while the body runs (compilation holds the main thread for a minute)."""
        stop = threading.Event()

        def loop():
            while True:
                self.try_beat(state)
                if stop.wait(every):
                    return

        thread = threading.Thread(target=loop, daemon=True, name="fire-presence")
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()  # before any fork: a work horse must not inherit a thread holding a lock


class FireWorker(Worker):
    """Refreshes its presence and the running FIRE job's heartbeat from the worker process itself.

    The work horse cannot be trusted to do it: a numba kernel holds the GIL for as long as it runs, which would
    starve a heartbeat thread there. The parent only waits on the horse, so its beats stop exactly when the horse
    or the whole machine is gone. A Redis failure while a job runs is logged, not fatal: the horse keeps working
    and the parent keeps waiting for it.
    """

    def __init__(self, *args, records: JobRecords, presence: Presence, **kwargs):
        super().__init__(*args, **kwargs)
        self.records = records
        self.presence = presence
        self.shutdown_requested = False

    def heartbeat(self, timeout=None, pipeline=None):
        super().heartbeat(timeout, pipeline)
        self.presence.beat(READY)

    def maintain_heartbeats(self, job, execution):
        try:
            super().maintain_heartbeats(job, execution)
            if job.func_name in TASKS.values():
                job_id, attempt = job.args
                self.records.beat(job_id, attempt)
        except REDIS_FAILURES as error:
            log.warning("Redis unreachable while job %s runs (%s); it goes on", job.id, error)

    def main_work_horse(self, job, queue):
        die_with_parent(signal.SIGKILL)  # a horse never outlives its worker: the job is then retried elsewhere
        super().main_work_horse(job, queue)

    def handle_warm_shutdown_request(self):
        self.shutdown_requested = True
        super().handle_warm_shutdown_request()


def wait_for_redis(settings: Settings) -> None:
    """Block until the durable Redis answers, retrying with exponential backoff (each wait logged)."""
    probe = connect(settings.redis_url, settings.redis_socket_timeout, settings.redis_connect_timeout)
    delay, waited = 0.5, False
    while True:
        try:
            probe.ping()
            if waited:
                log.info("Redis answers again")
            return
        except REDIS_FAILURES as error:
            log.warning("Redis unreachable (%s); waiting for it, next try in %.1f s", error, delay)
            waited = True
            time.sleep(delay)
            delay = min(delay * 2, RECONNECT_CAP_SECONDS)


def run_worker(settings: Settings, queue_names: list[str] | None = None, burst: bool = False) -> bool:
    if settings.worker_nice:
        os.nice(settings.worker_nice)
    queues = queue_names or [settings.queue_name]
    presence = Presence(WorkerRegistry(settings, data_redis(settings)), queues)
    log.info(
        "worker %s: preparing the solver (compiled once per machine and solver version, about a minute on "
        "2 cores; loaded from numba's cache after that); jobs wait meanwhile",
        presence.name,
    )
    started = time.perf_counter()
    with presence.beating(WARMING, settings.heartbeat_seconds):
        with one_compiler_at_a_time():
            warm_solver()
        tasks.core()  # import the job module and open its stores once, not in every forked horse
    log.info("worker %s: solver ready after %.1f s", presence.name, time.perf_counter() - started)
    # RQ's own connection: RQ raises its socket timeout above its blocking dequeue, so it is not shared
    rq_redis = connect(
        settings.redis_url, settings.redis_socket_timeout, settings.redis_connect_timeout, patience=BACKOFF_CAP_SECONDS
    )
    records = JobRecords(settings, data_redis(settings, settings.redis_outage_seconds))
    ran_jobs = False
    while True:
        # registration talks to Redis too (RQ names its connection): a Redis down at start-up, or gone while the
        # solver was prepared, is waited out here as one lost mid-job is
        wait_for_redis(settings)
        try:
            worker = FireWorker(
                [make_queue(name, rq_redis) for name in queues],
                connection=rq_redis,
                serializer=JSONSerializer,
                records=records,
                presence=presence,
                job_monitoring_interval=settings.heartbeat_seconds,
                worker_ttl=settings.heartbeat_seconds + RQ_DEQUEUE_MARGIN_SECONDS,
            )
        except REDIS_FAILURES as error:
            log.warning("worker %s could not register with Redis (%s)", presence.name, error)
            continue
        log.info("worker %s (rq %s) listening on %s", presence.name, worker.name, queues)
        try:
            ran_jobs |= worker.work(burst=burst, logging_level="INFO")
        except REDIS_FAILURES as error:
            log.warning("worker %s lost Redis (%s)", presence.name, error)
        if worker.shutdown_requested or burst:
            try:
                presence.registry.remove(presence.name)
            except REDIS_FAILURES:
                pass  # its last beat ages out of readiness within the heartbeat TTL
            return ran_jobs
