from typing import Annotated

from fastapi import APIRouter, Header, Query, Request, Response

from app.api.deps import CoreDep, CpuDep, TenantDep
from app.api.problems import problem_responses
from app.api.schemas import JobView, TrainForestRequest
from app.api.uploads import receive_file
from app.core.forests import ForestInfo, ForestTrees

router = APIRouter(prefix="/v1/forests", tags=["forests"])
MAX_TREES_PER_READ = 100

_EXAMPLE_FOREST = {
    "format": "fire-forest",
    "version": 1,
    "kind": "random_forest",
    "n_features": 1,
    "feature_names": ["x"],
    "base_score": 0.0,
    "tree_weight": 1.0,
    "trees": [
        {
            "children_left": [1, -1, -1],
            "children_right": [2, -1, -1],
            "feature": [0, -2, -2],
            "threshold": [0.5, 0.0, 0.0],
            "value": [0.0, -1.0, 1.0],
        }
    ],
}
_UPLOAD_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": {"type": "object"}, "example": _EXAMPLE_FOREST},
            "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
            "multipart/form-data": {
                "schema": {"type": "object", "properties": {"file": {"type": "string", "format": "binary"}}}
            },
        },
        "description": "fire JSON, XGBoost JSON, LightGBM dump_model() JSON or .skops; pickles are refused (415). "
        "Which rows an uploaded forest learned from is unknown here: keep its training rows out of the "
        "validation rows of the jobs that use it.",
    }
}


@router.post(
    "",
    status_code=201,
    response_model=ForestInfo,
    openapi_extra=_UPLOAD_BODY,
    summary="Upload a forest in a safe format",
    responses={
        200: {"model": ForestInfo, "description": "already stored (the same trees)"},
        **problem_responses(400, 404, 413, 415, 422),
    },
)
async def upload_forest(
    request: Request,
    response: Response,
    core: CoreDep,
    cpu: CpuDep,
    tenant: TenantDep,
    format: Annotated[str | None, Query(description="fire-json, xgboost-json, lightgbm-json or skops")] = None,
    dataset_id: Annotated[str | None, Query(description="check the forest's features against this dataset")] = None,
):
    with await receive_file(request, core.settings.max_upload_bytes, "FIRE_MAX_UPLOAD_BYTES") as upload:
        info, created = await cpu.run(
            lambda: core.forests.upload(
                upload.read(),
                tenant=tenant,
                filename=upload.filename,
                declared_format=format or upload.fields.get("format"),
                dataset=core.datasets.get(dataset_id, tenant=tenant) if dataset_id else None,
            )
        )
    response.status_code = 201 if created else 200
    response.headers["Location"] = f"/v1/forests/{info.id}"
    return info


@router.post(
    "/train",
    status_code=202,
    response_model=JobView,
    summary="Train a forest on the training rows of a dataset, on a worker",
    responses=problem_responses(400, 404, 409, 413, 422, 429),
)
def train_forest(
    body: TrainForestRequest,
    response: Response,
    core: CoreDep,
    tenant: TenantDep,
    idempotency_key: Annotated[str | None, Header(description="same key, same job")] = None,
):
    record = core.job_submission.submit_training(
        body.dataset_id, body.forest_spec(), body.validation.validation_split(), idempotency_key, tenant=tenant
    )
    response.headers["Location"] = f"/v1/jobs/{record.id}"
    return JobView.of(record)


@router.get("", response_model=list[ForestInfo], summary="Forests, newest first")
def list_forests(core: CoreDep, tenant: TenantDep):
    return core.forests.list(tenant=tenant)


@router.get(
    "/{forest_id}",
    response_model=ForestInfo,
    summary="Size, features and provenance of a forest",
    responses=problem_responses(404),
)
def get_forest(forest_id: str, core: CoreDep, tenant: TenantDep):
    return core.forests.get(forest_id, tenant=tenant)


@router.delete(
    "/{forest_id}",
    status_code=204,
    response_class=Response,
    summary="Delete a forest no queued or running job reads (its cached matrices too)",
    responses=problem_responses(404, 409),
)
def delete_forest(forest_id: str, core: CoreDep, tenant: TenantDep) -> Response:
    core.deletion.forest(forest_id, tenant=tenant)
    return Response(status_code=204)


@router.get(
    "/{forest_id}/trees",
    response_model=ForestTrees,
    response_model_exclude_none=True,
    summary="Some trees of a forest, as a fire-forest document holding those trees only",
    responses=problem_responses(404, 422),
)
def get_forest_trees(
    forest_id: str,
    core: CoreDep,
    tenant: TenantDep,
    tree: Annotated[
        list[int],
        Query(
            min_length=1,
            max_length=MAX_TREES_PER_READ,
            description=f"tree positions from 0, repeated (`?tree=0&tree=7`); at most {MAX_TREES_PER_READ}",
        ),
    ],
):
    """Node arrays of the requested trees: leaves are numbered per tree in left-to-right depth-first order,
    the order of a rule's `tree`/`leaf` in `/v1/jobs/{id}/steps/{k}/rules`."""
    return core.forests.trees(forest_id, tree, tenant=tenant)
