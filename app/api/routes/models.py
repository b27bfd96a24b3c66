from typing import Annotated, Literal

from fastapi import APIRouter, Header, Query, Request, Response

from app.api.deps import CoreDep, CpuDep, TenantDep
from app.api.problems import problem_responses
from app.api.schemas import PromoteRequest
from app.api.scoring import scoring_route
from app.api.scoring_schemas import PredictResponse
from app.core.drift import DriftThresholds
from app.core.drift_store import LATEST_TIME
from app.core.model_documents import ModelInfo, ModelSummary
from app.core.monitoring import DriftReport

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
    return core.monitoring.model(model_id, tenant=tenant)


@router.get(
    "/{model_id}/drift",
    response_model=DriftReport,
    summary="Live firing of each rule against its training rate, and each column's PSI, over a time range",
    description=(
        "Rows scored by the model (``/predict``, ``/invocations``, the Open Inference Protocol: source ``live``; "
        "batch jobs: ``batch``) are counted per window: each rule's firing rows and each column's rows per "
        "training decile (or level, and missing). Per rule: its live firing rate against its rate on the training "
        "table, their ratio and the two-proportion test's p-value. Per column: its population stability index, "
        "missing share and unseen-level share. ``drifted_rules``/``drifted_columns``: what the model's thresholds "
        "(``/monitoring``) flag; ``series``: the same per point in time. Counts reach Redis within "
        "FIRE_DRIFT_FLUSH_SECONDS of scoring."
    ),
    responses=problem_responses(404, 422),
)
def model_drift(
    model_id: str,
    core: CoreDep,
    tenant: TenantDep,
    since: Annotated[
        float | None,
        Query(
            ge=0,
            le=LATEST_TIME,
            allow_inf_nan=False,
            description="Unix seconds; default: until - FIRE_DRIFT_SUMMARY_SECONDS (a day)",
        ),
    ] = None,
    until: Annotated[
        float | None, Query(ge=0, le=LATEST_TIME, allow_inf_nan=False, description="Unix seconds; default: now")
    ] = None,
    source: Annotated[Literal["live", "batch"] | None, Query(description="live or batch rows (default: both)")] = None,
):
    return core.monitoring.report(model_id, tenant=tenant, since=since, until=until, source=source)


@router.get(
    "/{model_id}/monitoring",
    response_model=DriftThresholds,
    summary="The model's drift thresholds, and whether its scored rows are counted",
    responses=problem_responses(404),
)
def get_monitoring(model_id: str, core: CoreDep, tenant: TenantDep):
    return core.monitoring.thresholds(model_id, tenant=tenant)


@router.put(
    "/{model_id}/monitoring",
    response_model=DriftThresholds,
    summary="Set the model's drift thresholds (they flag rules and columns in its document, /drift and /metrics)",
    responses=problem_responses(404, 422),
)
def set_monitoring(model_id: str, body: DriftThresholds, core: CoreDep, tenant: TenantDep):
    return core.monitoring.set_thresholds(model_id, body, tenant=tenant)


@router.get(
    "/{model_id}/export",
    response_class=Response,
    summary="The rules as SQL, a Python function or an MLflow model",
    description=(
        "``format=sql``: one SQL expression (a sum of ``CASE`` terms) over the training table's "
        "original columns, to put in a ``SELECT``; ``format=python``: a dependency-free Python "
        "module defining ``predict(row)``, ``row`` a mapping from column name to value (None: "
        "missing). Both give the model's predictions exactly; a binary classifier's give the log-odds "
        "of classes[1] (probability = 1/(1+exp(-score))); a K-class classifier's the probability of "
        "each class (SQL: one column per class, named by its label; Python: a dict {class: "
        "probability}); a count model's the rate exp(log rate); as their first comment lines and the "
        "X-Fire-Output header say. ``format=mlflow``: a zip of an MLflow model directory (``python_function`` "
        "flavor around the Python module, a signature of the training columns, an input example): "
        "``mlflow.pyfunc.load_model(...).predict(frame)`` gives the served predictions (a classifier's "
        "labels; ``params={'predict_method': 'predict_proba'}``: one probability column per class)."
    ),
    responses={
        200: {
            "description": "the code",
            "headers": {
                "Content-Disposition": {"schema": {"type": "string"}},
                "X-Fire-Output": {
                    "description": "what the code computes: prediction of 'target', log-odds of "
                    "'classes[1]' for a binary classifier, probabilities of the classes of 'target', "
                    "or rate of 'target' for counts; format=mlflow: class of 'target' for a classifier",
                    "schema": {"type": "string"},
                },
            },
            "content": {
                "application/sql": {"schema": {"type": "string"}},
                "text/x-python": {"schema": {"type": "string"}},
                "application/zip": {"schema": {"type": "string", "format": "binary"}},
            },
        },
        **problem_responses(404, 422),
    },
)
def export_model(
    model_id: str,
    core: CoreDep,
    tenant: TenantDep,
    format: Annotated[Literal["sql", "python", "mlflow"], Query(description="sql, python or mlflow")],
) -> Response:
    exported = core.models.export(model_id, format, tenant=tenant)
    return Response(
        exported.content,
        media_type=exported.media_type,
        headers={
            "Content-Disposition": f'attachment; filename="{exported.filename}"',
            "X-Fire-Output": exported.output.encode("ascii", "backslashreplace").decode("ascii"),
        },
    )


@router.delete(
    "/{model_id}",
    status_code=204,
    response_class=Response,
    summary="Delete a model (a version an alias points at: 409, move or remove the alias first)",
    responses=problem_responses(404, 409),
)
def delete_model(model_id: str, core: CoreDep, tenant: TenantDep) -> Response:
    core.deletion.model(model_id, tenant=tenant)
    return Response(status_code=204)


SCORING_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/PredictRequest"}},
            "text/csv": {"schema": {"type": "string", "description": "a header line of column names, a row per line"}},
        },
    }
}
EXPLAIN_DESCRIPTION = (
    "add the ids of the rules that fired and what each adds (log-odds for a binary classifier, one amount per class "
    "for K classes, log rate for counts), and what each linear term adds"
)
PREDICT_RESPONSES = {
    200: {"model": PredictResponse, "content": {"application/json": {}}},
    **problem_responses(404, 413, 415, 422),
}


@router.post(
    "/{model_id}/predict",
    response_class=Response,
    openapi_extra=SCORING_BODY,
    responses=PREDICT_RESPONSES,
    summary="Score rows given in the dataset's original columns (MLflow body shapes, or CSV)",
)
async def predict(
    model_id: str,
    request: Request,
    core: CoreDep,
    cpu: CpuDep,
    tenant: TenantDep,
    explain: Annotated[bool, Query(description=EXPLAIN_DESCRIPTION)] = False,
):
    return await scoring_route(core, cpu, request, model_id, "fire", tenant, explain)
