"""`fire-rules worker`: compile the numba solver once, then fork a work horse per job (RQ Worker)."""
import logging

import numpy as np
from rq import Worker
from rq.serializers import JSONSerializer

from app.core.config import Settings
from app.core.connections import data_redis
from app.core.queues import TASKS, make_queue
from app.core.records import JobRecords
from worker import tasks

log = logging.getLogger(__name__)


def warm_solver() -> None:
    """Fit a tiny path of every kind so the forked work horses inherit compiled kernels."""
    from solver.fitting import fit_rules
    from solver.spec import ForestSpec, PathSpec

    rng = np.random.default_rng(0)
    X = rng.normal(size=(64, 3))
    y = X[:, 0] + 0.1 * rng.normal(size=64)
    forest = ForestSpec(n_estimators=3, max_depth=2, max_features=None)
    for penalty, fusion_ratio in (("l1", 0.0), ("mcp", 0.0), ("mcp", 1.0), ("l1", 1.0)):
        fit_rules(X, y, PathSpec(penalty=penalty, fusion_ratio=fusion_ratio, n_lambdas=3), forest=forest)


class FireWorker(Worker):
    """Refreshes the running FIRE job's heartbeat from the worker process itself.

    The work horse cannot be trusted to do it: a numba kernel holds the GIL for as long as it runs,
    which would starve a heartbeat thread there. The parent only waits on the horse, so its beats
    stop exactly when the horse or the whole machine is gone.
    """

    def __init__(self, *args, records: JobRecords, **kwargs):
        super().__init__(*args, **kwargs)
        self.records = records

    def maintain_heartbeats(self, job, execution):
        super().maintain_heartbeats(job, execution)
        if job.func_name in TASKS.values():
            job_id, attempt = job.args
            self.records.beat(job_id, attempt)


def run_worker(settings: Settings, queue_names: list[str] | None = None, burst: bool = False) -> bool:
    warm_solver()
    tasks.core()  # import the job module and open its stores once, not in every forked horse
    redis = data_redis(settings)
    queues = [make_queue(name, redis) for name in (queue_names or [settings.queue_name])]
    worker = FireWorker(queues, connection=redis, serializer=JSONSerializer, records=JobRecords(settings, redis),
                        job_monitoring_interval=settings.heartbeat_seconds)
    log.info("worker %s listening on %s", worker.name, [q.name for q in queues])
    return worker.work(burst=burst, logging_level="INFO")
