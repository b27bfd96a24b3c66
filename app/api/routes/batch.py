"""Batch scoring: a CSV or Parquet file (or a stored dataset) scored by a model in chunk jobs on the worker pool,
the scored rows downloaded as Parquet or CSV (app/core/batch/ says how).

- ``POST /v1/models/{ref}/batch``: ``ref`` a model id, a model name (its latest version, as ``/predict`` by name), or
  ``name@alias``, ``name@3`` (a version), ``name@latest``;
  the body a multipart upload (one file part named ``file``), a raw CSV or Parquet body, or JSON naming a dataset
  (``{"dataset_id": ...}``). Uploads are spooled to this process's disk (``app.api.uploads``), counted against
  FIRE_MAX_BATCH_BYTES.
- ``GET /v1/models/batch/{job_id}``: where it stands; ``.../result``: the scored rows, streamed;
  ``POST .../cancel``; ``DELETE``: the job, its chunk jobs and every stored part.
"""

import json
from typing import Annotated

from fastapi import APIRouter, Path, Query, Request, Response
from fastapi.responses import StreamingResponse
from pydantic import FiniteFloat, ValidationError

from app.api.batch_schemas import BatchDatasetRequest, BatchLinks, BatchProgressView, BatchView
from app.api.deps import CoreDep, CpuDep, TenantDep
from app.api.problems import problem_responses
from app.api.uploads import receive_file
from app.core.batch.files import MEDIA_TYPES, BatchInput, OutputFormat, detect_input_format
from app.core.batch.scoring import BatchOptions, parse_ref
from app.core.container import Core
from app.core.errors import FieldFault, Invalid, TooLarge
from app.core.job_documents import ACTIVE, BatchJobSpec, JobRecord, JobState

router = APIRouter(prefix="/v1/models", tags=["batch scoring"])
BATCH_PREFIX = "/v1/models/"

_BATCH_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {"type": "object", "properties": {"file": {"type": "string", "format": "binary"}}}
            },
            "text/csv": {"schema": {"type": "string"}},
            "application/vnd.apache.parquet": {"schema": {"type": "string", "format": "binary"}},
            "application/json": {"schema": BatchDatasetRequest.model_json_schema()},
        },
        "description": "a CSV or Parquet file (multipart part 'file', or the raw body), or JSON naming a dataset",
    }
}


def is_batch_upload(method: str, path: str) -> bool:
    """Whether a request is a batch submission, whose route counts its body itself (FIRE_MAX_BATCH_BYTES)."""
    return method == "POST" and path.startswith(BATCH_PREFIX) and path.rstrip("/").endswith("/batch")


def batch_view(core: Core, record: JobRecord) -> BatchView:
    spec = record.spec
    assert isinstance(spec, BatchJobSpec)
    progress = core.batches.progress(record)
    base = f"/v1/models/batch/{record.id}"
    return BatchView(
        **{name: getattr(record, name) for name in JobState.model_fields},
        batch=BatchProgressView(
            n_rows=spec.n_rows,
            n_chunks=spec.n_chunks,
            chunks_done=progress.chunks_done,
            rows_done=progress.rows_done,
            chunks_failed=progress.chunks_failed,
        ),
        links=BatchLinks(self=base, result=f"{base}/result", cancel=f"{base}/cancel", job=f"/v1/jobs/{record.id}"),
    )


@router.post(
    "/{ref}/batch",
    status_code=202,
    response_model=BatchView,
    openapi_extra=_BATCH_BODY,
    summary="Score a CSV or Parquet file (or a stored dataset) in chunk jobs; download the scored rows",
    responses=problem_responses(400, 404, 413, 415, 422, 429),
)
async def submit_batch(
    ref: Annotated[
        str,
        Path(
            description="a model id, a model name (its latest version), name@alias, name@3 (a version) or name@latest"
        ),
    ],
    request: Request,
    response: Response,
    core: CoreDep,
    cpu: CpuDep,
    tenant: TenantDep,
    output_format: Annotated[OutputFormat, Query(alias="format", description="the result's format")] = "parquet",
    explain: Annotated[
        bool, Query(description="add the ids of the rules that fired and what each adds (and each linear term)")
    ] = False,
    chunk_rows: Annotated[
        int | None,
        Query(
            ge=1,
            le=10_000_000,
            description="rows per chunk job (default FIRE_BATCH_CHUNK_ROWS); at least FIRE_BATCH_MIN_CHUNK_ROWS (a 422 "
            "naming it below: a chunk job costs as much as scoring that many rows)",
        ),
    ] = None,
    times: Annotated[
        list[FiniteFloat] | None,
        Query(
            description="a Cox model: add S(t | x) at each of these times (repeat the parameter), each from 0 to the "
            "last follow-up time of the model's training rows"
        ),
    ] = None,
    id_column: Annotated[
        str | None, Query(description="an input column copied into the result beside `row`, to match rows")
    ] = None,
    input_format: Annotated[
        str | None, Query(description="csv or parquet (default: from the file's bytes, name or Content-Type)")
    ] = None,
) -> BatchView:
    options = BatchOptions(output_format, explain, chunk_rows, times, id_column)
    target = parse_ref(ref)
    content_type = request.headers.get("content-type", "")
    if content_type.split(";")[0].strip().lower() == "application/json":
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > core.settings.max_json_bytes:
                raise TooLarge(
                    f"The JSON body is larger than the limit of {core.settings.max_json_bytes} bytes.",
                    [FieldFault("body", "too large", 'send {"dataset_id": "..."}')],
                )
        try:
            asked = BatchDatasetRequest.model_validate_json(body)
        except ValidationError as error:
            raise Invalid(
                "The JSON body names no dataset.",
                [FieldFault("dataset_id", json.dumps(error.errors()[0]["msg"]), 'send {"dataset_id": "..."}')],
            ) from error
        record = await cpu.run(lambda: core.batches.submit(target, options, tenant=tenant, dataset_id=asked.dataset_id))
    else:
        with await receive_file(request, core.settings.max_batch_bytes, "FIRE_MAX_BATCH_BYTES") as received:
            found = detect_input_format(received.head(8), received.content_type, received.filename, input_format)
            upload = BatchInput(received.file, found, received.filename)  # type: ignore[arg-type]
            record = await cpu.run(lambda: core.batches.submit(target, options, tenant=tenant, upload=upload))
    response.headers["Location"] = f"/v1/models/batch/{record.id}"
    return await cpu.run(batch_view, core, record)


@router.get(
    "/batch/{job_id}",
    response_model=BatchView,
    summary="Where a batch scoring job stands: its chunks, the rows scored, its error",
    responses=problem_responses(404),
)
def get_batch(job_id: str, response: Response, core: CoreDep, tenant: TenantDep) -> BatchView:
    record = core.batches.get(job_id, tenant=tenant)
    if record.status in ACTIVE:
        response.headers["Retry-After"] = "1"
    return batch_view(core, record)


@router.get(
    "/batch/{job_id}/result",
    response_class=StreamingResponse,
    summary="The scored rows of a succeeded batch job, streamed as Parquet or CSV",
    responses={
        200: {
            "description": "the scored rows: row, the id column, prediction, probabilities, survival, explanations",
            "content": {
                MEDIA_TYPES["parquet"]: {"schema": {"type": "string", "format": "binary"}},
                MEDIA_TYPES["csv"]: {"schema": {"type": "string"}},
            },
        },
        **problem_responses(404, 409),
    },
)
def get_batch_result(
    job_id: str,
    core: CoreDep,
    tenant: TenantDep,
    format: Annotated[
        OutputFormat | None, Query(description="parquet or csv (default: the format the job was asked for)")
    ] = None,
) -> StreamingResponse:
    record = core.batches.get(job_id, tenant=tenant)
    spec = record.spec
    assert isinstance(spec, BatchJobSpec)
    chosen = format or spec.output_format
    parts = core.batches.stream_result(job_id, tenant=tenant, output_format=chosen)
    return StreamingResponse(
        parts,
        media_type=MEDIA_TYPES[chosen],
        headers={"Content-Disposition": f'attachment; filename="{job_id}.{chosen}"'},
    )


@router.post(
    "/batch/{job_id}/cancel",
    status_code=202,
    response_model=BatchView,
    summary="Cancel a queued or running batch job and its chunk jobs (its stored parts are deleted)",
    responses=problem_responses(404, 409),
)
def cancel_batch(job_id: str, core: CoreDep, tenant: TenantDep) -> BatchView:
    return batch_view(core, core.batches.cancel(job_id, tenant=tenant))


@router.delete(
    "/batch/{job_id}",
    status_code=204,
    response_class=Response,
    summary="Delete a batch job (canceled first if it runs), its chunk jobs, its input and its result",
    responses=problem_responses(404),
)
def delete_batch(job_id: str, core: CoreDep, tenant: TenantDep) -> Response:
    core.batches.delete(job_id, tenant=tenant)
    return Response(status_code=204)
