"""Packages by who runs them (issue 17): the agent and the training scripts' checkpoint library load
nothing of the Lambda functions' code, and their wheels (tools/build_dists.py) ship exactly what
they import.

Every import is checked in a fresh interpreter started with -I -S: no PYTHONPATH, no .pth files (the
venv's editable install would otherwise answer for a module a wheel lacks), only the paths given
and the venv's site-packages for boto3 and pydantic.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tools.build_dists import CHECKPOINT_MODULES, CONTRACT_MODULES, DISTRIBUTIONS, build

SITE_PACKAGES = sysconfig.get_paths()["purelib"]
# The functions' code: none of it may reach a training script or the controller node.
LAMBDA_ONLY = ("steps/", "runtime.py", "config.py", "observability.py", "adapters/ledger/", "adapters/hyperpod.py", "models/records.py")
PROBE = """
import importlib, json, pkgutil, sys
sys.path[:0] = {front!r}
sys.path.append({site!r})
for name in {modules!r}:
    importlib.import_module(name)
for name in {walk!r}:
    for found in pkgutil.walk_packages(importlib.import_module(name).__path__, name + "."):
        if not found.name.endswith("__main__"):  # runs the command
            importlib.import_module(found.name)
ours = {{name: getattr(module, "__file__", None) for name, module in sys.modules.items() if name.split(".")[0] == "hyperpod_recovery"}}
print(json.dumps(ours))
"""


def _loaded(front: list[Path], modules: tuple[str, ...] = (), walk: tuple[str, ...] = ()) -> dict[str, str]:
    """hyperpod_recovery's modules (name → file) a fresh interpreter loads importing ``modules`` and
    every module of the packages in ``walk``, with only ``front`` and site-packages to import from."""
    probe = PROBE.format(front=[str(path) for path in front], site=SITE_PACKAGES, modules=list(modules), walk=list(walk))
    env = {"AWS_DEFAULT_REGION": "us-west-2", "PATH": "/usr/bin:/bin"}
    result = subprocess.run([sys.executable, "-I", "-S", "-c", probe], capture_output=True, text=True, env=env, cwd=front[0], check=False)
    assert result.returncode == 0, result.stderr
    loaded: dict[str, str] = json.loads(result.stdout)
    return loaded


def _shipped(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as archive:
        return {name for name in archive.namelist() if ".dist-info/" not in name}


def _install(kind: str, tmp_path: Path) -> tuple[set[str], set[str], Path]:
    """Build the ``kind`` wheel and the ones it needs, install them alone; returns the files it
    ships, the files all of them ship, and where they went."""
    wheels = [build(name, tmp_path / "dist") for name in (kind, *DISTRIBUTIONS[kind].needs)]
    target = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--disable-pip-version-check"]
    subprocess.run([*pip, "--target", str(target), *map(str, wheels)], check=True, capture_output=True)
    return _shipped(wheels[0]), set().union(*map(_shipped, wheels)), target


def _module_name(path: str) -> str:
    parts = path.removesuffix(".py").split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_the_agent_loads_only_the_contract_modules_of_the_core() -> None:
    # Given the agent's source and the layer's, as in a checkout
    # When every module of the agent is imported
    loaded = _loaded([ROOT / "agent", ROOT / "layers" / "recovery_core"], walk=("hyperpod_recovery_agent",))
    # Then of the core it loads the contract only (no steps, adapters, domain, runtime)
    assert sorted(set(loaded) - CONTRACT_MODULES) == []


def test_the_contract_modules_load_nothing_outside_the_contract() -> None:
    # Given the layer's source
    # When every contract module is imported
    loaded = _loaded([ROOT / "layers" / "recovery_core"], modules=tuple(sorted(CONTRACT_MODULES)))
    # Then they need nothing else of the core: the contract can be shipped on its own
    assert set(loaded) == CONTRACT_MODULES


def test_the_checkpoint_library_loads_only_its_own_modules_of_the_core() -> None:
    # Given the layer's source and training/, as in a checkout
    # When a training script imports the library
    loaded = _loaded([ROOT / "training", ROOT / "layers" / "recovery_core"], modules=("hyperpod_recovery.checkpointing",))
    # Then it loads the modules its wheel ships, and every one of them
    assert set(loaded) == CHECKPOINT_MODULES


@pytest.mark.parametrize("kind", ["checkpoints", "agent"])
def test_a_wheel_installed_alone_imports_exactly_what_it_ships(kind: str, tmp_path: Path) -> None:
    # Given the wheel built and installed with the contract's and nothing of the checkout beside them
    own, shipped, target = _install(kind, tmp_path)
    # Then they carry none of the functions' code
    assert [path for path in shipped if path.removeprefix("hyperpod_recovery/").startswith(LAMBDA_ONLY)] == []
    # When its users' imports run: a training script's, or every module of the agent
    if kind == "checkpoints":
        loaded = _loaded([target], modules=("hyperpod_recovery.checkpointing",))
    else:
        loaded = _loaded([target], walk=("hyperpod_recovery_agent",))
        assert (target / "bin" / "hyperpod-recovery-agent").exists()
    # Then every module of the core it loads comes from the wheels, and it ships none it does not load
    assert {name for name, file in loaded.items() if not str(file).startswith(str(target))} == set()
    assert set(loaded) <= {_module_name(path) for path in shipped if path.startswith("hyperpod_recovery/")}
    assert {_module_name(path) for path in own if path.startswith("hyperpod_recovery/")} <= set(loaded)


def test_the_root_distribution_lists_every_package_in_its_folders() -> None:
    # Given the packages pyproject.toml lists (not found: hyperpod_recovery spans two folders)
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    # When every folder with an __init__.py under the mapped folders is named as a package
    found = set()
    for package, folder in setuptools["package-dir"].items():
        for init in (ROOT / folder).rglob("__init__.py"):
            found.add(".".join((package, *init.parent.relative_to(ROOT / folder).parts)))
    # Then the list holds them all, and nothing else
    assert sorted(setuptools["packages"]) == sorted(found)


def test_no_file_belongs_to_two_wheels_and_each_wheel_names_the_ones_it_needs(tmp_path: Path) -> None:
    # Given every wheel built from this checkout
    wheels = {kind: build(kind, tmp_path) for kind in DISTRIBUTIONS}
    shipped = {kind: _shipped(wheel) for kind, wheel in wheels.items()}
    # Then no two ship the same file (both can go into one environment, and one's removal leaves the other whole)
    for kind, files in shipped.items():
        for other, other_files in shipped.items():
            assert kind == other or not files & other_files, (kind, other, sorted(files & other_files))
    # And a wheel that needs the contract says so, at this checkout's version
    for kind, wheel in wheels.items():
        with zipfile.ZipFile(wheel) as archive:
            metadata = archive.read(next(n for n in archive.namelist() if n.endswith("METADATA"))).decode()
        needed = {line.split(": ", 1)[1] for line in metadata.splitlines() if line.startswith("Requires-Dist: hyperpod-recovery")}
        assert needed == {f"{DISTRIBUTIONS[n].name}=={wheel.name.split('-')[1]}" for n in DISTRIBUTIONS[kind].needs}


def _imported_distributions(folders: list[Path]) -> dict[str, set[str]]:
    """Distribution (normalized name) → the files importing it, for every import outside the standard
    library and our own packages in ``folders``: at module level or inside a function alike."""
    owners = packages_distributions()
    found: dict[str, set[str]] = {}
    for folder in folders:
        for path in folder.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    top = name.split(".")[0]
                    if top in sys.stdlib_module_names or top.startswith("hyperpod_recovery"):
                        continue
                    for distribution in owners.get(top, [f"<no distribution for {top}>"]):
                        found.setdefault(_normalized(distribution), set()).add(str(path.relative_to(ROOT)))
    return found


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_the_root_distribution_declares_every_distribution_its_packages_import() -> None:
    # Given what `make install` and pipx install: the packages pyproject.toml maps, and its dependencies
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    declared = {_normalized(re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0]) for requirement in pyproject["project"]["dependencies"]}
    folders = sorted(
        {ROOT / folder for folder in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"].values()}
    )
    # When every import of their modules is traced to the distribution that provides it
    imported = _imported_distributions(folders)
    # Then each is declared: an installed command never meets a ModuleNotFoundError
    assert {name: sorted(files) for name, files in imported.items() if name not in declared} == {}
