"""The request dependencies of app/api/deps.py on a small app of their own (no Redis): a route's tenant is the one
the router's require_tenant found, and a route with a tenant but no router-level check still checks the key."""

from types import SimpleNamespace

from fastapi import APIRouter, Depends, FastAPI
from fastapi.testclient import TestClient

from app.api.deps import TenantDep, require_redis, require_tenant
from app.api.problems import install_problem_handlers
from app.core.tenants import TenantKeys, parse_entry


class Health:
    def check(self) -> None:
        pass


def make_app(with_router_check: bool) -> FastAPI:
    app = FastAPI()
    keys = TenantKeys([parse_entry("alice=alice-secret"), parse_entry("bob=bob-secret")])
    app.state.core = SimpleNamespace(tenant_keys=keys, redis_health=Health())
    install_problem_handlers(app)
    router = APIRouter()

    @router.get("/whoami")
    async def whoami(tenant: TenantDep) -> dict:
        return {"tenant": tenant}

    dependencies = [Depends(require_tenant), Depends(require_redis)] if with_router_check else []
    app.include_router(router, dependencies=dependencies)
    return app


def test_a_route_gets_the_tenant_of_the_key_with_or_without_the_router_check():
    for with_router_check in (True, False):
        client = TestClient(make_app(with_router_check))
        assert client.get("/whoami", headers={"X-API-Key": "alice-secret"}).json() == {"tenant": "alice"}
        assert client.get("/whoami", headers={"Authorization": "Bearer bob-secret"}).json() == {"tenant": "bob"}
        # X-API-Key is read first
        both = {"X-API-Key": "alice-secret", "Authorization": "Bearer bob-secret"}
        assert client.get("/whoami", headers=both).json() == {"tenant": "alice"}
        for headers in ({}, {"X-API-Key": "wrong"}, {"Authorization": "Bearer wrong"}):
            response = client.get("/whoami", headers=headers)
            assert response.status_code == 401, (with_router_check, headers)
            assert response.headers["content-type"] == "application/problem+json"
            assert response.headers["WWW-Authenticate"] == 'APIKey, Bearer realm="fire-rules"'
            assert response.json()["errors"][0]["field"] == "header.X-API-Key"


def test_without_keys_every_request_is_the_default_tenant():
    app = make_app(with_router_check=True)
    app.state.core.tenant_keys = TenantKeys([])
    assert TestClient(app).get("/whoami").json() == {"tenant": "default"}
