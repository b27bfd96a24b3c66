from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from app.api.deps import ServicesDep
from app.schemas import Resource
from app.services.uploads import receive_upload

router = APIRouter(prefix="/v1/datasets", tags=["datasets"])

_UPLOAD_BODY = {
    "requestBody": {"content": {
        "text/csv": {"schema": {"type": "string"}, "example": "Sex,Length,rings\nM,0.455,15\nF,0.53,9\n"},
        "application/json": {"schema": {"type": "array", "items": {"type": "object"}},
                             "example": [{"x": 1.0, "y": 2.0}, {"x": 2.0, "y": 3.5}]},
        "application/vnd.apache.parquet": {"schema": {"type": "string", "format": "binary"}},
        "multipart/form-data": {"schema": {"type": "object", "properties": {
            "file": {"type": "string", "format": "binary"}, "target": {"type": "string"}}}},
    }, "description": "CSV (gzipped too), Parquet or JSON records; raw body or multipart"}}


@router.post("", status_code=201, response_model=Resource, openapi_extra=_UPLOAD_BODY,
             summary="Upload a table; its content hash is the id")
async def upload_dataset(request: Request, response: Response, services: ServicesDep,
                         target: Annotated[str | None, Query(description="the target column")] = None,
                         format: Annotated[str | None, Query(description="csv, parquet or json")] = None):
    upload = await receive_upload(request, services.settings.max_upload_bytes)
    meta, created = services.datasets.create(
        upload.data, target=target or upload.fields.get("target"), content_type=upload.content_type,
        filename=upload.filename, declared_format=format or upload.fields.get("format"))
    response.status_code = 201 if created else 200
    response.headers["Location"] = f"/v1/datasets/{meta['id']}"
    return meta


@router.get("", summary="Datasets, newest first")
def list_datasets(services: ServicesDep) -> list[dict]:
    return services.datasets.list()


@router.get("/{dataset_id}", response_model=Resource, summary="Schema, encoding and size of a dataset")
def get_dataset(dataset_id: str, services: ServicesDep):
    return services.datasets.get(dataset_id)
