"""The FastAPI application: routers, problem+json errors, metrics, dashboard, lost-worker watchdog."""
import logging
import threading
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import Depends, FastAPI
from fastapi.responses import FileResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

from app.api.deps import require_api_key
from app.api.metrics import install_metrics
from app.api.problems import install_problem_handlers
from app.api.routes import datasets, forests, health, jobs, models
from app.core.config import Settings, get_settings
from app.core.container import Core, build_core

log = logging.getLogger(__name__)
DASHBOARD = Path(__file__).parent / "static"


def _watchdog(core: Core, stop: threading.Event) -> None:
    while not stop.wait(core.settings.watchdog_seconds):
        try:
            recovered = core.jobs.watch_running()
            if recovered:
                log.warning("watchdog recovered %d jobs whose worker was lost", recovered)
        except Exception:
            log.exception("watchdog pass failed")


def create_app(settings: Settings | None = None, core: Core | None = None) -> FastAPI:
    """The API on ``core`` (built from ``settings``, by default from the environment, where not given)."""
    core = core or build_core(settings or get_settings())

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        stop = threading.Event()
        watchdog = threading.Thread(target=_watchdog, args=(core, stop), daemon=True, name="fire-watchdog")
        watchdog.start()
        yield
        stop.set()
        watchdog.join(timeout=5)

    app = FastAPI(
        title="FIRE rule extraction",
        version="0.1.0",
        description="Upload a table, train or upload a tree ensemble, extract a sparse fused rule ensemble "
                    "along a regularization path, promote a step to a model and score with it.",
        lifespan=lifespan,
    )
    app.state.core = core
    app.state.metrics_registry = install_metrics(app, core)
    install_problem_handlers(app)
    protected = [Depends(require_api_key)]
    for router in (datasets.router, forests.router, jobs.router, models.router):
        app.include_router(router, dependencies=protected)
    app.include_router(health.router)
    app.mount("/dashboard/assets", StaticFiles(directory=DASHBOARD), name="dashboard-assets")

    @app.get("/dashboard/{view:path}", include_in_schema=False)
    def dashboard(view: str) -> FileResponse:
        return FileResponse(DASHBOARD / "index.html")  # one page for every view's URL: it routes itself

    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        return RedirectResponse("/dashboard/")

    return app
