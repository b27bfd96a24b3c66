from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from rq import Worker

from app.api.deps import CoreDep
from app.api.problems import ProblemError
from app.api.schemas import Health, Readiness
from app.core.errors import FieldFault

router = APIRouter(tags=["operations"])


@router.get("/healthz", response_model=Health, summary="The process is up")
def healthz():
    return Health()


@router.get("/readyz", response_model=Readiness, summary="Redis answers and at least one worker listens to the queue")
def readyz(core: CoreDep):
    try:
        core.redis.ping()
    except Exception as exc:
        raise ProblemError(503, f"Redis does not answer: {exc}",
                           [FieldFault("redis", "unreachable", "check FIRE_REDIS_URL and the Redis server")]) from exc
    workers = Worker.all(queue=core.jobs.queue)
    if not workers:
        raise ProblemError(503, "No worker listens to the queue.",
                           [FieldFault("workers", "none alive", "start `fire-rules worker` pointing at this Redis")])
    return Readiness(workers=len(workers), queued=core.jobs.queue.count)


@router.get("/metrics", response_class=Response, summary="Prometheus metrics (text exposition format)",
            responses={200: {"content": {CONTENT_TYPE_LATEST: {"schema": {"type": "string"}}}}})
def metrics(request: Request) -> Response:
    return Response(generate_latest(request.app.state.metrics_registry), media_type=CONTENT_TYPE_LATEST)
