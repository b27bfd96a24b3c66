"""The RQ side of jobs: queue names, the task each job kind runs, the RQ id of one run of a job, and the tenants'
queues that workers take jobs from in turn.

Tasks are named, not imported: the core never imports the workers.

Fair work between tenants. A pool (FIRE_QUEUE_NAME, or the names a worker is given with ``--queues``) holds a queue
per tenant, ``{pool}:{tenant}`` (a tenant's name has no colon): every run of a tenant's job, its retries, a parent
queued after its cells, goes there (``tenant_queue``). A worker takes the next job from the pool's queues in turn
(``JobQueues.take``): from the first queue after the one served last (by name, wrapping around) that holds a job, so
that a tenant with 5,000 chunks queued waits for its turn like a tenant with one job. The tenants' queues are found
as tenants appear (keys may come from a file: no list of tenants is configured): every queue a job was put on is a
member of the ``queues`` set, read again before each take. The pool's own queue (``{pool}``, where jobs went
before queues were per tenant) is taken from in turn as well.

A take moves the job's id out of its queue and marks it taken by the worker (the ``taken-jobs`` hash: RQ id ->
the worker's presence name) in one step, a Lua script: a worker killed between RQ's dequeue and the job's claim
would leave the job in no queue, RQ's status still ``queued``, until RQ's cleanup minutes later. The worker removes
its mark once the run ended; the API's watchdog (``JobLifecycle.watch_running``) queues again the job of a mark
whose worker stopped beating (``app.core.workers``) while the job still waits on that run.
"""

from redis import Redis
from rq import Queue
from rq.serializers import JSONSerializer

from app.core.keys import Keys
from app.core.replies import text

TASKS = {
    "train": "worker.tasks.train_forest",
    "path": "worker.tasks.run_path",
    "grid": "worker.tasks.collect_grid",
    "cv": "worker.tasks.collect_folds",
    "batch": "worker.batch.collect_batch",
    "batch_chunk": "worker.batch.score_batch_chunk",
    "stability_fit": "worker.tasks.run_stability_fit",
}
TENANT_SEPARATOR = ":"  # between a pool and a tenant in a queue's name (no tenant name holds one)

# KEYS: the pool's turn (the queue served last), the taken marks, then the RQ keys of the pool's queues in name order;
# ARGV: the worker's name, then the queues' names in the same order. Returns {queue name, RQ id} or false. (Names are
# compared for equality only: Lua's < follows the server's locale. The served queue stays in the set, so it is found.)
_TAKE = """
local n = #KEYS - 2
local last = redis.call('GET', KEYS[1])
local start = 1
for i = 1, n do
  if ARGV[i + 1] == last then
    start = i % n + 1
  end
end
for k = 0, n - 1 do
  local i = (start - 1 + k) % n + 1
  local id = redis.call('LPOP', KEYS[i + 2])
  if id then
    redis.call('SET', KEYS[1], ARGV[i + 1])
    redis.call('HSET', KEYS[2], id, ARGV[1])
    return {ARGV[i + 1], id}
  end
end
return false
"""


def make_queue(name: str, redis: Redis) -> Queue:
    return Queue(name, connection=redis, serializer=JSONSerializer)


def tenant_queue(pool: str, tenant: str) -> str:
    """The name of the tenant's queue in ``pool``."""
    return f"{pool}{TENANT_SEPARATOR}{tenant}"


def rq_job_id(job_id: str, attempt: int) -> str:
    """RQ id of one run of a FIRE job: its attempt's."""
    return f"{job_id}-{attempt}"


def job_of(rq_id: str) -> str:
    """The FIRE job of an RQ id (``rq_job_id``'s inverse; a job id holds no hyphen)."""
    return rq_id.rsplit("-", 1)[0]


class JobQueues:
    """The tenants' queues of every pool under one key prefix, and the jobs workers took from them."""

    def __init__(self, keys: Keys, redis: Redis):
        self.keys = keys
        self.redis = redis
        self._take = redis.register_script(_TAKE)

    def announce(self, queue: str, pipeline=None) -> None:
        """Name ``queue`` among those workers take from (after a job was put on it: a worker never misses it)."""
        (pipeline or self.redis).sadd(self.keys.queues, queue)

    def names(self, pool: str) -> list[str]:
        """The pool's queues in name order: its own and its tenants'."""
        found = {text(name) for name in self.redis.smembers(self.keys.queues)}  # type: ignore[union-attr]
        return sorted({pool} | {name for name in found if name.startswith(pool + TENANT_SEPARATOR)})

    def take(self, pool: str, worker: str) -> tuple[str, str] | None:
        """The next job of the pool's queues in turn, marked taken by ``worker``: (queue name, RQ id), or None
        where every queue is empty."""
        names = self.names(pool)
        queue_keys = [make_queue(name, self.redis).key for name in names]
        taken = self._take(keys=[self.keys.queue_turn(pool), self.keys.taken_jobs, *queue_keys], args=[worker, *names])
        if not taken:
            return None
        queue, rq_id = taken
        return text(queue), text(rq_id)

    def release(self, rq_id: str) -> None:
        """The run of ``rq_id`` ended (or never began): its mark goes."""
        self.redis.hdel(self.keys.taken_jobs, rq_id)

    def taken(self) -> dict[str, str]:
        """Every run marked taken: RQ id -> the name of the worker that took it."""
        marks = self.redis.hgetall(self.keys.taken_jobs)
        return {text(rq_id): text(worker) for rq_id, worker in marks.items()}  # type: ignore[union-attr]

    def queued(self, pool: str) -> int:
        """Runs waiting in the pool's queues."""
        with self.redis.pipeline(transaction=False) as pipe:
            for name in self.names(pool):
                pipe.llen(make_queue(name, self.redis).key)
            return sum(pipe.execute())

    def job_ids(self, pool: str) -> list[str]:
        """The RQ ids waiting in the pool's queues, queue by queue in name order."""
        return [rq_id for name in self.names(pool) for rq_id in make_queue(name, self.redis).job_ids]
