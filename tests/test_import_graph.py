"""No import circles: the modules of the production packages import one another as a directed acyclic graph.

Every import statement counts, at any depth (function-level imports and ``if TYPE_CHECKING:`` blocks too: a
circle that is only broken by importing late is still a circle), ``from . import x`` resolved to the module
``x`` where it is one."""

import ast
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
PRODUCTION_PACKAGES = ("solver", "app", "worker")


def module_name(path: Path) -> str:
    """``solver/formats/xgboost.py`` -> ``solver.formats.xgboost``; a package's ``__init__.py`` -> the package."""
    parts = path.relative_to(REPO_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def production_modules() -> dict[str, Path]:
    return {module_name(path): path for package in PRODUCTION_PACKAGES for path in (REPO_ROOT / package).rglob("*.py")}


def imported_modules(name: str, path: Path, modules: set[str]) -> set[str]:
    """The production modules that ``path`` (module ``name``) imports, at any depth."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    imported = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            source = ".".join(part for part in (base, node.module) if part)
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                imported.add(submodule if submodule in modules else source)
    return imported & modules


def import_graph() -> dict[str, set[str]]:
    modules = production_modules()
    return {name: imported_modules(name, path, set(modules)) for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as its modules in import order (the first repeated at the end), or None."""
    done: set[str] = set()
    for root in sorted(graph):
        if root in done:
            continue
        path, on_path = [root], {root}
        branches = [iter(sorted(graph[root]))]
        while branches:
            target = next(branches[-1], None)
            if target is None:
                finished = path.pop()
                on_path.discard(finished)
                done.add(finished)
                branches.pop()
            elif target in on_path:
                return [*path[path.index(target) :], target]
            elif target not in done:
                path.append(target)
                on_path.add(target)
                branches.append(iter(sorted(graph[target])))
    return None


def test_the_import_graph_has_no_cycle():
    graph = import_graph()
    assert "solver.forest" in graph["solver"]  # the graph does see the imports
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_find_cycle_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None
