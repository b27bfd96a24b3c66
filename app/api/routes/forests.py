from typing import Annotated

from fastapi import APIRouter, Header, Query, Request, Response

from app.api.deps import ServicesDep
from app.api.views import job_view
from app.schemas import Resource, TrainForestRequest
from app.services.uploads import receive_upload

router = APIRouter(prefix="/v1/forests", tags=["forests"])

_UPLOAD_BODY = {"requestBody": {"content": {
    "application/json": {"schema": {"type": "object"},
                         "example": {"n_features": 1, "trees": [{"children_left": [1, -1, -1],
                                                                 "children_right": [2, -1, -1],
                                                                 "feature": [0, -2, -2],
                                                                 "threshold": [0.5, 0, 0],
                                                                 "value": [0, -1.0, 1.0]}]}},
    "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
    "multipart/form-data": {"schema": {"type": "object", "properties": {
        "file": {"type": "string", "format": "binary"}}}},
}, "description": "fire JSON, XGBoost JSON, LightGBM dump_model() JSON or .skops; pickles are refused (415)"}}


@router.post("", status_code=201, response_model=Resource, openapi_extra=_UPLOAD_BODY,
             summary="Upload a forest in a safe format")
async def upload_forest(request: Request, response: Response, services: ServicesDep,
                        format: Annotated[str | None, Query(
                            description="fire-json, xgboost-json, lightgbm-json or skops")] = None,
                        dataset_id: Annotated[str | None, Query(
                            description="check the forest's features against this dataset")] = None):
    upload = await receive_upload(request, services.settings.max_upload_bytes)
    dataset = services.datasets.get(dataset_id) if dataset_id else None
    meta, created = services.forests.upload(upload.data, upload.filename, format or upload.fields.get("format"),
                                            dataset)
    response.status_code = 201 if created else 200
    response.headers["Location"] = f"/v1/forests/{meta['id']}"
    return meta


@router.post("/train", status_code=202, summary="Train a forest from a dataset on a worker")
def train_forest(body: TrainForestRequest, response: Response, services: ServicesDep,
                 idempotency_key: Annotated[str | None, Header()] = None) -> dict:
    record = services.jobs.submit_training(body, idempotency_key)
    response.headers["Location"] = f"/v1/jobs/{record['id']}"
    return job_view(record)


@router.get("", summary="Forests, newest first")
def list_forests(services: ServicesDep) -> list[dict]:
    return services.forests.list()


@router.get("/{forest_id}", response_model=Resource, summary="Size and features of a forest")
def get_forest(forest_id: str, services: ServicesDep):
    return services.forests.get(forest_id)
