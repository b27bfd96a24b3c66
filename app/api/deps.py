"""Dependencies injected into the routes: the core, the settings, the API-key check."""
import secrets
from typing import Annotated

from fastapi import Depends, Request, Security
from fastapi.security import APIKeyHeader

from app.api.problems import ProblemError
from app.core.config import Settings
from app.core.container import Core
from app.core.errors import FieldFault

api_key_header = APIKeyHeader(name="X-API-Key", auto_error=False,
                              description="Required when the server sets FIRE_API_KEYS")


def get_core(request: Request) -> Core:
    return request.app.state.core


def get_settings(core: Annotated[Core, Depends(get_core)]) -> Settings:
    return core.settings


def require_api_key(settings: Annotated[Settings, Depends(get_settings)],
                    api_key: Annotated[str | None, Security(api_key_header)] = None) -> None:
    if not settings.api_keys:
        return
    if api_key is None or not any(secrets.compare_digest(api_key, key) for key in settings.api_keys):
        raise ProblemError(401, "A valid X-API-Key header is required.",
                           [FieldFault("header.X-API-Key", "missing or unknown key", "send a key the server lists")],
                           headers={"WWW-Authenticate": "APIKey"})


CoreDep = Annotated[Core, Depends(get_core)]
