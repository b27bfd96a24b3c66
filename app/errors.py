"""RFC 9457 problem details (application/problem+json) for every error the API answers."""
import logging
from http import HTTPStatus

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

PROBLEM_MEDIA_TYPE = "application/problem+json"
PROBLEM_TYPE_BASE = "https://fire-rules.dev/problems/"
log = logging.getLogger(__name__)


class ProblemError(Exception):
    """An error the client can act on. `errors` lists {field, message, fix} entries."""

    def __init__(self, status: int, detail: str, errors: list[dict] | None = None, *, title: str | None = None,
                 headers: dict[str, str] | None = None):
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.errors = errors or []
        self.title = title or HTTPStatus(status).phrase
        self.headers = headers


def field_error(field: str, message: str, fix: str) -> dict:
    return {"field": field, "message": message, "fix": fix}


def not_found(kind: str, identifier: str) -> ProblemError:
    return ProblemError(404, f"No {kind} with id '{identifier}'.",
                        [field_error("path.id", f"unknown {kind} id", f"list the {kind}s with GET /v1/{kind}s")])


def problem_response(request: Request, status: int, title: str, detail: str, errors: list[dict] | None = None,
                     headers: dict[str, str] | None = None) -> JSONResponse:
    body = {
        "type": PROBLEM_TYPE_BASE + title.lower().replace(" ", "-"),
        "title": title,
        "status": status,
        "detail": detail,
        "instance": request.url.path,
    }
    if errors:
        body["errors"] = errors
    return JSONResponse(body, status_code=status, media_type=PROBLEM_MEDIA_TYPE, headers=headers)


_VALIDATION_FIXES = {
    "missing": "add this field",
    "extra_forbidden": "remove this field",
    "json_invalid": "send a valid JSON body",
    "model_attributes_type": "send a JSON object",
    "dict_type": "send a JSON object",
}


def _validation_errors(exc: RequestValidationError) -> list[dict]:
    errors = []
    for error in exc.errors():
        location = [str(part) for part in error.get("loc", ())]
        field = ".".join(location[1:] if location and location[0] == "body" else location) or "body"
        fix = _VALIDATION_FIXES.get(error.get("type", ""), "send a value of the documented type and range")
        errors.append(field_error(field, error.get("msg", "invalid"), fix))
    return errors


def install_problem_handlers(app: FastAPI) -> None:
    @app.exception_handler(ProblemError)
    async def handle_problem(request: Request, exc: ProblemError):
        return problem_response(request, exc.status, exc.title, exc.detail, exc.errors, exc.headers)

    @app.exception_handler(RequestValidationError)
    async def handle_validation(request: Request, exc: RequestValidationError):
        return problem_response(request, 422, "Unprocessable Content", "The request does not validate.",
                                _validation_errors(exc))

    @app.exception_handler(StarletteHTTPException)
    async def handle_http(request: Request, exc: StarletteHTTPException):
        status = exc.status_code
        detail = exc.detail if isinstance(exc.detail, str) else HTTPStatus(status).phrase
        errors = []
        if status == 404:
            errors = [field_error("path", f"no route {request.url.path}", "see the API at /docs")]
        elif status == 405:
            errors = [field_error("method", f"{request.method} is not allowed here",
                                  f"use one of: {exc.headers.get('Allow', '') if exc.headers else ''}")]
        return problem_response(request, status, HTTPStatus(status).phrase, detail, errors, exc.headers)

    @app.exception_handler(Exception)
    async def handle_unexpected(request: Request, exc: Exception):
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return problem_response(request, 500, "Internal Server Error",
                                "An unexpected error occurred; it was logged.")
