from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from app.api.deps import CoreDep, CpuDep, TenantDep
from app.api.problems import ProblemError, problem_responses
from app.api.uploads import receive_file
from app.core.datasets import DatasetInfo
from app.core.errors import FieldFault
from app.core.tables import TASKS, Task

router = APIRouter(prefix="/v1/datasets", tags=["datasets"])

_UPLOAD_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "text/csv": {"schema": {"type": "string"}, "example": "Sex,Length,rings\nM,0.455,15\nF,0.53,9\n"},
            "application/json": {
                "schema": {"type": "array", "items": {"type": "object"}},
                "example": [{"x": 1.0, "y": 2.0}, {"x": 2.0, "y": 3.5}],
            },
            "application/vnd.apache.parquet": {"schema": {"type": "string", "format": "binary"}},
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "properties": {
                        "file": {"type": "string", "format": "binary"},
                        "target": {"type": "string"},
                        "task": {"type": "string", "enum": list(TASKS)},
                        "event": {"type": "string"},
                        "exposure": {"type": "string"},
                        "offset": {"type": "string"},
                    },
                }
            },
        },
        "description": "CSV (gzipped too), Parquet or JSON records; raw body or multipart",
    }
}


@router.post(
    "",
    status_code=201,
    response_model=DatasetInfo,
    openapi_extra=_UPLOAD_BODY,
    summary="Upload a table; its content hash is the id",
    responses={
        200: {"model": DatasetInfo, "description": "already stored (the same content and target)"},
        **problem_responses(400, 413, 415, 422),
    },
)
async def upload_dataset(
    request: Request,
    response: Response,
    core: CoreDep,
    cpu: CpuDep,
    tenant: TenantDep,
    target: Annotated[str | None, Query(description="the target column")] = None,
    format: Annotated[str | None, Query(description="csv, parquet or json")] = None,
    task: Annotated[
        Task | None,
        Query(
            description=(
                "classification, multiclass, regression, count, amount or survival; by default detected: a "
                "target with exactly two distinct values (text, booleans or numbers) is classification, text "
                "labels (3 to FIRE_MAX_CLASSES of them) multiclass, any other numeric target regression. "
                "count (numbers >= 0, fitted with the Poisson loss), amount (numbers >= 0, Tweedie or Gamma), "
                "survival (target: the time column, > 0; with event) and integer class codes (multiclass) are "
                "declared, never detected"
            )
        ),
    ] = None,
    event: Annotated[
        str | None,
        Query(description="task=survival: the event column, 1/true where the event happened, 0/false if censored"),
    ] = None,
    exposure: Annotated[
        str | None,
        Query(
            description=(
                "an exposure column (> 0 on every row; not a feature): paths fit target / exposure with the "
                "exposure as row weights (poisson, tweedie, gamma), and its models multiply the rate by it"
            )
        ),
    ] = None,
    offset: Annotated[
        str | None,
        Query(
            description=(
                "an offset column (a finite number on every row; not a feature): added to every row's score, known "
                "and not fitted (the log of an exposure, a prior model's score), for the squared, poisson, tweedie "
                "and gamma losses; its models answer exp(score + offset) (squared: score + offset), a scored row's "
                "offset read from this column (0 where missing). With exposure, the offset applies to the rate"
            )
        ),
    ] = None,
):
    with await receive_file(request, core.settings.max_upload_bytes, "FIRE_MAX_UPLOAD_BYTES") as upload:
        target = target or upload.fields.get("target")
        if not target:
            raise ProblemError(
                422,
                "Name the target column.",
                [FieldFault("query.target", "missing", "pass ?target=COLUMN (or a 'target' form field)")],
            )
        info, created = await cpu.run(
            lambda: core.datasets.create(
                upload.read(),
                tenant=tenant,
                target=target,
                content_type=upload.content_type,
                filename=upload.filename,
                declared_format=format or upload.fields.get("format"),
                task=task or upload.fields.get("task"),
                event=event or upload.fields.get("event"),
                exposure=exposure or upload.fields.get("exposure"),
                offset=offset or upload.fields.get("offset"),
            )
        )
    response.status_code = 201 if created else 200
    response.headers["Location"] = f"/v1/datasets/{info.id}"
    return info


@router.get("", response_model=list[DatasetInfo], summary="Datasets, newest first")
def list_datasets(core: CoreDep, tenant: TenantDep):
    return core.datasets.list(tenant=tenant)


@router.get(
    "/{dataset_id}",
    response_model=DatasetInfo,
    summary="Schema, encoding and size of a dataset",
    responses=problem_responses(404),
)
def get_dataset(dataset_id: str, core: CoreDep, tenant: TenantDep):
    return core.datasets.get(dataset_id, tenant=tenant)


@router.delete(
    "/{dataset_id}",
    status_code=204,
    response_class=Response,
    summary="Delete a dataset no queued or running job reads (its cached matrices too)",
    responses=problem_responses(404, 409),
)
def delete_dataset(dataset_id: str, core: CoreDep, tenant: TenantDep) -> Response:
    core.deletion.dataset(dataset_id, tenant=tenant)
    return Response(status_code=204)
