"""The RQ side of jobs: queue names, the task each job kind runs, the RQ id of one run of a job.

Tasks are named, not imported: the core never imports the workers.
"""

from redis import Redis
from rq import Queue
from rq.serializers import JSONSerializer

TASKS = {
    "train": "worker.tasks.train_forest",
    "path": "worker.tasks.run_path",
    "grid": "worker.tasks.collect_grid",
    "cv": "worker.tasks.collect_folds",
    "batch": "worker.batch.collect_batch",
    "batch_chunk": "worker.batch.score_batch_chunk",
}


def make_queue(name: str, redis: Redis) -> Queue:
    return Queue(name, connection=redis, serializer=JSONSerializer)


def rq_job_id(job_id: str, attempt: int, continuation: int = 0) -> str:
    """RQ id of one run of a FIRE job; a grid parent re-queued behind retried cells gets a continuation."""
    return f"{job_id}-{attempt}" + (f"c{continuation}" if continuation else "")
