from typing import Annotated

from fastapi import APIRouter, Query, Response

from app.api.deps import ServicesDep
from app.schemas import PredictRequest, PredictResponse, PromoteRequest, Resource

router = APIRouter(prefix="/v1/models", tags=["models"])


@router.post("", status_code=201, response_model=Resource, summary="Promote a job step to a versioned model")
def promote(body: PromoteRequest, response: Response, services: ServicesDep):
    model = services.models.promote(body)
    response.headers["Location"] = f"/v1/models/{model['id']}"
    return model


@router.get("", summary="Models, newest first")
def list_models(services: ServicesDep) -> list[dict]:
    return services.models.list()


@router.get("/{model_id}", response_model=Resource, summary="Rules, intercept, metrics and provenance")
def get_model(model_id: str, services: ServicesDep):
    return services.models.get(model_id)


@router.post("/{model_id}/predict", response_model=PredictResponse, response_model_exclude_none=True,
             summary="Score rows given in the dataset's original columns (MLflow body shapes)")
def predict(model_id: str, body: PredictRequest, services: ServicesDep,
            explain: Annotated[bool, Query(description="add the indices of the rules that fired")] = False):
    return services.models.predict(model_id, body, explain)
