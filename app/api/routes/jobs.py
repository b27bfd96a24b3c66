import asyncio
from collections.abc import AsyncIterable
from typing import Annotated

from fastapi import APIRouter, Header, Request, Response
from fastapi.sse import EventSourceResponse, ServerSentEvent

from app.api.deps import CoreDep
from app.api.schemas import JobView, PathJobRequest, StepRules
from app.core.job_documents import ACTIVE, TERMINAL, JobResult

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])
POLL_SECONDS = 1
EVENT_POLL_SECONDS = 0.25


@router.post("", status_code=202, response_model=JobView, summary="Run a path (or a grid of paths) on a worker")
def submit_job(body: PathJobRequest, response: Response, core: CoreDep,
               idempotency_key: Annotated[str | None, Header(description="same key, same job")] = None):
    record = core.jobs.submit_path(body.submission(), idempotency_key)
    response.headers["Location"] = f"/v1/jobs/{record.id}"
    return JobView.of(record)


@router.get("", response_model=list[JobView], summary="Recent jobs, newest first")
def list_jobs(core: CoreDep):
    return [JobView.of(record) for record in core.jobs.list()]


@router.get("/{job_id}", response_model=JobView, summary="Status, progress, timings and errors of a job")
def get_job(job_id: str, response: Response, core: CoreDep):
    record = core.jobs.get(job_id)
    if record.status in ACTIVE:
        response.headers["Retry-After"] = str(POLL_SECONDS)
    return JobView.of(record)


@router.get("/{job_id}/events", response_class=EventSourceResponse,
            summary="Progress as server-sent events (`progress`, then one `status`), each carrying the job")
async def job_events(job_id: str, request: Request, core: CoreDep) -> AsyncIterable[JobView]:
    # yields ServerSentEvents (to name each event) whose data is a JobView: the annotation documents the data
    last_sent = None
    job = core.jobs.get(job_id)  # not found: an error before the stream starts
    while not await request.is_disconnected():
        snapshot = (job.status, job.progress, job.attempt)
        if snapshot != last_sent:
            last_sent = snapshot
            yield ServerSentEvent(data=JobView.of(job), event="status" if job.status in TERMINAL else "progress",
                                  retry=int(POLL_SECONDS * 1000))
        if job.status in TERMINAL:
            return
        await asyncio.sleep(EVENT_POLL_SECONDS)
        job = await asyncio.to_thread(core.jobs.get, job_id)


@router.post("/{job_id}/cancel", status_code=202, response_model=JobView,
             summary="Cancel a queued or running job (and a grid's cells)")
def cancel_job(job_id: str, core: CoreDep):
    return JobView.of(core.jobs.cancel(job_id))


@router.get("/{job_id}/result", response_model=JobResult, summary="Every path step and the selected one")
def get_result(job_id: str, core: CoreDep):
    return core.jobs.result(job_id)


@router.get("/{job_id}/steps/{step}/rules", response_model=StepRules, summary="The rules of one path step")
def get_step_rules(job_id: str, step: int, core: CoreDep):
    result, ensemble = core.jobs.step_rules(job_id, step)
    return StepRules(**result.steps[step].to_dict(), job_id=job_id, step=step, selected=step == result.selected,
                     rules=ensemble.to_dict(), text=ensemble.to_text())
