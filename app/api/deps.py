"""Dependencies injected into the routes: the core, the tenant of the request's API key, the Redis check, and
the lane that runs CPU work off the event loop."""

from typing import Annotated

from fastapi import Depends, Request, Security
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from app.api.cpu_lanes import CpuLane
from app.api.problems import ProblemError
from app.core.container import Core
from app.core.errors import FieldFault
from app.core.tenants import DEFAULT_TENANT

api_key_header = APIKeyHeader(
    name="X-API-Key",
    auto_error=False,
    description="Required when the server has API keys (FIRE_API_KEYS); the key "
    "names the tenant whose data the request sees",
)
# the same key as `Authorization: Bearer <key>`, as Open Inference Protocol clients behind KServe or a gateway send it
bearer = HTTPBearer(auto_error=False, description="The API key as a bearer token (X-API-Key is read first)")


# The dependencies that do no I/O are coroutines: FastAPI would run a plain function in its thread pool, a thread
# hop per dependency per request. Each dependency, and each of its own, costs every request a pass of FastAPI's
# solver (about 10 us on the 2-core machine, 14 of them made a third of a scoring request's time on the event
# loop): they take the Request rather than other dependencies, and a route's tenant is the one the router's
# require_tenant already found.
TENANT_SCOPE_KEY = "fire.tenant"  # the request's tenant, once require_tenant has found it


async def get_core(request: Request) -> Core:
    return request.app.state.core


CoreDep = Annotated[Core, Depends(get_core)]


def _unauthorized(fix: str = "send a key the server lists, or it as a bearer token") -> ProblemError:
    return ProblemError(
        401,
        "A valid X-API-Key header (or Authorization: Bearer token) is required.",
        [FieldFault("header.X-API-Key", "missing or unknown key", fix)],
        headers={"WWW-Authenticate": 'APIKey, Bearer realm="fire-rules"'},
    )


def _presented(api_key: str | None, token: HTTPAuthorizationCredentials | None) -> bytes | None:
    """The key the request presents: its X-API-Key header, else its bearer token; None without either."""
    key = api_key if api_key is not None else None if token is None else token.credentials
    # header values arrive decoded as latin-1: encoding them back gives the bytes the client sent
    return None if key is None else key.encode("latin-1")


def _tenant(request: Request, api_key: str | None, token: HTTPAuthorizationCredentials | None) -> str:
    keys = request.app.state.core.tenant_keys
    if not keys.required:
        tenant = DEFAULT_TENANT
    else:
        presented = _presented(api_key, token)
        found = None if presented is None else keys.tenant_of(presented)
        if found is None:
            raise _unauthorized()
        tenant = found
    request.scope[TENANT_SCOPE_KEY] = tenant
    return tenant


async def require_tenant(
    request: Request,
    api_key: Annotated[str | None, Security(api_key_header)] = None,
    token: Annotated[HTTPAuthorizationCredentials | None, Security(bearer)] = None,
) -> str:
    """The tenant of the request's key: its X-API-Key header, else its `Authorization: Bearer` token (both
    declared as security schemes, so that the OpenAPI document has them)."""
    return _tenant(request, api_key, token)


async def request_tenant(request: Request) -> str:
    """The tenant require_tenant found for this request (every router that has routes with a tenant runs it
    first), else found here from the same headers."""
    tenant = request.scope.get(TENANT_SCOPE_KEY)
    if tenant is not None:
        return tenant
    return _tenant(request, await api_key_header(request), await bearer(request))


TenantDep = Annotated[str, Depends(request_tenant)]


async def metrics_tenant(
    request: Request,
    api_key: Annotated[str | None, Security(api_key_header)] = None,
    token: Annotated[HTTPAuthorizationCredentials | None, Security(bearer)] = None,
) -> str | None:
    """Whose series a /metrics scrape shows: every tenant's (None) for an operator's key (FIRE_METRICS_KEYS), or
    where no key is configured at all; a tenant's own for its key; any other request is a 401."""
    keys = request.app.state.core.tenant_keys
    if not keys.metrics_required:
        return None
    presented = _presented(api_key, token)
    if presented is not None:
        operator, tenant = keys.operator_of(presented), keys.tenant_of(presented)
        if operator is not None:
            return None
        if tenant is not None:
            return tenant
    raise _unauthorized("send an operator's key (FIRE_METRICS_KEYS) or a tenant's key, as a bearer token or X-API-Key")


MetricsTenantDep = Annotated[str | None, Depends(metrics_tenant)]


async def require_redis(request: Request) -> None:
    """503 at once while this process knows Redis is down, instead of each request waiting for a timeout (no
    Redis call: the maintenance thread's probe notices its return)."""
    request.app.state.core.redis_health.check()


async def get_cpu(request: Request) -> CpuLane:
    """The process's CPU lanes as the request's tenant uses them (app/api/cpu_lanes.py)."""
    return CpuLane(request.app.state.cpu, await request_tenant(request))


CpuDep = Annotated[CpuLane, Depends(get_cpu)]
