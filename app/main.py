"""The FastAPI application: routers, problem+json errors, body limits, metrics, dashboard, API docs, and a
maintenance thread (lost-worker watchdog; while Redis is down, a probe for its return)."""

import functools
import gc
import logging
import sys
import threading
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import fastapi_offline
from fastapi import Depends, FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.openapi.utils import get_openapi
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from pydantic.json_schema import models_json_schema

from app.api.cpu_lanes import CpuLanes
from app.api.deps import require_redis, require_tenant
from app.api.limits import BodyLimitMiddleware
from app.api.metrics import install_metrics
from app.api.problems import Problem, install_problem_handlers, problem_responses
from app.api.routes import batch, datasets, forests, health, inference, jobs, losses, models, registered_models
from app.api.scoring_schemas import PredictRequest
from app.core.config import Settings, get_settings
from app.core.connections import REDIS_FAILURES
from app.core.container import Core, build_core

log = logging.getLogger(__name__)
DASHBOARD = Path(__file__).parent / "static"
# Swagger UI's and ReDoc's scripts as the fastapi-offline package ships them (its licence MIT; Swagger UI's Apache-2.0,
# ReDoc's MIT): the API docs load nothing from outside, as a service on a network without internet access needs
DOCS_ASSETS = Path(fastapi_offline.__file__).parent / "static"
# ReDoc's menu draws its maker's logo from their CDN, and it has no option to leave it out: its script is served with
# the logo's address made an empty one (the image then fails, and ReDoc hides it)
REDOC_LOGO = b"https://cdn.redoc.ly/redoc/logo-mini.svg"
PROBE_SECONDS = 0.5
GIL_SWITCH_SECONDS = 0.001
GC_GEN0_THRESHOLD = 20_000
UPLOAD_ROUTES = {("POST", "/v1/datasets"), ("POST", "/v1/forests")}  # they count their bodies themselves
SCORING_PATHS = ("/predict", "/invocations", "/infer")  # bodies up to FIRE_MAX_SCORING_BYTES
SCHEMAS_OUTSIDE_ROUTES = (Problem, PredictRequest)  # referenced by hand in responses and request bodies


def _maintain(core: Core, stop: threading.Event) -> None:
    """While Redis is down: probe it every PROBE_SECONDS. Otherwise: the lost-worker watchdog."""
    since_watch = 0.0
    while not stop.wait(PROBE_SECONDS):
        if core.redis_health.down:
            if core.redis_health.probe():
                log.warning("Redis answers again")
            continue
        since_watch += PROBE_SECONDS
        if since_watch < core.settings.watchdog_seconds:
            continue
        since_watch = 0.0
        try:
            recovered = core.jobs.watch_running()
            if recovered:
                log.warning("watchdog recovered %d jobs whose worker was lost", recovered)
        except REDIS_FAILURES as error:
            core.redis_health.mark_down()
            log.warning("Redis unreachable (%s): requests get 503 until it answers", error)
        except Exception:
            log.exception("watchdog pass failed")


def body_limit(settings: Settings):
    def limit_for(method: str, path: str) -> int | None:
        if (method, path.rstrip("/")) in UPLOAD_ROUTES or batch.is_batch_upload(method, path):
            return None
        return settings.max_scoring_bytes if path.endswith(SCORING_PATHS) else settings.max_json_bytes

    return limit_for


class FireAPI(FastAPI):
    """The application, whose OpenAPI document also holds the schemas referenced by hand and documents
    request-validation errors as the Problems they are answered with."""

    def openapi(self) -> dict[str, Any]:
        if self.openapi_schema is None:
            document = get_openapi(
                title=self.title, version=self.version, description=self.description, routes=self.routes
            )
            _, extra = models_json_schema(
                [(model, "validation") for model in SCHEMAS_OUTSIDE_ROUTES], ref_template="#/components/schemas/{model}"
            )
            schemas = document.setdefault("components", {}).setdefault("schemas", {})
            schemas.update(extra["$defs"])
            # FastAPI documents request-validation errors as its HTTPValidationError; they are answered as Problems
            for operations in document["paths"].values():
                for operation in operations.values():
                    if "422" in operation.get("responses", {}):
                        operation["responses"]["422"] = problem_responses(422)[422]
            for name in ("HTTPValidationError", "ValidationError"):
                schemas.pop(name, None)
            self.openapi_schema = document
        return self.openapi_schema


def create_app(settings: Settings | None = None, core: Core | None = None) -> FastAPI:
    """The API on ``core`` (built from ``settings``, by default from the environment, where not given)."""
    core = core or build_core(settings or get_settings())

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        # the imports (numpy, pandas, scikit-learn, numba) leave ~200,000 objects that live as long as the process:
        # moved out of the collector's reach, a full collection no longer stalls every request for ~0.3 s
        gc.collect()
        gc.freeze()
        # under 50 clients the objects of the requests in flight outlive gen0's 700 allocations: promoted, they set
        # off a full collection every second or so (25-80 ms stalls, the p99) and cost 43 us a request in all; most
        # objects die by reference count, so at 20,000 gen0 runs a few times a minute
        gc.set_threshold(GC_GEN0_THRESHOLD, 10, 10)
        # a route waiting on Redis in a thread takes the GIL back after each call: under load the event loop holds
        # it, and each hand-over waits up to the switch interval (5 ms by default, several per request)
        sys.setswitchinterval(GIL_SWITCH_SECONDS)
        stop = threading.Event()
        maintenance = threading.Thread(target=_maintain, args=(core, stop), daemon=True, name="fire-maintenance")
        maintenance.start()
        core.monitor.start()
        yield
        core.monitor.close()  # the drift counts of this process reach Redis: none is lost across a restart
        stop.set()
        maintenance.join(timeout=5)

    app = FireAPI(
        docs_url=None,  # served below, from DOCS_ASSETS
        redoc_url=None,
        title="FIRE rule extraction",
        version="0.1.0",
        description="Upload a table, train or upload a tree ensemble, extract a sparse fused rule ensemble "
        "along a regularization path, promote a step to a model and score with it. Every error is "
        "application/problem+json (RFC 9457).",
        lifespan=lifespan,
    )
    app.state.core = core
    app.state.cpu = CpuLanes(core.settings.cpu_threads, tenants=core.tenant_keys.required)
    app.state.metrics = install_metrics(app, core)
    app.add_middleware(BodyLimitMiddleware, limit_for=body_limit(core.settings))
    install_problem_handlers(app)
    protected = [Depends(require_tenant), Depends(require_redis)]
    app.include_router(health.router)  # first: routes are matched in order, one regex each (60 before it otherwise)
    for router in (
        inference.router,  # the scoring routes next: single-row scoring is the hot path
        registered_models.router,
        batch.router,  # before models.router: /v1/models/batch/{job_id}/... before /v1/models/{model_id}/...
        models.router,
        datasets.router,
        forests.router,
        jobs.router,
        losses.router,
    ):
        app.include_router(router, dependencies=protected, responses=problem_responses(401, 503))
    app.mount("/dashboard/assets", StaticFiles(directory=DASHBOARD), name="dashboard-assets")

    @app.get("/dashboard/{view:path}", include_in_schema=False)
    def dashboard(view: str) -> FileResponse:
        return FileResponse(DASHBOARD / "index.html")  # one page for every view's URL: it routes itself

    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        return RedirectResponse("/dashboard/")

    install_docs(app)
    return app


@functools.cache
def redoc_script() -> bytes:
    # a newer ReDoc that draws its logo from elsewhere is caught by tests/service/test_docs_offline.py, not here
    return (DOCS_ASSETS / "redoc.standalone.js").read_bytes().replace(REDOC_LOGO, b"data:,")


def install_docs(app: FastAPI) -> None:
    """Swagger UI at /docs and ReDoc at /redoc, their scripts served from this package's dependencies."""

    @app.get("/docs-assets/redoc.js", include_in_schema=False)
    def redoc_js() -> Response:
        return Response(redoc_script(), media_type="text/javascript")

    app.mount("/docs-assets", StaticFiles(directory=DOCS_ASSETS), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{root}/docs-assets/swagger-ui-bundle.js",
            swagger_css_url=f"{root}/docs-assets/swagger-ui.css",
            swagger_favicon_url=f"{root}/docs-assets/favicon.png",
        )

    @app.get("/redoc", include_in_schema=False)
    def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_redoc_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{root}/docs-assets/redoc.js",
            redoc_favicon_url=f"{root}/docs-assets/favicon.png",
            with_google_fonts=False,
        )
