"""RFC 9457 problem details (application/problem+json) for every error the API answers.

Domain errors from the core are translated here: a status per error class, and each fault's domain field
placed where this request carried it (``path.job_id``, ``query.dataset_id``, ``header.Idempotency-Key``,
``body.validation.dataset_id``).
"""
import logging
import re
from http import HTTPStatus

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.core.errors import (Conflict, DomainError, Expired, FieldFault, Invalid, NotFound, TooLarge,
                             Unsupported)

PROBLEM_MEDIA_TYPE = "application/problem+json"
PROBLEM_TYPE_BASE = "https://fire-rules.dev/problems/"
log = logging.getLogger(__name__)

DOMAIN_STATUS = {Invalid: 422, NotFound: 404, Conflict: 409, Expired: 410, TooLarge: 413, Unsupported: 415}


class ProblemError(Exception):
    """An error of the HTTP edge itself (authentication, readiness, a malformed multipart body)."""

    def __init__(self, status: int, detail: str, faults: list[FieldFault], headers: dict[str, str] | None = None):
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.faults = faults
        self.headers = headers


def _kebab(class_name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "-", class_name).lower()


def problem_response(request: Request, status: int, detail: str, faults: list[FieldFault] = (),
                     problem_type: str | None = None, headers: dict[str, str] | None = None) -> JSONResponse:
    title = HTTPStatus(status).phrase
    body = {
        "type": PROBLEM_TYPE_BASE + (problem_type or title.lower().replace(" ", "-")),
        "title": title,
        "status": status,
        "detail": detail,
        "instance": request.url.path,
    }
    if faults:
        body["errors"] = [{"field": fault.field, "message": fault.message, "fix": fault.fix} for fault in faults]
    return JSONResponse(body, status_code=status, media_type=PROBLEM_MEDIA_TYPE, headers=headers)


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
    faults = [FieldFault(http_location(f.field, request), f.message, f.fix) for f in error.faults]
    retry_after = getattr(error, "retry_after", None)
    return problem_response(request, status, error.detail, faults, _kebab(type(error).__name__),
                            {"Retry-After": f"{retry_after:g}"} if retry_after else None)


_VALIDATION_FIXES = {
    "missing": "add this field",
    "extra_forbidden": "remove this field",
    "json_invalid": "send a valid JSON body",
    "model_attributes_type": "send a JSON object",
    "dict_type": "send a JSON object",
}


def _validation_faults(exc: RequestValidationError) -> list[FieldFault]:
    faults = []
    for error in exc.errors():
        location = [str(part) for part in error.get("loc", ())]
        fix = _VALIDATION_FIXES.get(error.get("type", ""), "send a value of the documented type and range")
        faults.append(FieldFault(".".join(location) or "body", error.get("msg", "invalid"), fix))
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
        return problem_response(request, 422, "The request does not validate.", _validation_faults(exc))

    @app.exception_handler(StarletteHTTPException)
    async def handle_http(request: Request, exc: StarletteHTTPException):
        status = exc.status_code
        detail = exc.detail if isinstance(exc.detail, str) else HTTPStatus(status).phrase
        faults = []
        if status == 404:
            faults = [FieldFault("path", f"no route {request.url.path}", "see the API at /docs")]
        elif status == 405:
            faults = [FieldFault("method", f"{request.method} is not allowed here",
                                 f"use one of: {exc.headers.get('Allow', '') if exc.headers else ''}")]
        return problem_response(request, status, detail, faults, headers=exc.headers)

    @app.exception_handler(Exception)
    async def handle_unexpected(request: Request, exc: Exception):
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return problem_response(request, 500, "An unexpected error occurred; it was logged.")
