"""Dependencies injected into the routes: settings, services, API-key check."""
import secrets
from typing import Annotated

from fastapi import Depends, Request, Security
from fastapi.security import APIKeyHeader

from app.core.config import Settings
from app.errors import ProblemError, field_error
from app.services.container import Services

api_key_header = APIKeyHeader(name="X-API-Key", auto_error=False,
                              description="Required when the server sets FIRE_API_KEYS")


def get_services(request: Request) -> Services:
    return request.app.state.services


def get_settings(services: Annotated[Services, Depends(get_services)]) -> Settings:
    return services.settings


def require_api_key(settings: Annotated[Settings, Depends(get_settings)],
                    api_key: Annotated[str | None, Security(api_key_header)] = None) -> None:
    if not settings.api_keys:
        return
    if api_key is None or not any(secrets.compare_digest(api_key, key) for key in settings.api_keys):
        raise ProblemError(401, "A valid X-API-Key header is required.",
                           [field_error("header.X-API-Key", "missing or unknown key", "send a key the server lists")],
                           headers={"WWW-Authenticate": "APIKey"})


ServicesDep = Annotated[Services, Depends(get_services)]
