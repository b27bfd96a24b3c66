import json
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


@router.post("/{model_id}/predict", responses={200: {"model": PredictResponse}},
             summary="Score rows given in the dataset's original columns (MLflow body shapes)")
async def predict(model_id: str, body: PredictRequest, services: ServicesDep,
                  explain: Annotated[bool, Query(description="add the indices of the rules that fired")] = False):
    # async and serialized here: scoring is short CPU work, and a thread hop plus response-model
    # validation of 10,000 floats would cost more than the scoring itself
    return Response(json.dumps(services.models.predict(model_id, body, explain)), media_type="application/json")
