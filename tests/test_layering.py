"""The layers import downward only: the workers stand on the service core, never on the HTTP API; the
library imports nothing of the service."""

import ast
import json
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
SERVICE_PACKAGES = {"fastapi", "starlette", "redis", "rq", "app", "worker"}


def modules_loaded_by(*modules: str) -> set[str]:
    """Every module a fresh interpreter holds after importing ``modules``."""
    code = f"import sys, json; import {', '.join(modules)}; print(json.dumps(sorted(sys.modules)))"
    output = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    return set(json.loads(output.stdout))


def imported_names(path: Path) -> set[str]:
    """Every module an import statement of ``path`` names, at any depth (function-level imports too)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module)
    return names


def test_the_workers_never_load_the_http_api():
    loaded = modules_loaded_by("worker.main", "worker.tasks")
    assert "app.core.job_lifecycle" in loaded  # they do stand on the core
    forbidden = {
        m for m in loaded if m.split(".")[0] in ("fastapi", "starlette") or m.startswith("app.api") or m == "app.main"
    }
    assert not forbidden, sorted(forbidden)


def test_the_core_never_loads_the_http_api():
    loaded = modules_loaded_by("app.core.container", "app.core.embedded")
    assert not {m for m in loaded if m.split(".")[0] in ("fastapi", "starlette") or m.startswith("app.api")}


def test_the_library_imports_nothing_of_the_service():
    for path in sorted((REPO_ROOT / "solver").rglob("*.py")):
        service = {name for name in imported_names(path) if name.split(".")[0] in SERVICE_PACKAGES}
        assert not service, f"{path.relative_to(REPO_ROOT)} imports {sorted(service)}"
    loaded = modules_loaded_by("solver", "solver.fitting", "solver.formats", "solver.encoding", "solver.spec")
    assert not {m for m in loaded if m.split(".")[0] in SERVICE_PACKAGES}


def service_modules():
    return sorted([*(REPO_ROOT / "app").rglob("*.py"), *(REPO_ROOT / "worker").rglob("*.py")])


def test_stores_own_their_redis_clients_and_keys():
    """No code reaches through an object into another's Redis client (``self.blobs.redis.incr``), and no key
    is assembled from the prefix outside app/core/keys.py."""
    for path in service_modules():
        where = path.relative_to(REPO_ROOT)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr == "redis" and isinstance(node.value, ast.Attribute):
                raise AssertionError(
                    f"{where}:{node.lineno} reaches into {ast.unparse(node)}: give that store the call"
                )
            if isinstance(node, ast.Attribute) and node.attr == "key_prefix" and path.name != "keys.py":
                raise AssertionError(f"{where}:{node.lineno} builds a key from key_prefix: use app.core.keys.Keys")
