"""The API docs without the internet (fakeredis): /docs and /redoc name only this service's addresses, and the
scripts they load are served by it (Swagger UI's and ReDoc's, from the fastapi-offline package), ReDoc's without
the address of its maker's logo. That they draw every operation in a browser with every outside request refused is
tests/service/test_forms_dashboard.py's."""

import re

import fakeredis
import pytest
from fastapi.testclient import TestClient

from app.core.config import Settings
from app.core.container import build_core
from app.main import create_app

ADDRESS = re.compile(r"""(?:src|href|url)\s*[=:(]\s*['"]?([^'" )>]+)""")


@pytest.fixture(scope="module")
def client():
    settings = Settings(redis_url="redis://fakeredis", key_prefix="docs:", queue_name="docs")
    return TestClient(create_app(core=build_core(settings, redis=fakeredis.FakeRedis())))


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_a_docs_page_loads_only_what_this_service_serves(client, page):
    response = client.get(page)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    addresses = set(ADDRESS.findall(response.text))
    assert addresses and not [address for address in addresses if "//" in address], addresses
    for address in addresses:
        assert client.get(address).status_code == 200, address
    assert "/openapi.json" in response.text


def test_redoc_is_served_without_its_makers_logo_address(client):
    script = client.get("/docs-assets/redoc.js")
    assert script.status_code == 200 and script.headers["content-type"].startswith("text/javascript")
    assert b"cdn.redoc.ly" not in script.content and b"Redoc" in script.content
