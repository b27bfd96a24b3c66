from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST

from app.api.deps import CoreDep, MetricsTenantDep
from app.api.problems import ProblemError, problem_responses
from app.api.schemas import Health, Readiness
from app.core.connections import REDIS_FAILURES
from app.core.container import Core
from app.core.errors import FieldFault
from app.core.workers import READY, WARMING

router = APIRouter(tags=["operations"])


@router.get("/healthz", response_model=Health, summary="The process is up")
def healthz():
    return Health()


@router.get(
    "/readyz",
    response_model=Readiness,
    responses=problem_responses(503),
    summary="Redis answers and at least one worker beats (ready, or still loading the solver)",
)
def readyz(core: CoreDep):
    require_redis_answers(core)
    try:
        workers = core.workers.alive(core.settings.queue_name)
        queued = core.jobs.queues.queued(core.settings.queue_name)
    except REDIS_FAILURES as error:
        core.redis_health.mark_down()
        raise ProblemError(
            503,
            f"Redis does not answer: {type(error).__name__}.",
            [FieldFault("redis", "unreachable", "retry shortly")],
            headers={"Retry-After": "1"},
        ) from error
    ready = sum(worker.state == READY for worker in workers)
    warming = sum(worker.state == WARMING for worker in workers)
    if not workers:
        fix = (
            "the embedded workers are being restarted: see this process's log"
            if core.settings.embedded
            else "start `fire-rules worker` pointing at this Redis"
        )
        raise ProblemError(
            503,
            "No worker has sent a heartbeat recently.",
            [FieldFault("workers", "none alive", fix)],
            headers={"Retry-After": "5"},
        )
    if ready:
        detail = f"{ready} worker(s) ready" + (f", {warming} preparing the solver" if warming else "")
    else:
        detail = (
            f"{warming} worker(s) loading the solver from numba's cache (a few seconds; on a cold cache a worker "
            f"takes jobs at once and compiles what each needs); the API serves and jobs wait in the queue until then"
        )
    return Readiness(
        status="ready" if ready else "warming", detail=detail, workers=ready, warming=warming, queued=queued
    )


@router.get(
    "/metrics",
    response_class=Response,
    summary="Prometheus metrics (text exposition format): every series for an operator's key, a tenant's own for "
    "its key (open where no key is configured)",
    responses={200: {"content": {CONTENT_TYPE_LATEST: {"schema": {"type": "string"}}}}, **problem_responses(401)},
)
def metrics(request: Request, tenant: MetricsTenantDep) -> Response:
    return Response(request.app.state.metrics.exposition(tenant), media_type=CONTENT_TYPE_LATEST)


def require_redis_answers(core: Core) -> None:
    """A 503 (Retry-After 1 s) unless Redis answers a ping now: the readiness of /readyz and /v2/health/ready."""
    if not core.redis_health.probe():
        raise ProblemError(
            503,
            "Redis does not answer.",
            [FieldFault("redis", "unreachable", "check FIRE_REDIS_URL and the Redis server")],
            headers={"Retry-After": "1"},
        )
