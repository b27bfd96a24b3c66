"""Model names: versions, aliases and their history, and scoring by name (the latest version), by version or by
alias, in our answer (``/predict``) or as MLflow's scoring server (``/invocations``, ``/ping``): a client written
for ``mlflow models serve`` takes ``{base}/v1/registered-models/{name}/aliases/champion`` as its server."""

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from app.api.deps import CoreDep, CpuDep, TenantDep
from app.api.problems import problem_responses
from app.api.routes.models import EXPLAIN_DESCRIPTION, PREDICT_RESPONSES, SCORING_BODY
from app.api.scoring import scoring_route
from app.core.model_documents import ModelInfo
from app.core.registry import ALIAS_PATTERN, ModelRef, RegisteredModel

router = APIRouter(prefix="/v1/registered-models", tags=["registered models"])

NamePath = Annotated[str, Path(description="the model name given at promotion")]
VersionPath = Annotated[int, Path(ge=1, description="a version number of the name")]
AliasPath = Annotated[str, Path(description="an alias of the name (champion, staging, ...)")]


class AliasRequest(BaseModel):
    version: int = Field(ge=1, description="the version the alias points at from now on")

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"examples": [{"version": 3}]})


# the references are async: FastAPI would run a plain function in its thread pool, a thread hop per scoring request
# (by name: 540 requests/s under 50 clients, by id: 900)


class InvocationsResponse(BaseModel):
    """MLflow's scoring server's answer."""

    predictions: list[float | str | bool | int] | list[dict[str, float]] = Field(
        description="per row: the prediction (a number, a count model's rate, a classifier's label), or with params "
        "predict_method=predict_proba a record of each class's probability keyed by its label"
    )


async def latest(name: NamePath) -> ModelRef:
    return ModelRef(name)


async def numbered(name: NamePath, version: VersionPath) -> ModelRef:
    return ModelRef(name, version=version)


async def aliased(name: NamePath, alias: AliasPath) -> ModelRef:
    return ModelRef(name, alias=alias)


@router.get("", response_model=list[RegisteredModel], summary="Model names, the most recently changed first")
def list_names(core: CoreDep, tenant: TenantDep):
    return core.models.registered_names(tenant=tenant)


@router.get(
    "/{name}",
    response_model=RegisteredModel,
    summary="A name's versions, aliases and history",
    responses=problem_responses(404),
)
def get_name(name: NamePath, core: CoreDep, tenant: TenantDep):
    return core.models.registered(name, tenant=tenant)


@router.put(
    "/{name}/aliases/{alias}",
    response_model=RegisteredModel,
    summary="Point an alias at a version (set or move it; the same again changes nothing)",
    description=f"An alias matches ``{ALIAS_PATTERN}`` and is neither 'latest' nor version-like ('3', 'v3').",
    responses=problem_responses(400, 404, 422),
)
def set_alias(name: NamePath, alias: AliasPath, body: AliasRequest, core: CoreDep, tenant: TenantDep):
    return core.models.set_alias(name, alias, body.version, tenant=tenant)


@router.delete(
    "/{name}/aliases/{alias}",
    status_code=204,
    response_class=Response,
    summary="Remove an alias (removing one that is not set changes nothing)",
    responses=problem_responses(404),
)
def remove_alias(name: NamePath, alias: AliasPath, core: CoreDep, tenant: TenantDep) -> Response:
    core.models.remove_alias(name, alias, tenant=tenant)
    return Response(status_code=204)


def _reference_routes(prefix: str, reference, which: str) -> None:
    """Metadata, our scoring route and MLflow's under ``prefix``, for the model that ``reference`` names."""
    Reference = Annotated[ModelRef, Depends(reference)]

    if prefix != "/{name}":  # the name itself answers its registry document (get_name)

        @router.get(prefix, response_model=ModelInfo, summary=f"The model of {which}", responses=problem_responses(404))
        def get_model(ref: Reference, core: CoreDep, tenant: TenantDep):
            return core.models.resolve(ref, tenant=tenant)

    @router.post(
        f"{prefix}/predict",
        response_class=Response,
        openapi_extra=SCORING_BODY,
        responses=PREDICT_RESPONSES,
        summary=f"Score rows with {which} (as /v1/models/{{id}}/predict)",
    )
    async def predict(
        ref: Reference,
        request: Request,
        core: CoreDep,
        cpu: CpuDep,
        tenant: TenantDep,
        explain: Annotated[bool, Query(description=EXPLAIN_DESCRIPTION)] = False,
    ):
        return await scoring_route(core, cpu, request, ref, "fire", tenant, explain)

    @router.post(
        f"{prefix}/invocations",
        response_class=Response,
        openapi_extra=SCORING_BODY,
        responses={
            200: {
                "model": InvocationsResponse,
                "description": "MLflow's answer; the model that answered in the X-Model-Id, X-Model-Name and "
                "X-Model-Version headers",
                "content": {"application/json": {}},
            },
            **problem_responses(404, 413, 415, 422),
        },
        summary=f"Score rows with {which} as MLflow's scoring server does",
    )
    async def invocations(ref: Reference, request: Request, core: CoreDep, cpu: CpuDep, tenant: TenantDep):
        return await scoring_route(core, cpu, request, ref, "mlflow", tenant, False)

    @router.get(
        f"{prefix}/ping",
        response_class=Response,
        summary=f"200 where {which} exists (MLflow's scoring server's health check)",
        responses={
            200: {
                "description": "a line break, as MLflow's",
                "content": {"text/plain": {"schema": {"type": "string"}}},
            },
            **problem_responses(404),
        },
    )
    def ping(ref: Reference, core: CoreDep, tenant: TenantDep) -> Response:
        core.models.scoring_model(ref, tenant)
        return Response("\n", media_type="text/plain")


_reference_routes("/{name}", latest, "the name's latest version")
_reference_routes("/{name}/versions/{version}", numbered, "a numbered version")
_reference_routes("/{name}/aliases/{alias}", aliased, "the version an alias points at")
