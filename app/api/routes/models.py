import json
from typing import Annotated, Literal

from fastapi import APIRouter, Header, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from app.api.deps import CoreDep, CpuDep, TenantDep
from app.api.problems import problem_responses
from app.api.schemas import PredictRequest, PredictResponse, PromoteRequest
from app.core.container import Core
from app.core.models import ModelInfo, ModelSummary, ScoringModel

router = APIRouter(prefix="/v1/models", tags=["models"])


@router.post(
    "",
    status_code=201,
    response_model=ModelInfo,
    summary="Promote a job step to a versioned model",
    responses=problem_responses(400, 404, 409, 410, 413, 422),
)
def promote(
    body: PromoteRequest,
    response: Response,
    core: CoreDep,
    tenant: TenantDep,
    idempotency_key: Annotated[str | None, Header(description="same key, same model")] = None,
):
    model = core.models.promote(
        body.job_id, body.step, body.name, body.description, tenant=tenant, idempotency_key=idempotency_key
    )
    response.headers["Location"] = f"/v1/models/{model.id}"
    return model


@router.get("", response_model=list[ModelSummary], summary="Models, newest first")
def list_models(core: CoreDep, tenant: TenantDep):
    return core.models.list(tenant=tenant)


@router.get(
    "/{model_id}",
    response_model=ModelInfo,
    summary="Rules, intercept, metrics and provenance",
    responses=problem_responses(404),
)
def get_model(model_id: str, core: CoreDep, tenant: TenantDep):
    return core.models.get(model_id, tenant=tenant)


@router.get(
    "/{model_id}/export",
    response_class=Response,
    summary="The rules as SQL or a Python function",
    description=(
        "``format=sql``: one SQL expression (a sum of ``CASE`` terms) over the training table's "
        "original columns, to put in a ``SELECT``; ``format=python``: a dependency-free Python "
        "module defining ``predict(row)``, ``row`` a mapping from column name to value (None: "
        "missing). Both give the model's predictions exactly; a binary classifier's give the log-odds "
        "of classes[1] (probability = 1/(1+exp(-score))); a K-class classifier's the probability of "
        "each class (SQL: one column per class, named by its label; Python: a dict {class: "
        "probability}); a count model's the rate exp(log rate); as their first comment lines and the "
        "X-Fire-Output header say."
    ),
    responses={
        200: {
            "description": "the code",
            "headers": {
                "Content-Disposition": {"schema": {"type": "string"}},
                "X-Fire-Output": {
                    "description": "what the code computes: prediction of 'target', log-odds of "
                    "'classes[1]' for a binary classifier, probabilities of the classes of 'target', "
                    "or rate of 'target' for counts",
                    "schema": {"type": "string"},
                },
            },
            "content": {
                "application/sql": {"schema": {"type": "string"}},
                "text/x-python": {"schema": {"type": "string"}},
            },
        },
        **problem_responses(404, 422),
    },
)
def export_model(
    model_id: str,
    core: CoreDep,
    tenant: TenantDep,
    format: Annotated[Literal["sql", "python"], Query(description="sql or python")],
) -> Response:
    exported = core.models.export(model_id, format, tenant=tenant)
    return Response(
        exported.text,
        media_type=exported.media_type,
        headers={
            "Content-Disposition": f'attachment; filename="{exported.filename}"',
            "X-Fire-Output": exported.output.encode("ascii", "backslashreplace").decode("ascii"),
        },
    )


@router.delete(
    "/{model_id}", status_code=204, response_class=Response, summary="Delete a model", responses=problem_responses(404)
)
def delete_model(model_id: str, core: CoreDep, tenant: TenantDep) -> Response:
    core.deletion.model(model_id, tenant=tenant)
    return Response(status_code=204)


def scoring_answer(
    core: Core, model_id: str, body: bytes, explain: bool, tenant: str, model: ScoringModel | None = None
) -> Response:
    """Parse (the request schema), score and serialize one scoring request (reading the model where not given)."""
    try:
        request = PredictRequest.model_validate_json(body)
    except ValidationError as error:
        raise RequestValidationError([{**e, "loc": ("body", *e["loc"])} for e in error.errors()]) from error
    scores = core.models.score(model or core.models.scoring_model(model_id, tenant), request.table, explain)
    answer = {"predictions": scores.predictions}
    for name in ("probabilities", "classes", "explanations", "contributions", "linear_contributions"):
        if getattr(scores, name) is not None:
            answer[name] = getattr(scores, name)
    return Response(json.dumps(answer), media_type="application/json")


@router.post(
    "/{model_id}/predict",
    response_class=Response,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/PredictRequest"}}},
        }
    },
    responses={
        200: {"model": PredictResponse, "content": {"application/json": {}}},
        **problem_responses(404, 413, 422),
    },
    summary="Score rows given in the dataset's original columns (MLflow body shapes)",
)
async def predict(
    model_id: str,
    request: Request,
    core: CoreDep,
    cpu: CpuDep,
    tenant: TenantDep,
    explain: Annotated[
        bool,
        Query(
            description=(
                "add the ids of the rules that fired and what each adds (log-odds for a binary classifier, "
                "one amount per class for K classes, log rate for counts), and what each linear term adds"
            )
        ),
    ] = False,
):
    # the body is read raw (its size bounded by FIRE_MAX_SCORING_BYTES): a small one for a model in this
    # process's cache is parsed and scored right here, faster than a thread hop and with no Redis call; anything
    # else in a worker thread, never holding the event loop
    body = await request.body()
    model = core.models.recently_checked(model_id, tenant)
    if model is not None and len(body) <= core.settings.inline_scoring_bytes:
        return scoring_answer(core, model_id, body, explain, tenant, model)
    return await cpu.run(scoring_answer, core, model_id, body, explain, tenant)
