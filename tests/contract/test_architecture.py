"""The structure shows the architecture: docs/architecture.md's map names every room of the tree, and
imports go one way only (no upward import, no circle, no step reaching an adapter or another state's step).

Imports under ``if TYPE_CHECKING:`` count: a circle kept for annotations is still a circle a reader walks."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import ROOT

CORE = "hyperpod_recovery"
# Where each distribution's top package lives, as the map in docs/architecture.md roots them.
PACKAGE_ROOTS = {
    "layers/recovery_core/hyperpod_recovery/": ROOT / "layers" / "recovery_core" / "hyperpod_recovery",
    "training/hyperpod_recovery/checkpointing/": ROOT / "training" / "hyperpod_recovery" / "checkpointing",
    "cli/hyperpod_recovery_cli/": ROOT / "cli" / "hyperpod_recovery_cli",
    "agent/hyperpod_recovery_agent/": ROOT / "agent" / "hyperpod_recovery_agent",
    "sandbox/": ROOT / "sandbox",
}
# The core's layers, lowest first: a module may import its own layer or a lower one, never a higher.
# Steps and adapters share a layer but never import each other (test below); the composition root
# (runtime and the entry points beside it) wires adapters to steps.
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"__init__", "errors"}),
    frozenset({"vocabulary", "clock", "metric_names", "redact", "sdk_contract"}),
    frozenset({"models"}),
    frozenset({"ports"}),
    frozenset({"domain"}),
    frozenset({"observability", "config"}),
    frozenset({"adapters", "steps"}),
    frozenset({"runtime", "execution_ends", "checkpointing"}),
    frozenset({"sqs_events"}),
)
STEP_HELPERS = frozenset({"commands", "admission", "settle", "ends", "verdicts", "at_risk_verdicts"})  # shared by several states' steps


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str


def _module_name(path: Path, base: Path) -> str:
    parts = path.relative_to(base).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    bases = {
        ROOT / "layers" / "recovery_core": CORE,
        ROOT / "training": CORE,
        ROOT / "cli": "hyperpod_recovery_cli",
        ROOT / "agent": "hyperpod_recovery_agent",
        ROOT: "sandbox",
    }
    found: dict[str, Path] = {}
    for base, top in bases.items():
        for path in (base / top).rglob("*.py"):
            if "__pycache__" not in path.parts:
                found[_module_name(path, base)] = path
    return found


MODULES = _modules()


def _resolve(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports() -> Iterator[Import]:
    for module, path in MODULES.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, *([node.module] if node.module else [])])
                # `from pkg import sub` imports the submodule; `from pkg import name` the package
                submodules = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in MODULES]
                targets = submodules if len(submodules) == len(node.names) else [*submodules, base]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif (
                isinstance(node, ast.Call)
                and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                targets = [node.args[0].value]
            for target in targets:
                resolved = _resolve(target)
                if resolved is not None and resolved != module:
                    yield Import(module, resolved)


IMPORTS = sorted(set(_imports()), key=lambda i: (i.importer, i.imported))


def _in_core(module: str) -> bool:
    return module == CORE or module.startswith(f"{CORE}.")


def _core_area(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _layer(module: str) -> int:
    area = _core_area(module)
    return next(rank for rank, members in enumerate(LAYERS) if area in members)


def _domain_room(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 3 and parts[1] == "domain" else None


def _state_step(module: str) -> str | None:
    parts = module.split(".")
    if len(parts) == 3 and parts[1] == "steps" and parts[2] not in STEP_HELPERS:
        return parts[2]
    return None


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def test_given_the_core_when_a_module_imports_another_then_never_from_a_higher_layer() -> None:
    upward = [
        f"{i.importer} -> {i.imported}"
        for i in IMPORTS
        if _in_core(i.importer) and _in_core(i.imported) and _layer(i.imported) > _layer(i.importer)
    ]
    assert upward == []


def test_given_the_domain_rooms_when_one_uses_another_then_they_form_no_circle() -> None:
    rooms: dict[str, set[str]] = {}
    for i in IMPORTS:
        a, b = _domain_room(i.importer), _domain_room(i.imported)
        if a and b and a != b:
            rooms.setdefault(a, set()).add(b)
    assert _cycles(rooms) == []


def test_given_every_package_when_modules_import_each_other_then_no_circle() -> None:
    edges: dict[str, set[str]] = {}
    for i in IMPORTS:
        edges.setdefault(i.importer, set()).add(i.imported)
    assert _cycles(edges) == []


def test_given_a_step_when_it_imports_then_never_an_adapter_nor_another_states_step() -> None:
    reaching = {
        f"{i.importer} -> {i.imported}"
        for i in IMPORTS
        if _in_core(i.importer)
        and _core_area(i.importer) == "steps"
        and _in_core(i.imported)
        and (_core_area(i.imported) in {"adapters", "runtime"} or _state_step(i.imported) is not None)
    }
    assert reaching == set()


def test_given_an_adapter_when_it_imports_then_never_a_step() -> None:
    assert [
        f"{i.importer} -> {i.imported}"
        for i in IMPORTS
        if i.importer.startswith(f"{CORE}.adapters") and i.imported.startswith(f"{CORE}.steps")
    ] == []


def test_given_the_shipped_cli_and_the_sandbox_then_the_cli_never_imports_the_sandbox_nor_the_sandbox_its_entry_point() -> None:
    assert {
        f"{i.importer} -> {i.imported}"
        for i in IMPORTS
        if (i.importer.startswith("hyperpod_recovery_cli") and i.imported.startswith("sandbox"))
        or (i.importer.startswith("sandbox") and i.imported == "hyperpod_recovery_cli.main")
    } == set()


def _map_rooms() -> dict[str, set[str]]:
    """The rooms docs/architecture.md's map names: a root at the left margin, its rooms indented below."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    block = text.split("## Code layout", 1)[1].split("```", 2)[1]
    rooms: dict[str, set[str]] = {}
    current: str | None = None
    for line in block.splitlines():
        token = line.split(maxsplit=1)[0] if line.strip() else ""
        if not line.startswith(" ") and token in PACKAGE_ROOTS:
            current = token
            rooms[current] = set()
        elif not line.startswith(" "):
            current = None
        elif current and re.fullmatch(r"[a-z_]+(/[a-z_]+)*/", token):
            rooms[current].add(token.rstrip("/"))
    return rooms


def _tree_rooms(folder: Path) -> set[str]:
    return {
        str(path.parent.relative_to(folder)) for path in folder.rglob("*.py") if path.parent != folder and "__pycache__" not in path.parts
    }


def test_given_the_architecture_map_when_read_beside_the_tree_then_it_names_every_room_and_no_other() -> None:
    documented = _map_rooms()
    assert set(documented) == set(PACKAGE_ROOTS)
    for root, folder in PACKAGE_ROOTS.items():
        assert documented[root] == _tree_rooms(folder), root
