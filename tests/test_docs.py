"""The documents that describe the code are kept equal to it: README's module map names every production module
(and no module that is gone), docs/service.md's route table names every route of /openapi.json (and no other), and
no document states a test count by hand (the tiers say how many they ran)."""

import re
from pathlib import Path

import pytest

from app.main import create_app
from tests.support.service import make_settings

ROOT = Path(__file__).resolve().parent.parent
PRODUCTION = ("solver", "app", "worker")
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")


def production_modules() -> set[str]:
    return {
        path.relative_to(ROOT).as_posix()
        for package in PRODUCTION
        for path in (ROOT / package).rglob("*.py")
        if path.name != "__init__.py"
    }


def module_map() -> str:
    """The fenced block under README's "Where things live"."""
    text = (ROOT / "README.md").read_text()
    start = text.index("```\n", text.index("### Where things live")) + 4
    return text[start : text.index("```", start)]


def mapped_modules(block: str) -> set[str]:
    """The modules the map names. A line whose first word ends in "/" opens a folder, nested in the folder of the
    nearest line above it that is indented less; every ``name.py`` on a line (or on the lines indented under it)
    belongs to the folder it sits in; a word with a "/" (``app/cli.py``) is a path from the root."""
    folders: list[tuple[int, str]] = []  # (indentation, folder path) of the open folders
    named = set()
    for line in block.splitlines():
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        while folders and folders[-1][0] >= indent:
            folders.pop()
        first = line.split()[0]
        if first.endswith("/"):
            folders.append((indent, (folders[-1][1] if folders else "") + first))
        folder = folders[-1][1] if folders else ""
        for word in re.findall(r"[\w/]+\.py\b", line):
            named.add(word if "/" in word else folder + word)
    return {name for name in named if name.split("/")[0] in PRODUCTION and name.split("/")[-1] != "__init__.py"}


def test_the_module_map_reads_its_folders_by_indentation():
    block = "a/  x.py\n  b/  y.py, z.py\n                  w.py\n  v.py\na/c.py the app\n"
    assert mapped_modules(block.replace("a/", "app/")) == {
        "app/x.py",
        "app/b/y.py",
        "app/b/z.py",
        "app/b/w.py",
        "app/v.py",
        "app/c.py",
    }


def test_readme_s_module_map_names_every_production_module_and_no_other():
    modules, mapped = production_modules(), mapped_modules(module_map())
    assert not modules - mapped, f"README's module map leaves out {sorted(modules - mapped)}"
    assert not mapped - modules, f"README's module map names modules that do not exist: {sorted(mapped - modules)}"


def route_key(method: str, path: str) -> tuple[str, str]:
    return method.upper(), re.sub(r"\{[^}]*\}", "{}", path)


def documented_routes() -> set[tuple[str, str]]:
    """Every ``METHOD /path`` in the first column of docs/service.md's "API overview" table (a query string or
    an optional part in brackets after the path is not part of it)."""
    text = (ROOT / "docs" / "service.md").read_text()
    section = text[text.index("## API overview") :]
    rows = [line for line in section[: section.index("\n\n", section.index("|"))].splitlines() if line.startswith("|")]
    routes = set()
    for row in rows[2:]:
        first_cell = re.split(r"(?<!\\)\|", row)[1]
        for method, path in re.findall(rf"`({'|'.join(METHODS)}) (/[^`?\[\s]*)", first_cell):
            routes.add(route_key(method, path))
    return routes


def test_the_route_table_names_every_route_of_the_openapi_document_and_no_other():
    spec = create_app(make_settings()).openapi()
    served = {route_key(method, path) for path, operations in spec["paths"].items() for method in operations}
    documented = documented_routes()
    assert not served - documented, f"docs/service.md's route table leaves out {sorted(served - documented)}"
    assert not documented - served, f"docs/service.md's route table names routes not served: {documented - served}"


@pytest.mark.parametrize("document", ["README.md", "docs/service.md", "docs/solver-api.md", "docs/forest-schema.md"])
def test_no_document_states_a_test_count(document):
    text = (ROOT / document).read_text()
    counts = re.findall(r"\b\d[\d,]*(?:\s+of\s+(?:about\s+)?\d[\d,]*)?\s+(?:tests|passed)\b", text)
    counts += re.findall(r"\babout \d[\d,]* of \d[\d,]*", text)  # "the fast tier (about 670 of 950)"
    assert not counts, f"{document} states test counts by hand: {counts} (they go stale; the tiers print them)"
