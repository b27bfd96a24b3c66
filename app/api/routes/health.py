from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from rq import Worker

from app.api.deps import ServicesDep
from app.errors import ProblemError, field_error

router = APIRouter(tags=["operations"])


@router.get("/healthz", summary="The process is up")
def healthz() -> dict:
    return {"status": "ok"}


@router.get("/readyz", summary="Redis answers and at least one worker listens to the queue")
def readyz(services: ServicesDep) -> dict:
    try:
        services.redis.ping()
    except Exception as exc:
        raise ProblemError(503, f"Redis does not answer: {exc}",
                           [field_error("redis", "unreachable", "check FIRE_REDIS_URL and the Redis server")]) from exc
    workers = Worker.all(queue=services.jobs.queue)
    if not workers:
        raise ProblemError(503, "No worker listens to the queue.",
                           [field_error("workers", "none alive", "start `fire-rules worker` pointing at this Redis")])
    return {"status": "ready", "workers": len(workers), "queued": services.jobs.queue.count}


@router.get("/metrics", summary="Prometheus metrics", response_class=Response)
def metrics(request: Request) -> Response:
    return Response(generate_latest(request.app.state.metrics_registry), media_type=CONTENT_TYPE_LATEST)
