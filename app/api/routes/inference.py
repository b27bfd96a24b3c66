"""The Open Inference Protocol (KServe V2: the HTTP protocol of Triton, Seldon MLServer and KServe) over model names,
so that V2 clients (``tritonclient.http``, KServe's) score with our models as they would on those servers; the wire
encoding (inputs, outputs, binary tensor data) is ``app/api/inference_protocol.py``'s.

- ``/v2/models/{name}`` is the name's latest version; ``/v2/models/{name}/versions/{version}`` a version number
  or (not in the protocol) an alias: ``versions/champion``.
- Errors: the API's problem+json plus the protocol's ``error`` member (the detail and each fault with its fix: what
  tritonclient raises). A request the protocol cannot read (its JSON, an input's name, datatype, shape or data)
  is a 400; values that cannot be scored (an unknown category) are a 422, as on /v1.
"""

from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request, Response

from app.api.deps import CoreDep, CpuDep, TenantDep
from app.api.inference_protocol import (
    COLUMN_TYPES,
    HEADER_LENGTH,
    INFER_BODY,
    INFER_RESPONSES,
    Live,
    ModelMetadata,
    ModelReady,
    Ready,
    ServerMetadata,
    TensorMetadata,
    answer,
    output_metadata,
    parse_request,
    read_inputs,
    requested_outputs,
    survival_times,
)
from app.api.problems import INFERENCE_PROTOCOL_PREFIX, problem_responses
from app.api.routes.health import require_redis_answers
from app.api.routes.registered_models import NamePath, latest
from app.api.scoring import run_scoring
from app.core.container import Core
from app.core.model_scoring import Rows, ScoringModel, check_times, score_rows
from app.core.registry import ModelRef

EXTENSIONS = ["binary_tensor_data"]
PLATFORM = "fire-rules"

router = APIRouter(prefix=INFERENCE_PROTOCOL_PREFIX, tags=["open inference protocol"])


@router.get("/health/live", response_model=Live, summary="The server is live")
def server_live():
    return Live()


@router.get("/health/ready", response_model=Ready, summary="Redis answers", responses=problem_responses(503))
def server_ready(core: CoreDep):
    require_redis_answers(core)
    return Ready()


@router.get("", response_model=ServerMetadata, summary="Server metadata")
def server_metadata(request: Request):
    return ServerMetadata(name=PLATFORM, version=request.app.version, extensions=EXTENSIONS)


async def version_or_alias(
    request: Request,
    name: NamePath,
    version: Annotated[str, Path(description="a version number, or an alias (not in the protocol)")],
) -> ModelRef:
    if version.isascii() and version.isdigit():
        return ModelRef(name, version=int(version))
    request.path_params["alias"] = version  # so a fault of the alias names the path (problems.http_location)
    return ModelRef(name, alias=version)


def _model_routes(prefix: str, reference: Callable[..., Awaitable[ModelRef]], which: str) -> None:
    """Metadata, readiness and inference under ``prefix`` for the model that ``reference`` names."""
    Reference = Annotated[ModelRef, Depends(reference)]

    @router.get(
        prefix,
        response_model=ModelMetadata,
        response_model_exclude_none=True,
        summary=f"Inputs and outputs of {which}",
        responses=problem_responses(404),
    )
    def model_metadata(ref: Reference, core: CoreDep, tenant: TenantDep):
        model = core.models.resolve(ref, tenant=tenant)
        return ModelMetadata(
            name=model.name,
            versions=[str(entry.version) for entry in core.models.registered(model.name, tenant=tenant).versions],
            platform=PLATFORM,
            inputs=[
                TensorMetadata(name=column["name"], datatype=COLUMN_TYPES[column["kind"]], shape=[-1])
                for column in model.columns
            ],
            outputs=output_metadata(model.classes),
        )

    @router.get(
        f"{prefix}/ready",
        response_model=ModelReady,
        summary=f"200 where {which} exists and loads",
        responses=problem_responses(404),
    )
    def model_ready(ref: Reference, core: CoreDep, tenant: TenantDep):
        scoring = core.models.recently_checked(ref, tenant) or core.models.scoring_model(ref, tenant)
        return ModelReady(name=scoring.name)

    @router.post(
        f"{prefix}/infer",
        response_class=Response,
        openapi_extra=INFER_BODY,
        responses=INFER_RESPONSES,
        summary=f"Score rows with {which}",
    )
    async def infer(ref: Reference, request: Request, core: CoreDep, cpu: CpuDep, tenant: TenantDep) -> Response:
        body = await request.body()
        header_length = request.headers.get(HEADER_LENGTH)
        return await run_scoring(
            core, cpu, ref, tenant, len(body), score_inference, core, ref, body, header_length, tenant
        )


def score_inference(
    cached: ScoringModel | None, core: Core, ref: ModelRef, body: bytes, header_length: str | None, tenant: str
) -> Response:
    """Read, score and answer one inference request (``cached``: as ``run_scoring`` gives it)."""
    request, binary = parse_request(body, header_length)
    scoring = cached or core.models.scoring_model(ref, tenant)
    table, n_rows = read_inputs(request, binary, scoring.encoding, scoring.row_columns)
    outputs = requested_outputs(request, scoring)
    times = survival_times(request)
    check_times(scoring, times, "parameters.times")
    scores = score_rows(
        scoring, lambda names: Rows(table, n_rows, "inputs"), False, core.settings.max_scoring_rows, times, core.monitor
    )
    return answer(scores, scoring, request.id, outputs)


_model_routes("/models/{name}", latest, "the name's latest version")
_model_routes("/models/{name}/versions/{version}", version_or_alias, "a version (a number, or an alias)")
