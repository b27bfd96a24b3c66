"""Dependencies injected into the routes: the core, the tenant of the request's API key, the Redis check, and
the lane that runs CPU work off the event loop."""

from typing import Annotated

import anyio
from fastapi import Depends, Request, Security
from fastapi.security import APIKeyHeader

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


# The dependencies that do no I/O are coroutines: FastAPI would run a plain function in its thread pool, a thread
# hop per dependency per request.
async def get_core(request: Request) -> Core:
    return request.app.state.core


CoreDep = Annotated[Core, Depends(get_core)]


async def require_tenant(core: CoreDep, api_key: Annotated[str | None, Security(api_key_header)] = None) -> str:
    keys = core.tenant_keys
    if not keys.required:
        return DEFAULT_TENANT
    # header values arrive decoded as latin-1: encoding them back gives the bytes the client sent
    tenant = None if api_key is None else keys.tenant_of(api_key.encode("latin-1"))
    if tenant is None:
        raise ProblemError(
            401,
            "A valid X-API-Key header is required.",
            [FieldFault("header.X-API-Key", "missing or unknown key", "send a key the server lists")],
            headers={"WWW-Authenticate": "APIKey"},
        )
    return tenant


TenantDep = Annotated[str, Depends(require_tenant)]


async def require_redis(core: CoreDep) -> None:
    """503 at once while this process knows Redis is down, instead of each request waiting for a timeout."""
    core.redis_health.check()


class CpuLane:
    """Runs CPU work (parsing uploads, large scoring bodies) in worker threads, at most ``threads`` at once;
    more wait their turn without holding the event loop."""

    def __init__(self, threads: int):
        self.limiter = anyio.CapacityLimiter(threads)

    async def run(self, function, *args):
        return await anyio.to_thread.run_sync(function, *args, limiter=self.limiter)


async def get_cpu(request: Request) -> CpuLane:
    return request.app.state.cpu


CpuDep = Annotated[CpuLane, Depends(get_cpu)]
