"""Where a step's logic lives follows from its state's name: ``functions/<verb_noun>/app.py`` runs
``hyperpod_recovery.steps.<verb_noun>``, and every module of steps/ is a state's or a named shared one."""

from __future__ import annotations

import ast

from tests.conftest import ROOT

STEPS = ROOT / "layers" / "recovery_core" / "hyperpod_recovery" / "steps"
# Record Job Outcome is the Record step of the other workflow: one module records both.
SHARED_STATE_MODULES = {"record_job_outcome": "record_outcome"}
SHARED_HELPERS = {"commands", "admission", "settle", "ends", "verdicts", "at_risk_verdicts"}


def _functions() -> list[str]:
    return sorted(p.parent.name for p in (ROOT / "functions").glob("*/app.py"))


def _steps_imported_by(function: str) -> set[str]:
    tree = ast.parse((ROOT / "functions" / function / "app.py").read_text())
    return {
        node.module.removeprefix("hyperpod_recovery.steps.")
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("hyperpod_recovery.steps.")
    }


def test_every_function_runs_the_step_module_named_like_it() -> None:
    # Given every Lambda function (one per Task state, named like the state)
    for function in _functions():
        # Then its handler imports the step module of the same name, and no other step's
        assert _steps_imported_by(function) == {SHARED_STATE_MODULES.get(function, function)}, function


def test_every_step_module_is_a_states_or_a_named_shared_one() -> None:
    modules = {p.stem for p in STEPS.glob("*.py")} - {"__init__"}
    assert sorted(modules - set(_functions()) - SHARED_HELPERS) == []
    # and each shared helper is used by more than one step (else it belongs in that step's module)
    for helper in SHARED_HELPERS:
        users = [p.stem for p in STEPS.glob("*.py") if f"hyperpod_recovery.steps.{helper} import" in p.read_text()]
        assert len(users) >= 2, (helper, users)
