"""The Lambda layer ships what the functions run, and the operator's tools stay out of it.

Every module of the layer's package must be imported by some function (its handler, transitively,
the adapters the runtime builds when a step first asks for them, or what a step imports on the one
path that needs it), without exception: the
training scripts' checkpoint library lives in training/, the operator's tools in cli/
(docs/decisions.md). Run in a fresh interpreter: what this test process has imported says nothing
about the functions.
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import ROOT
from tests.fakes import settings_env

LAYER = ROOT / "layers" / "recovery_core"
PROBE = """
import importlib.util, json, pathlib, sys
sys.path[:0] = [{layer!r}]
for app in sorted(pathlib.Path({functions!r}).glob("*/app.py")):
    spec = importlib.util.spec_from_file_location("handler_" + app.parent.name, app)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
# The stack's adapters are imported when a step first asks for a port: ask for all, on each orchestrator
import dataclasses
from hyperpod_recovery.config import Settings
from hyperpod_recovery.runtime import Dependencies, build_dependencies
for env in {stacks!r}:
    built = build_dependencies(Settings.from_environ(env))
    for deps in (built, built.for_dry_run()):
        for port in dataclasses.fields(Dependencies):
            getattr(deps, port.name)
        deps.training_jobs()
# ... and what a step imports inside a function, on the one path that needs it (steps/ends.py's
# recording path, each Record handler's incident table): followed until nothing new is found.
import ast
seen = set()
while True:
    names = sorted(n for n in sys.modules if n.startswith("hyperpod_recovery") and n not in seen)
    if not names:
        break
    for name in names:
        seen.add(name)
        source = getattr(sys.modules[name], "__file__", None)
        if not source:
            continue
        for node in ast.walk(ast.parse(pathlib.Path(source).read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for inner in ast.walk(node):
                    if isinstance(inner, ast.ImportFrom) and inner.module and inner.module.startswith("hyperpod_recovery"):
                        importlib.import_module(inner.module)
print(json.dumps(sorted(name for name in sys.modules if name.split(".")[0] in ("hyperpod_recovery", "hyperpod_recovery_cli"))))
"""


def _layer_modules() -> set[str]:
    modules = set()
    for path in (LAYER / "hyperpod_recovery").rglob("*.py"):
        parts = path.relative_to(LAYER).with_suffix("").parts
        modules.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return modules


def test_every_module_in_the_layer_is_one_a_function_runs_and_no_operator_tool_is_among_them() -> None:
    # Given every handler imported the way Lambda imports it (the function's folder and the layer),
    # and every port of a Slurm and an EKS stack asked for (live and dry run)
    env = {"AWS_DEFAULT_REGION": "us-west-2", "POWERTOOLS_SERVICE_NAME": "x", "POWERTOOLS_METRICS_NAMESPACE": "y", "PATH": "/usr/bin:/bin"}
    eks = settings_env(PROGRESS_TABLE="progress", ORCHESTRATOR="eks", EKS_CLUSTER_NAME="llm-eks")
    stacks = [settings_env(PROGRESS_TABLE="progress"), eks]
    probe = PROBE.format(layer=str(LAYER), functions=str(ROOT / "functions"), stacks=stacks)
    imported = set(json.loads(subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True).stdout))
    # Then the functions import every module the layer ships ...
    assert sorted(_layer_modules() - imported) == []
    # ... and neither the operator's tools nor the training scripts' library, which are not in the layer to import
    assert not any(name.startswith(("hyperpod_recovery_cli", "hyperpod_recovery.checkpointing")) for name in imported)
    assert not (LAYER / "hyperpod_recovery_cli").exists()
    assert not list((LAYER / "hyperpod_recovery").glob("checkpointing*"))
