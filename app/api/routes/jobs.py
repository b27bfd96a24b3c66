import asyncio
from collections.abc import AsyncIterable
from typing import Annotated

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from fastapi.sse import EventSourceResponse, ServerSentEvent

from app.api.deps import CoreDep, TenantDep
from app.api.problems import problem_responses
from app.api.schemas import JobView, PathJobRequest, StepFoldStability, StepRules, StepStability
from app.core.connections import REDIS_FAILURES
from app.core.job_documents import ACTIVE, TERMINAL, JobRecord
from app.core.model_documents import longest_rule
from app.core.result_documents import JobResult, PathResultBase
from solver.rule_text import ShowMissing

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])
POLL_SECONDS = 1
EVENT_POLL_SECONDS = 0.25


@router.post(
    "",
    status_code=202,
    response_model=JobView,
    summary="Run a path (or a grid of paths) on a worker",
    responses=problem_responses(400, 404, 409, 413, 422, 429),
)
def submit_job(
    body: PathJobRequest,
    response: Response,
    core: CoreDep,
    tenant: TenantDep,
    idempotency_key: Annotated[str | None, Header(description="same key, same job")] = None,
):
    record = core.job_submission.submit_path(body.to_core(), idempotency_key, tenant=tenant)
    response.headers["Location"] = f"/v1/jobs/{record.id}"
    return JobView.of(record)


@router.get("", response_model=list[JobView], summary="Recent jobs, newest first")
def list_jobs(core: CoreDep, tenant: TenantDep):
    return [JobView.of(record) for record in core.jobs.list(tenant=tenant)]


def existing_job(job_id: str, core: CoreDep, tenant: TenantDep) -> JobRecord:
    return core.jobs.get(job_id, tenant=tenant)


@router.get(
    "/{job_id}",
    response_model=JobView,
    summary="Status, progress, timings and errors of a job",
    responses=problem_responses(404),
)
async def get_job(job: Annotated[JobRecord, Depends(existing_job)], response: Response):
    # a coroutine: the dependency read the job in a thread, what is left needs no second thread hop
    if job.status in ACTIVE:
        response.headers["Retry-After"] = str(POLL_SECONDS)
    return JobView.of(job)


@router.get(
    "/{job_id}/events",
    response_class=EventSourceResponse,
    summary="Progress as server-sent events (`progress`, then one `status`), each carrying the job",
    responses=problem_responses(404),
)
async def job_events(
    job: Annotated[JobRecord, Depends(existing_job)], request: Request, core: CoreDep, tenant: TenantDep
) -> AsyncIterable[JobView]:
    # the job is read (404 if unknown) before the stream starts; yields ServerSentEvents (to name each event)
    # whose data is a JobView: the annotation documents the data
    last_sent = None
    while not await request.is_disconnected():
        snapshot = (job.status, job.progress, job.attempt)
        if snapshot != last_sent:
            last_sent = snapshot
            yield ServerSentEvent(  # type: ignore[misc]  # FastAPI reads the annotation as each event.data type
                data=JobView.of(job),
                event="status" if job.status in TERMINAL else "progress",
                retry=int(POLL_SECONDS * 1000),
            )
        if job.status in TERMINAL:
            return
        await asyncio.sleep(EVENT_POLL_SECONDS)
        try:
            job = await asyncio.to_thread(core.jobs.get, job.id, tenant=tenant)
        except REDIS_FAILURES:
            core.redis_health.mark_down()
            return  # the client reconnects after `retry` ms, by then Redis may answer again


@router.post(
    "/{job_id}/cancel",
    status_code=202,
    response_model=JobView,
    summary="Cancel a queued or running job (and a grid's cells)",
    responses=problem_responses(404, 409),
)
def cancel_job(job_id: str, core: CoreDep, tenant: TenantDep):
    return JobView.of(core.jobs.cancel(job_id, tenant=tenant))


@router.delete(
    "/{job_id}",
    status_code=204,
    response_class=Response,
    summary="Delete a job (canceled first if queued or running), its result and a grid's cells",
    responses=problem_responses(404),
)
def delete_job(job_id: str, core: CoreDep, tenant: TenantDep) -> Response:
    core.deletion.job(job_id, tenant=tenant)
    return Response(status_code=204)


@router.get(
    "/{job_id}/result",
    response_model=JobResult,
    summary="Every path step and the selected one",
    responses=problem_responses(404, 409, 410),
)
def get_result(job_id: str, core: CoreDep, tenant: TenantDep):
    return core.job_results.result(job_id, tenant=tenant)


@router.get(
    "/{job_id}/steps/{step}/rules",
    response_model=StepRules,
    summary="The rules of one path step",
    responses=problem_responses(404, 409, 410, 422),
)
def get_step_rules(
    job_id: str,
    step: int,
    core: CoreDep,
    tenant: TenantDep,
    show_missing: Annotated[
        ShowMissing,
        Query(
            description=(
                "'or missing' in the text: 'auto' where the training rows had missing values in that "
                "column, 'always' wherever the forest routes missing values, 'never'"
            )
        ),
    ] = "auto",
):
    result, ensemble = core.job_results.step_rules(job_id, step, tenant=tenant)
    counts = result.steps[step].to_dict()
    if counts["n_linear"] is None:  # a step stored before the counts were split: its rules say which are linear
        counts.update(n_linear=len(ensemble.linear), n_rules=counts["n_terms"] - len(ensemble.linear))
    return StepRules(
        **counts,
        job_id=job_id,
        step=step,
        selected=step == result.selected,
        rules=ensemble.to_dict(),
        text=ensemble.to_text(show_missing=show_missing),
        longest_rule=longest_rule(ensemble),
        stability=None
        if result.stability is None
        else StepStability(
            dice=result.stability.dice,
            n_resamples=result.stability.n_resamples,
            frequencies=result.stability.frequencies[step],
        ),
        fold_stability=_fold_stability(result, step),
    )


def _fold_stability(result: PathResultBase, step: int) -> StepFoldStability | None:
    """A cross-validated job's fold stability at ``step`` (None: no folds, or a result stored before it)."""
    if result.cv is None or result.cv.stability is None:
        return None
    measured = result.cv.stability
    return StepFoldStability(dice=measured.dice[step], n_folds=result.cv.folds, frequencies=measured.frequencies[step])
