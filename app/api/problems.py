"""RFC 9457 problem details (application/problem+json) for every error the API answers, and their OpenAPI
description (the :class:`Problem` schema under that media type).

Domain errors from the core are translated here: a status per error class, and each fault's domain field
placed where this request carried it (``path.job_id``, ``query.dataset_id``, ``header.Idempotency-Key``,
``body.validation.dataset_id``). A Redis that cannot be reached is a 503 with ``Retry-After``.

A request that does not validate is one 422 with one fault per field at fault, in plain words: pydantic's errors
at one field (one per form of a union that it tried) become one that says what the field accepts, read from the
body's JSON schema (``accepted_forms``).
"""

import functools
import json
import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any, Union, get_args, get_origin

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from pydantic.fields import FieldInfo
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


# pydantic's error types that say the value is not one of the field's forms: the fault says which forms it accepts
_NOT_A_FORM = re.compile(
    r".*_(type|parsing)$|literal_error|enum|union_tag_.*|(greater|less)_than(_equal)?|too_(long|short)|"
    r"string_pattern_mismatch|multiple_of|finite_number|.*_constrained_.*"
)
_PLAIN_FIXES = {
    "missing": ("is required", "add this field"),
    "extra_forbidden": ("is not a field of this request", "remove this field"),
    "json_invalid": ("is not valid JSON", "send a valid JSON body"),
}
_SETTING_FIX = "use a value it allows"
_FORMS_FIX = "use one of those forms"


def validation_faults(errors: Sequence[Mapping[str, Any]], body: type[BaseModel] | None = None) -> list[FieldFault]:
    """One fault per field at fault (in the order of its first error), in plain words; ``body``: the model of the
    request's body, whose schema says what a field accepts."""
    fields: dict[str, list[Mapping[str, Any]]] = {}
    owners: dict[str, tuple[type[BaseModel], str] | None] = {}
    for error in errors:
        location = [str(part) for part in error.get("loc", ())]
        if error.get("type") == "json_invalid":
            location = location[:1]  # its second part is a character offset, not a field
        owner = None
        if body is not None and location[:1] == ["body"]:
            owner, depth = _field_owner(body, location[1:])
            location = location[: 1 + depth]
        place = ".".join(location) or "body"
        fields.setdefault(place, []).append(error)
        owners.setdefault(place, owner)
    return [_field_fault(place, group, owners[place]) for place, group in fields.items()]


def _field_owner(model: type[BaseModel], parts: Sequence[str]) -> tuple[tuple[type[BaseModel], str] | None, int]:
    """(the model and name of the field that ``parts`` of an error's location name, how many parts name it): the
    parts past a field that is not a model (a union's form, a list's index) are about its value."""
    owner = None
    for depth, part in enumerate(parts):
        if model is None:
            return owner, depth
        if part not in model.model_fields:  # a field the model does not have (an extra one)
            return None, depth + 1
        owner = (model, part)
        model = _model_of(model.model_fields[part])
    return owner, len(parts)


def _model_of(field: FieldInfo) -> Any:
    """The model a field holds (its annotation, or the one model of its union), else None."""
    annotation = field.annotation
    options = get_args(annotation) if get_origin(annotation) in (Union, type(int | None)) else (annotation,)
    models = [option for option in options if isinstance(option, type) and issubclass(option, BaseModel)]
    return models[0] if len(models) == 1 else None


def _field_fault(
    place: str, errors: Sequence[Mapping[str, Any]], owner: tuple[type[BaseModel], str] | None
) -> FieldFault:
    first = errors[0]
    kind = first.get("type", "")
    if kind in _PLAIN_FIXES:
        message, fix = _PLAIN_FIXES[kind]
        if kind == "json_invalid" and first.get("ctx", {}).get("error"):
            message = f"{message}: {first['ctx']['error']}"
        return FieldFault(place, message, fix)
    if kind == "invalid_setting":  # a check of the library's spec or of the body: its own words
        return FieldFault(place, str(first.get("msg")), _SETTING_FIX)
    if kind == "value_error":
        return FieldFault(place, str(first.get("ctx", {}).get("error", first.get("msg"))), _SETTING_FIX)
    forms = accepted_forms(*owner) if owner else None
    if forms and all(_NOT_A_FORM.fullmatch(str(error.get("type", ""))) for error in errors):
        return FieldFault(place, f"must be {forms}{_given(first.get('input'))}", _FORMS_FIX)
    message = str(first.get("msg", "is not valid")).replace("Input should be", "must be")
    return FieldFault(place, _plain_types(message), _FORMS_FIX)


def _given(value: Any) -> str:
    """What was sent, where it says more than the forms do: ``, not the text "abc"``."""
    if isinstance(value, str):
        return f", not the text {json.dumps(value[:40])}"
    if isinstance(value, bool):
        return f", not {json.dumps(value)}"
    if isinstance(value, int | float):
        return f", not {value:g}"
    return ""


def _plain_types(message: str) -> str:
    return (
        message.replace("a valid dictionary", "settings in braces ({…})")
        .replace("a valid list", "values in square brackets ([…])")
        .replace("a valid integer", "a whole number")
        .replace("a valid number", "a number")
        .replace("a valid boolean", "true or false")
        .replace("a valid string", "text")
    )


@functools.cache
def _properties(model: type[BaseModel]) -> dict:
    return model.model_json_schema()["properties"]


def accepted_forms(model: type[BaseModel], name: str) -> str:
    """The forms that field ``name`` of ``model`` accepts, in words, from its JSON schema: "a fraction in (0, 1], a
    whole number >= 1, 'sqrt', 'log2' or empty"."""
    forms: list[str] = []
    for form in _forms(_properties(model).get(name, {})):
        if form not in forms:
            forms.append(form)
    return forms[0] if len(forms) == 1 else ", ".join(forms[:-1]) + " or " + forms[-1]


def _forms(schema: Mapping[str, Any]) -> list[str]:
    options = schema.get("anyOf") or schema.get("oneOf") or [schema]
    forms: list[str] = []
    for option in options:
        kind = option.get("type")
        if "enum" in option or "const" in option:
            forms += [_literal(value) for value in option.get("enum", [option.get("const")])]
        elif kind in ("number", "integer"):
            forms.append(_number_form(option))
        elif kind == "boolean":
            forms += ["true", "false"]
        elif kind == "null":
            forms.append("empty")
        elif kind == "string":
            pattern = f" matching {option['pattern']}" if "pattern" in option else ""
            forms.append(
                "text" + (f" of at most {option['maxLength']} characters" if "maxLength" in option else pattern)
            )
        elif kind == "array":
            items = _forms(option.get("items", {}))
            plural = {"a number": "numbers", "a whole number": "whole numbers", "text": "texts"}.get(
                items[0] if len(items) == 1 else "", "values"
            )
            least = option.get("minItems")
            forms.append(f"{plural} in square brackets ([…]{f', at least {least}' if least else ''})")
        else:  # an object: a model ($ref) or a mapping
            forms.append("settings in braces ({…})")
    return forms


def _literal(value: Any) -> str:
    return f"'{value}'" if isinstance(value, str) else json.dumps(value)


def _number_form(option: Mapping[str, Any]) -> str:
    low, high = (
        option.get("exclusiveMinimum", option.get("minimum")),
        option.get("exclusiveMaximum", option.get("maximum")),
    )
    name = "a whole number" if option["type"] == "integer" else "a number"
    if low is not None and high is not None:
        if option["type"] == "number" and low >= 0 and high <= 1:
            name = "a fraction"
        opening = "(" if "exclusiveMinimum" in option else "["
        closing = ")" if "exclusiveMaximum" in option else "]"
        return f"{name} in {opening}{low:g}, {high:g}{closing}"
    if low is not None:
        return f"{name} {'>' if 'exclusiveMinimum' in option else '>='} {low:g}"
    if high is not None:
        return f"{name} {'<' if 'exclusiveMaximum' in option else '<='} {high:g}"
    return name


def install_problem_handlers(app: FastAPI) -> None:
    @app.exception_handler(DomainError)
    async def handle_domain(request: Request, exc: DomainError):
        return domain_problem(request, exc)

    @app.exception_handler(ProblemError)
    async def handle_problem(request: Request, exc: ProblemError):
        return problem_response(request, exc.status, exc.detail, exc.faults, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def handle_validation(request: Request, exc: RequestValidationError):
        faults = validation_faults(exc.errors(), _body_model(request))
        fields = f"{len(faults)} field{'s' if len(faults) != 1 else ''}"
        detail = f"{fields} of the request {'need' if len(faults) != 1 else 'needs'} a change."
        return problem_response(request, 422, detail, faults)

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


def _body_model(request: Request) -> type[BaseModel] | None:
    """The model of the body of the route that answers ``request`` (None for a route without one)."""
    field = getattr(request.scope.get("route"), "body_field", None)
    annotation = getattr(getattr(field, "field_info", None), "annotation", None)
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def problem_responses(*statuses: int) -> dict:
    """OpenAPI responses for these error statuses: each a :class:`Problem` as application/problem+json."""
    return {
        status: {
            "description": TITLES[status],
            "content": {PROBLEM_MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}},
        }
        for status in statuses
    }
