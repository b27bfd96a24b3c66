import asyncio
import json
from collections.abc import AsyncIterable
from typing import Annotated

from fastapi import APIRouter, Header, Request, Response
from fastapi.sse import EventSourceResponse, ServerSentEvent

from app.api.deps import ServicesDep
from app.api.views import job_view
from app.schemas import PathJobRequest
from app.services.job_records import ACTIVE, TERMINAL

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])
POLL_SECONDS = 1
EVENT_POLL_SECONDS = 0.25


@router.post("", status_code=202, summary="Run a path (or a grid of paths) on a worker")
def submit_job(body: PathJobRequest, response: Response, services: ServicesDep,
               idempotency_key: Annotated[str | None, Header(description="same key, same job")] = None) -> dict:
    record = services.jobs.submit_path(body, idempotency_key)
    response.headers["Location"] = f"/v1/jobs/{record['id']}"
    return job_view(record)


@router.get("", summary="Recent jobs, newest first")
def list_jobs(services: ServicesDep) -> list[dict]:
    return [job_view(record) for record in services.jobs.list()]


@router.get("/{job_id}", summary="Status, progress, timings and errors of a job")
def get_job(job_id: str, response: Response, services: ServicesDep) -> dict:
    record = services.jobs.get(job_id)
    if record["status"] in ACTIVE:
        response.headers["Retry-After"] = str(POLL_SECONDS)
    return job_view(record)


@router.get("/{job_id}/events", response_class=EventSourceResponse,
            summary="Progress as server-sent events; ends with the final status")
async def job_events(job_id: str, request: Request, services: ServicesDep) -> AsyncIterable[ServerSentEvent]:
    services.jobs.get(job_id)  # 404 before the stream starts
    last_sent = None
    while not await request.is_disconnected():
        record = job_view(await asyncio.to_thread(services.jobs.get, job_id))
        snapshot = json.dumps([record["status"], record["progress"], record["attempt"]])
        if snapshot != last_sent:
            last_sent = snapshot
            yield ServerSentEvent(data=record, event="status" if record["status"] in TERMINAL else "progress",
                                  retry=int(POLL_SECONDS * 1000))
        if record["status"] in TERMINAL:
            return
        await asyncio.sleep(EVENT_POLL_SECONDS)


@router.post("/{job_id}/cancel", status_code=202, summary="Cancel a queued or running job (and a grid's cells)")
def cancel_job(job_id: str, services: ServicesDep) -> dict:
    return job_view(services.jobs.cancel(job_id))


@router.get("/{job_id}/result", summary="Every path step and the selected one")
def get_result(job_id: str, services: ServicesDep) -> dict:
    return services.jobs.result(job_id)


@router.get("/{job_id}/steps/{step}/rules", summary="The rules of one path step")
def get_step_rules(job_id: str, step: int, services: ServicesDep) -> dict:
    result, ensemble = services.jobs.step_rules(job_id, step)
    return {"job_id": job_id, "step": step, "selected": step == result["selected"],
            **result["steps"][step], "rules": ensemble.to_dict(), "text": ensemble.to_text()}
