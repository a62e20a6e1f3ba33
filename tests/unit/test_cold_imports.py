"""A handler's cold start imports only what its step uses: the stack's adapters are built, and their
modules imported, when a step first asks for them (runtime.StackDependencies); the SQS handlers run
their own partial-batch loop (sqs_events.py), without Powertools' batch utility, its asyncio and its
event classes.

Imports are checked in a fresh interpreter, the way bench/cold_import.py loads a handler: a module
imported by an earlier test would otherwise hide one imported here. No timing: bench/cold_import.py
measures; these tests hold the structure that makes it fast."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from hyperpod_recovery.adapters.dry_run import DryRunCluster, DryRunLedger, DryRunOrchestrator
from hyperpod_recovery.adapters.hyperpod import HyperPodCluster
from hyperpod_recovery.adapters.ledger import DynamoLedger
from hyperpod_recovery.adapters.slurm_agent import SlurmAgentOrchestrator
from hyperpod_recovery.runtime import build_dependencies
from tests.conftest import ROOT
from tests.fakes import make_settings

LAYER = ROOT / "layers" / "recovery_core"
# Every adapter that talks to an outside system: a handler imports one when its step is called.
ADAPTERS = [
    "checkpoints",
    "dry_run",
    "eks",
    "eks_orchestrator",
    "hyperpod",
    "job_nodes",
    "kubernetes",
    "ledger",
    "notifier",
    "progress",
    "slurm_agent",
    "sqs",
    "stepfunctions",
]
PARSER_MODELS = "aws_lambda_powertools.utilities.parser.models"
SQS_HANDLERS = ["intake", "notice_cluster_event", "reconcile_execution"]


def _imported_by(function: str) -> set[str]:
    """The modules a fresh interpreter holds once it has imported the function's app.py."""
    probe = (
        f"import json, sys; sys.path[:0] = [{str(ROOT / 'functions' / function)!r}, {str(LAYER)!r}]; "
        "import app; print(json.dumps(sorted(sys.modules)))"
    )
    env = {"AWS_DEFAULT_REGION": "us-west-2", "POWERTOOLS_SERVICE_NAME": "hyperpod-recovery", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, env=env, timeout=60)
    return set(json.loads(out.stdout))


@pytest.mark.parametrize("function", ["lock_nodes", "cordon_nodes", "report_safety_state", "wait_for_rejoin"])
def test_a_handler_imports_no_adapter_before_its_step_asks_for_one(function: str) -> None:
    # When a Lambda imports the handler of a step (cold start)
    modules = _imported_by(function)
    # Then none of the stack's adapters is loaded yet, nor the dry-run gate
    assert sorted(f"hyperpod_recovery.adapters.{a}" for a in ADAPTERS if f"hyperpod_recovery.adapters.{a}" in modules) == []


@pytest.mark.parametrize("function", ["lock_nodes", "report_safety_state", "notice_cluster_event"])
def test_a_step_that_sends_no_message_imports_none_of_the_messages(function: str) -> None:
    modules = _imported_by(function)
    assert "hyperpod_recovery.domain.messages.advice" not in modules
    assert "hyperpod_recovery.domain.record.fates" not in modules


@pytest.mark.parametrize("function", ["intake", "lock_nodes"])
def test_a_handler_outside_the_job_workflow_imports_none_of_its_models(function: str) -> None:
    assert "hyperpod_recovery.models.job_recovery" not in _imported_by(function)


@pytest.mark.parametrize("function", SQS_HANDLERS)
def test_an_sqs_handler_leaves_out_powertools_batch_utility_and_its_event_classes(function: str) -> None:
    modules = _imported_by(function)
    assert "aws_lambda_powertools.utilities.batch" not in modules
    assert "asyncio" not in modules
    assert PARSER_MODELS not in modules
    assert "aws_lambda_powertools.utilities.data_classes" not in modules


def test_the_stacks_dependencies_build_each_port_once_on_first_use() -> None:
    deps = build_dependencies(make_settings())
    # When a step asks for the ledger twice
    first, again = deps.ledger, deps.ledger
    # Then it is the stack's DynamoDB ledger, built once
    assert isinstance(first, DynamoLedger) and again is first
    # and the ports that share one Step Functions adapter share it
    assert deps.workflows is deps.history


def test_a_dry_runs_ports_are_the_stacks_own_behind_the_gate() -> None:
    deps = build_dependencies(make_settings())
    ledger = deps.ledger
    # When a dry run's step is given its dependencies
    dry = deps.for_dry_run()
    # Then the cluster, the ledger and the orchestrator are the stack's own, behind the dry-run gate
    assert dry.dry_run and not deps.dry_run
    assert isinstance(dry.ledger, DryRunLedger) and dry.ledger._ledger is ledger
    assert isinstance(dry.cluster, DryRunCluster) and isinstance(dry.cluster._cluster, HyperPodCluster)
    assert isinstance(dry.orchestrator, DryRunOrchestrator) and isinstance(dry.orchestrator._orchestrator, SlurmAgentOrchestrator)
    # and every other port is the stack's, the same object
    assert (dry.notifier, dry.workflows, dry.checkpoints) == (deps.notifier, deps.workflows, deps.checkpoints)
    assert dry.notifier is deps.notifier
    # and a dry run's dependencies are not gated twice
    assert dry.for_dry_run() is dry


def test_a_port_a_test_sets_is_the_one_given() -> None:
    deps = build_dependencies(make_settings())
    ledger = DynamoLedger("other-table")
    deps.ledger = ledger
    assert deps.ledger is ledger


def test_the_eventbridge_envelope_is_powertools_field_for_field() -> None:
    from aws_lambda_powertools.utilities.parser.models import EventBridgeModel as PowertoolsEnvelope

    from hyperpod_recovery.models.events import EventBridgeModel

    def shape(model: type[Any]) -> dict[str, tuple[str | None, bool]]:
        return {name: (f.alias, f.is_required()) for name, f in model.model_fields.items()}

    assert shape(EventBridgeModel) == shape(PowertoolsEnvelope)
    assert EventBridgeModel.model_config.get("populate_by_name") is PowertoolsEnvelope.model_config.get("populate_by_name") is True


@pytest.mark.parametrize("function", ["reconcile_execution", "sweep_ended_executions"])
def test_the_steps_that_reconcile_ends_load_the_recording_path_only_when_an_end_needs_it(function: str) -> None:
    # Most ends were recorded by their own Record step: a cold start for those reads the ledger only
    modules = _imported_by(function)
    assert "hyperpod_recovery.domain.record.settled" in modules
    for recording in ("domain.record.left_behind", "domain.record.reconcile", "domain.messages.notification"):
        assert f"hyperpod_recovery.{recording}" not in modules


@pytest.mark.parametrize("function", ["record_outcome", "record_job_outcome"])
def test_a_record_handler_loads_an_incident_table_only_when_it_records(function: str) -> None:
    # Each workflow's handler then loads its own table, never the other workflow's
    modules = _imported_by(function)
    assert not {"hyperpod_recovery.domain.record.node_incident", "hyperpod_recovery.domain.record.job_incident"} & modules
    assert "hyperpod_recovery.domain.checkpoints.discovery" not in modules


def test_checking_a_drill_scenario_imports_neither_moto_nor_boto3() -> None:
    # Given `python -m sandbox check --scenario` (make drill's first step: it only reads a file)
    probe = (
        "import runpy, sys; sys.argv = ['sandbox', 'check', '--scenario', 'events/drills/default.json', '--out', 'out'];\n"
        "try:\n    runpy.run_module('sandbox', run_name='__main__')\nexcept SystemExit as exit:\n    code = exit.code\n"
        "print(code, sorted({m.split('.')[0] for m in sys.modules} & {'moto', 'boto3', 'botocore'}))"
    )
    # When it runs in a fresh interpreter
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    # Then it accepted the scenario without importing the in-memory AWS or the SDK
    assert done.stdout.split("\n")[-2] == "0 []", done.stdout + done.stderr
