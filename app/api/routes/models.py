import json
from typing import Annotated

from fastapi import APIRouter, Query, Response

from app.api.deps import CoreDep
from app.api.schemas import PredictRequest, PredictResponse, PromoteRequest
from app.core.models import ModelInfo, ModelSummary

router = APIRouter(prefix="/v1/models", tags=["models"])


@router.post("", status_code=201, response_model=ModelInfo, summary="Promote a job step to a versioned model")
def promote(body: PromoteRequest, response: Response, core: CoreDep):
    model = core.models.promote(body.job_id, body.step, body.name, body.description)
    response.headers["Location"] = f"/v1/models/{model.id}"
    return model


@router.get("", response_model=list[ModelSummary], summary="Models, newest first")
def list_models(core: CoreDep):
    return core.models.list()


@router.get("/{model_id}", response_model=ModelInfo, summary="Rules, intercept, metrics and provenance")
def get_model(model_id: str, core: CoreDep):
    return core.models.get(model_id)


@router.post("/{model_id}/predict", response_class=Response, responses={200: {
                 "model": PredictResponse, "content": {"application/json": {}}}},
             summary="Score rows given in the dataset's original columns (MLflow body shapes)")
async def predict(model_id: str, body: PredictRequest, core: CoreDep,
                  explain: Annotated[bool, Query(description="add the indices of the rules that fired")] = False):
    # async and serialized here: scoring is short CPU work, and a thread hop plus response-model
    # validation of 10,000 floats would cost more than the scoring itself
    scores = core.models.score(model_id, body.table, explain)
    answer = {"predictions": scores.predictions.tolist()}
    if scores.explanations is not None:
        answer["explanations"] = scores.explanations
    return Response(json.dumps(answer), media_type="application/json")
