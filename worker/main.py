"""`fire-rules worker`: prepare the numba solver, then fork a work horse per job (RQ Worker), and outlive Redis
outages: a lost connection is waited out with backoff, never a reason to exit.

Preparing the solver: with numba's on-disk cache warm (a warm-up stamp says so) the worker loads every kernel
in-process in a few seconds before it takes jobs, so every forked horse inherits them. With the cache cold
(a fresh clone: two to three minutes of compilation on 2 cores) it takes jobs at once, each horse compiling
what its job needs (numba writes those kernels to the cache), while one niced child process per machine fills
the cache with the full warm-up; once it is done the worker loads the kernels in-process between two jobs."""

import fcntl
import hashlib
import logging
import math
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from rq import Queue, Worker
from rq.exceptions import NoSuchJobError
from rq.job import Job
from rq.serializers import JSONSerializer
from rq.worker import WorkerStatus

from app.core.config import LOG_FORMAT, Settings
from app.core.connections import BACKOFF_CAP_SECONDS, REDIS_FAILURES, connect, data_redis
from app.core.keys import Keys
from app.core.processes import die_with_parent
from app.core.queues import TASKS, JobQueues, make_queue
from app.core.records import JobRecords
from app.core.workers import READY, WARMING, WorkerRegistry
from worker import runs, tasks  # noqa: F401 (tasks: every job module, imported before the horses fork)

log = logging.getLogger(__name__)
RECONNECT_CAP_SECONDS = 10.0
# RQ's dequeue timeout is worker_ttl - 15 s: an idle worker beats every heartbeat_seconds
RQ_DEQUEUE_MARGIN_SECONDS = 15
IDLE_POLL_SECONDS = 0.1  # an idle worker looks at its pools' queues this often (a take is one Lua script)
WARM_UP_PASSES = 50  # of each warm-up path step (warm_solver)
BACKGROUND_WARM_UP_NICE = 10  # the cache-filling child yields the cores to work horses running jobs


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
    stamp = warm_stamp()
    try:
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.touch()
    except OSError as error:  # a read-only cache: the next start takes the cold path again, nothing worse
        log.warning("could not record the warm-up in %s (%s)", stamp, error)


def warm_stamp() -> Path:
    """The file warm_solver writes once it has run to its end: numba's cache then holds every kernel the jobs use.

    Its name keys what numba's cache index checks (each solver source file's modification time and size; numba's
    and Python's versions) and where that cache lives (NUMBA_CACHE_DIR, else the solver's own ``__pycache__``
    folders), so an edited source, another numba or another cache folder finds no stamp. It lives beside the
    cache, and goes with it when the folder is emptied. A stamp whose cache was removed file by file only costs
    the old start: the worker compiles before it takes jobs."""
    import numba

    import solver

    root = Path(solver.__file__).resolve().parent
    cache_dir = os.environ.get("NUMBA_CACHE_DIR", "")  # numba's config.CACHE_DIR, read from it at import
    key = hashlib.sha256(f"{numba.__version__} {sys.version} {cache_dir} {root}".encode())
    for path in sorted(root.rglob("*.py")):
        stat = path.stat()
        key.update(f"{path.relative_to(root)} {stat.st_mtime_ns} {stat.st_size}\n".encode())
    folder = Path(cache_dir) if cache_dir else root / "__pycache__"
    if not os.access(folder if folder.exists() else folder.parent, os.W_OK):
        folder = Path(tempfile.gettempdir())
    return folder / f"fire-rules-warm-{key.hexdigest()[:16]}"


def warm_up_once() -> bool:
    """Fill numba's cache once per machine: under the compile lock, warm_solver runs unless a stamp says an earlier
    process already ran it to its end. Returns whether this call ran it."""
    with one_compiler_at_a_time():
        if warm_stamp().exists():
            return False
        warm_solver()
        return True


def background_warm_up_main() -> None:
    """The niced child a worker starts on a cold cache (BackgroundWarmUp)."""
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    started = time.perf_counter()
    if warm_up_once():
        log.info("solver compiled into numba's cache in %.1f s", time.perf_counter() - started)


class BackgroundWarmUp:
    """warm_up_once in a child process (``python -c``), niced below the work horses and ended with its worker.

    A child, not a thread: a horse forked while a thread compiles would inherit numba's compiler lock held."""

    COMMAND = "from worker.main import background_warm_up_main; background_warm_up_main()"

    def __init__(self, command: list[str] | None = None):
        def prepare_child() -> None:
            die_with_parent(signal.SIGKILL)
            os.nice(BACKGROUND_WARM_UP_NICE)

        self.started = time.perf_counter()
        self.process = subprocess.Popen(command or [sys.executable, "-c", self.COMMAND], preexec_fn=prepare_child)
        self.loaded = False

    def ready_to_load(self) -> bool:
        """Whether the kernels were not loaded yet and the warm-up is done: its stamp is there (written by this
        worker's child or, on a busy machine sooner seen, by another worker's: a niced child waiting on the lock
        can take many seconds to exit) or the child ended well. A failed child is logged, and then the horses go
        on compiling or loading what their jobs need."""
        if self.loaded:
            return False
        if warm_stamp().exists():
            return True
        returncode = self.process.poll()
        if returncode is None:
            return False
        if returncode != 0:
            log.warning("the background warm-up exited with %s; jobs compile what they need", returncode)
            self.loaded = True
            return False
        return True

    def load(self) -> None:
        """Load every kernel from the cache into this process (about 2 s), so the next horses inherit them."""
        started = time.perf_counter()
        warm_solver()
        self.loaded = True
        log.info(
            "solver kernels loaded from numba's cache in %.1f s (%.0f s after the background warm-up began)",
            time.perf_counter() - started,
            time.perf_counter() - self.started,
        )


@contextmanager
def one_compiler_at_a_time():
    """Processes filling one numba cache from one solver version compile in turn: the first fills the on-disk cache
    (the solver's kernels are ``cache=True``), the others then load it in seconds instead of all compiling at once.
    The lock file sits beside the warm-up stamp and shares its key: a compilation into another cache folder or of
    other sources (another checkout on the machine) is not waited for (a machine-wide lock once kept a warm worker
    waiting 70 s for one)."""
    stamp = warm_stamp()
    path = stamp.with_name(stamp.name.replace("fire-rules-warm-", "fire-rules-compile-") + ".lock")
    path.parent.mkdir(parents=True, exist_ok=True)
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
    """Takes the jobs of its pools' tenant queues in turn, and refreshes its presence and the running FIRE job's
    heartbeat from the worker process itself.

    Jobs are taken with ``JobQueues.take`` (app/core/queues.py), not RQ's dequeue: the tenants' queues are found as
    tenants appear and served in turn, and a taken job is marked with this worker's presence name in the same step,
    so that the API's watchdog queues it again within seconds if this worker dies before the job is claimed; the
    mark goes once the run ends. The RQ queues it is built with are its pools' own (what it registers with).

    The work horse cannot be trusted to beat: a numba kernel holds the GIL for as long as it runs, which would
    starve a heartbeat thread there. The parent only waits on the horse, so its beats stop exactly when the horse
    or the whole machine is gone. A Redis failure while a job runs is logged, not fatal: the horse keeps working
    and the parent keeps waiting for it.
    """

    def __init__(
        self,
        *args,
        records: JobRecords,
        presence: Presence,
        job_queues: JobQueues,
        warm_up: BackgroundWarmUp | None = None,
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        self.records = records
        self.presence = presence
        self.job_queues = job_queues
        self.pools = [queue.name for queue in self.queues]
        self.warm_up = warm_up
        self.shutdown_requested = False
        self.dequeuing = False

    def heartbeat(self, timeout=None, pipeline=None):
        super().heartbeat(timeout, pipeline)
        self.presence.beat(READY)
        if self.dequeuing and self.warm_up is not None and self.warm_up.ready_to_load():
            # between two jobs (RQ beats before each dequeue and on each idle timeout), never while a horse runs
            with self.presence.beating(READY, self.job_monitoring_interval):
                self.warm_up.load()

    def dequeue_job_and_maintain_ttl(self, timeout, max_idle_time=None):
        """The next job of the pools' queues (in the pools' order, each pool's tenants in turn) and its queue, or
        None where they are empty in burst mode (``timeout`` None); beats every ``timeout`` seconds while it waits,
        looking at the queues every IDLE_POLL_SECONDS. A lost Redis is waited out with backoff, as RQ's own does."""
        self.dequeuing = True
        self.set_state(WorkerStatus.IDLE)
        self.procline("Listening on " + ",".join(self.pools))
        beat_at, backoff = -math.inf, 1.0
        try:
            while True:
                try:
                    if time.monotonic() - beat_at >= (timeout or 0):
                        self.heartbeat()
                        beat_at = time.monotonic()
                        if self.should_run_maintenance_tasks:
                            self.run_maintenance_tasks()
                    taken = self.take()
                except REDIS_FAILURES as error:
                    log.warning("worker %s: Redis unreachable (%s); next try in %.0f s", self.name, error, backoff)
                    time.sleep(backoff)
                    backoff = min(2 * backoff, RECONNECT_CAP_SECONDS)
                    continue
                backoff = 1.0
                if taken is not None:
                    job, queue = taken
                    self.log.info("Worker %s: %s: %s", self.name, queue.name, job.id)
                    self.heartbeat()
                    return taken
                if timeout is None:
                    return None
                time.sleep(IDLE_POLL_SECONDS)
        finally:
            self.dequeuing = False

    def take(self) -> tuple[Job, Queue] | None:
        """Take the next job (marked taken by this worker) and its RQ job; None where every queue is empty."""
        for pool in self.pools:
            while (taken := self.job_queues.take(pool, self.presence.name)) is not None:
                name, rq_id = taken
                try:
                    job = self.job_class.fetch(rq_id, connection=self.connection, serializer=self.serializer)
                except NoSuchJobError:
                    self.job_queues.release(rq_id)  # deleted while it waited: take the next one
                    continue
                return job, self.queue_class(
                    name, connection=self.connection, job_class=self.job_class, serializer=self.serializer
                )
        return None

    def execute_job(self, job, queue):
        try:
            super().execute_job(job, queue)
        finally:
            try:
                self.job_queues.release(job.id)
            except REDIS_FAILURES as error:  # the mark outlives this worker: the watchdog drops it then
                log.warning("worker %s: job %s left marked taken (%s)", self.name, job.id, error)

    def clean_registries(self):
        """RQ's cleanup of its registries (runs whose worker died, expired results) for every queue of the pools,
        the tenants' included: RQ would clean only the queues the worker was built with."""
        own = self.queues
        self.queues = [
            self.queue_class(name, connection=self.connection, job_class=self.job_class, serializer=self.serializer)
            for pool in self.pools
            for name in self.job_queues.names(pool)
        ]
        try:
            super().clean_registries()
        finally:
            self.queues = own

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
    started = time.perf_counter()
    warm_up = None
    with presence.beating(WARMING, settings.heartbeat_seconds):
        if warm_stamp().exists():  # only loading: no lock, so the workers load side by side
            log.info("worker %s: loading the solver from numba's cache; jobs wait meanwhile", presence.name)
            warm_solver()
        else:
            log.info(
                "worker %s: numba's cache is cold (a first start of this solver version on this machine): jobs "
                "are taken at once and compile what they need, while one process per machine compiles the rest "
                "in the background (two to three minutes on 2 cores)",
                presence.name,
            )
            warm_up = BackgroundWarmUp()
        runs.core()  # open the job modules' stores once, not in every forked horse
    log.info("worker %s: ready to take jobs after %.1f s", presence.name, time.perf_counter() - started)
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
                job_queues=JobQueues(Keys.from_settings(settings), rq_redis),
                warm_up=warm_up,
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
