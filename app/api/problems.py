"""RFC 9457 problem details (application/problem+json) for every error the API answers, and their OpenAPI
description (the :class:`Problem` schema under that media type).

Domain errors from the core are translated here: a status per error class, and each fault's domain field
placed where this request carried it (``path.job_id``, ``query.dataset_id``, ``header.Idempotency-Key``,
``body.validation.dataset_id``). A Redis that cannot be reached is a 503 with ``Retry-After``.
"""

import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.core.connections import REDIS_FAILURES, unavailable
from app.core.errors import (
    Conflict,
    DomainError,
    Expired,
    FieldFault,
    Invalid,
    NotFound,
    TooLarge,
    TooMany,
    Unavailable,
    Unsupported,
)

PROBLEM_MEDIA_TYPE = "application/problem+json"
PROBLEM_TYPE_BASE = "https://fire-rules.dev/problems/"
log = logging.getLogger(__name__)

# RFC 9110's reason phrases (Python's http.HTTPStatus still says "Request Entity Too Large" and
# "Unprocessable Entity")
TITLES = {
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    410: "Gone",
    413: "Content Too Large",
    415: "Unsupported Media Type",
    422: "Unprocessable Content",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
}
DOMAIN_STATUS = {
    Invalid: 422,
    NotFound: 404,
    Conflict: 409,
    Expired: 410,
    TooLarge: 413,
    Unsupported: 415,
    TooMany: 429,
    Unavailable: 503,
}


INFERENCE_PROTOCOL_PREFIX = "/v2"  # app/api/routes/inference.py


class ProblemFault(BaseModel):
    field: str = Field(
        description="where the request carried the thing at fault: path.X, query.X, header.X, "
        "body.X (body.file for an upload as a whole)"
    )
    message: str
    fix: str


class Problem(BaseModel):
    """An error, as every error of this API is answered (RFC 9457, application/problem+json)."""

    type: str = Field(examples=[PROBLEM_TYPE_BASE + "not-found"])
    title: str = Field(examples=["Not Found"])
    status: int = Field(examples=[404])
    detail: str = Field(examples=["No dataset with id 'ds_0123'."])
    instance: str = Field(examples=["/v1/datasets/ds_0123"])
    errors: list[ProblemFault] = Field(default=[], description="one entry per thing at fault")
    error: str | None = Field(
        None,
        description="under /v2 only: the Open Inference Protocol's error message (the detail, then each fault as "
        "'field: message (fix)'), which its clients (tritonclient) raise",
    )


class ProblemError(Exception):
    """An error of the HTTP edge itself (authentication, a malformed multipart body)."""

    def __init__(self, status: int, detail: str, faults: list[FieldFault], headers: dict[str, str] | None = None):
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.faults = faults
        self.headers = headers


def _kebab(class_name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "-", class_name).lower()


def problem_response(
    request: Request,
    status: int,
    detail: str,
    faults: Sequence[FieldFault] = (),
    problem_type: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    title = TITLES[status]
    body = Problem(
        type=PROBLEM_TYPE_BASE + (problem_type or title.lower().replace(" ", "-")),
        title=title,
        status=status,
        detail=detail,
        instance=request.url.path,
        errors=[ProblemFault(field=f.field, message=f.message, fix=f.fix) for f in faults],
    )
    if request.url.path.startswith(INFERENCE_PROTOCOL_PREFIX):
        body.error = " ".join([detail, "; ".join(f"{f.field}: {f.message} ({f.fix})" for f in body.errors)]).strip()
    return JSONResponse(
        body.model_dump(exclude_defaults=True), status_code=status, media_type=PROBLEM_MEDIA_TYPE, headers=headers
    )


def http_location(field: str, request: Request) -> str:
    """Where this request carried the domain thing ``field``: a path parameter, a header, a query parameter,
    else the body."""
    root, dot, rest = field.partition(".")
    if root in request.path_params:
        return f"path.{field}"
    header = root.replace("_", "-")
    if header in request.headers:
        return "header." + "-".join(part.capitalize() for part in header.split("-")) + dot + rest
    if root in request.query_params:
        return f"query.{field}"
    return f"body.{field}"


def domain_problem(request: Request, error: DomainError) -> JSONResponse:
    status = next(code for kind, code in DOMAIN_STATUS.items() if isinstance(error, kind))
    faults = [
        FieldFault(http_location(f.field, request) if f.field not in ("tenant", "redis") else f.field, f.message, f.fix)
        for f in error.faults
    ]
    retry_after = error.retry_after
    return problem_response(
        request,
        status,
        error.detail,
        faults,
        _kebab(type(error).__name__),
        {"Retry-After": f"{retry_after:g}"} if retry_after else None,
    )


_VALIDATION_FIXES = {
    "missing": "add this field",
    "extra_forbidden": "remove this field",
    "json_invalid": "send a valid JSON body",
    "model_attributes_type": "send a JSON object",
    "dict_type": "send a JSON object",
}


def validation_faults(errors: Sequence[Mapping[str, Any]]) -> list[FieldFault]:
    faults = []
    for error in errors:
        kind = error.get("type", "")
        location = [str(part) for part in error.get("loc", ())]
        if kind == "json_invalid":
            location = location[:1]  # its second part is a character offset, not a field
        message = error.get("msg", "invalid")
        if kind == "json_invalid" and error.get("ctx", {}).get("error"):
            message = f"{message}: {error['ctx']['error']}"
        fix = _VALIDATION_FIXES.get(kind, "send a value of the documented type and range")
        faults.append(FieldFault(".".join(location) or "body", message, fix))
    return faults


def install_problem_handlers(app: FastAPI) -> None:
    @app.exception_handler(DomainError)
    async def handle_domain(request: Request, exc: DomainError):
        return domain_problem(request, exc)

    @app.exception_handler(ProblemError)
    async def handle_problem(request: Request, exc: ProblemError):
        return problem_response(request, exc.status, exc.detail, exc.faults, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def handle_validation(request: Request, exc: RequestValidationError):
        return problem_response(request, 422, "The request does not validate.", validation_faults(exc.errors()))

    async def handle_redis_failure(request: Request, exc: Exception):
        request.app.state.core.redis_health.mark_down()
        return domain_problem(request, unavailable(type(exc).__name__))

    for failure in REDIS_FAILURES:
        app.add_exception_handler(failure, handle_redis_failure)

    @app.exception_handler(StarletteHTTPException)
    async def handle_http(request: Request, exc: StarletteHTTPException):
        status = exc.status_code
        detail = exc.detail if isinstance(exc.detail, str) else TITLES.get(status, "Error")
        faults = []
        if status == 400:  # FastAPI's own answer to a JSON body it cannot decode (not UTF-8, say)
            faults = [FieldFault("body", "undecodable", "send a UTF-8 JSON body")]
        elif status == 404:
            faults = [FieldFault("path", f"no route {request.url.path}", "see the API at /docs")]
        elif status == 405:
            faults = [
                FieldFault(
                    "method",
                    f"{request.method} is not allowed here",
                    f"use one of: {exc.headers.get('Allow', '') if exc.headers else ''}",
                )
            ]
        return problem_response(request, status if status in TITLES else 400, detail, faults, headers=exc.headers)

    @app.exception_handler(Exception)
    async def handle_unexpected(request: Request, exc: Exception):
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return problem_response(request, 500, "An unexpected error occurred; it was logged.")


def problem_responses(*statuses: int) -> dict:
    """OpenAPI responses for these error statuses: each a :class:`Problem` as application/problem+json."""
    return {
        status: {
            "description": TITLES[status],
            "content": {PROBLEM_MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}},
        }
        for status in statuses
    }
