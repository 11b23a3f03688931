"""The library's wings and which way their imports go, read from the source with ast.

core imports nothing of the book above it; engine imports core; figures import core;
studies import core, engine and figures; tools may import anything. The chapters' door
(floorlab/__init__.py) never imports tools, no module imports the door, no import circle
exists (imports inside functions count), and no private name (_x) is imported across modules.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

LIB = Path(__file__).resolve().parents[1] / "lib"
PACKAGE = LIB / "floorlab"
WINGS = ("core", "engine", "figures", "studies", "tools")
ALLOWED = {
    "core": {"core"},
    "engine": {"core", "engine"},
    "figures": {"core", "figures"},
    "studies": {"core", "engine", "figures", "studies"},
    "tools": set(WINGS),
    "__init__": {"core", "engine", "figures", "studies"},
    "__main__": {"tools"},
}
MAX_LINES = 400


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(LIB).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py")) if "reference" not in p.parts}


def _imports(name: str, path: Path) -> list[tuple[str, list[str], int]]:
    """(imported module, imported names, line) for every floorlab import in the file, nested ones too."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module == "floorlab" or module.startswith("floorlab."):
                found.append((module, [a.name for a in node.names], node.lineno))
        elif isinstance(node, ast.Import):
            found += [(a.name, [], node.lineno) for a in node.names
                      if a.name == "floorlab" or a.name.startswith("floorlab.")]
    return found


def _target(module: str, names: list[str], modules: dict[str, Path]) -> list[str]:
    """The modules an import reaches: `from floorlab.core import runs` reaches floorlab.core.runs."""
    submodules = [f"{module}.{n}" for n in names if f"{module}.{n}" in modules]
    plain = not names or len(submodules) < len(names)  # some name is defined in module itself
    return ([module] if plain else []) + submodules


def _wing(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "__init__"
    if parts[1] == "__main__":
        return "__main__"
    return parts[1]


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        graph[name] = set()
        for module, names, _ in _imports(name, path):
            for target in _target(module, names, modules):
                if target in modules and target != name:
                    graph[name].add(target)
    return graph


def test_the_tree_has_the_four_wings_and_figures():
    assert {p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"} >= set(WINGS)
    flat = [p.name for p in PACKAGE.glob("*.py")]
    assert sorted(flat) == ["__init__.py", "__main__.py"], f"modules outside a wing: {flat}"


def test_every_import_follows_the_wings_direction():
    modules = _modules()
    broken = []
    for name, path in modules.items():
        wing = _wing(name)
        for module, names, line in _imports(name, path):
            if module == "floorlab" and name != "floorlab":
                broken.append(f"{path.relative_to(LIB)}:{line} imports the chapters' door (floorlab); "
                              "import the module that defines the name instead")
                continue
            for target in _target(module, names, modules):
                if target == "floorlab" or target not in modules:
                    continue
                if _wing(target) not in ALLOWED[wing]:
                    broken.append(f"{path.relative_to(LIB)}:{line} ({wing}) imports {target} "
                                  f"({_wing(target)}); {wing} may import {sorted(ALLOWED[wing])}")
    assert not broken, "\n".join(broken)


def test_no_import_circle():
    graph = _graph()
    circles = []
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                circles.append(" -> ".join(trail[trail.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, trail + [nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    # a package's __init__ importing its own submodules is how a package re-exports, not a circle
    circles = [c for c in circles if not all(m.startswith(c.split(" -> ")[0]) for m in c.split(" -> "))]
    assert not circles, "import circles:\n" + "\n".join(circles)


def test_no_private_name_is_imported_across_modules():
    modules = _modules()
    crossing = [f"{path.relative_to(LIB)}:{line} imports {n} from {module}"
                for name, path in modules.items()
                for module, names, line in _imports(name, path)
                for n in names if n.startswith("_") and not n.startswith("__")]
    assert not crossing, "\n".join(crossing)


@pytest.mark.parametrize("name", sorted(_modules()))
def test_each_module_is_short_and_says_its_wing(name):
    path = _modules()[name]
    lines = path.read_text().count("\n")
    assert lines <= MAX_LINES, f"{path.relative_to(LIB)} has {lines} lines; split it below {MAX_LINES}"
    wing = _wing(name)
    if wing in WINGS and path.name != "__init__.py":
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        assert doc.startswith(f"{wing.capitalize()} wing"), (
            f"{path.relative_to(LIB)}'s docstring should open with its wing ('{wing.capitalize()} wing: ...')")


def test_the_door_is_small():
    import floorlab

    assert len(floorlab.__all__) <= 27, f"floorlab exports {len(floorlab.__all__)} names"
    assert not any(m.startswith("floorlab.tools") for m in _graph()["floorlab"])
