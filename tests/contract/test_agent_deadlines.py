"""A dead controller agent is noticed within AGENT_HEARTBEAT_DEADLINE_SECONDS, not at a state's
timeout: every state the agent answers carries that HeartbeatSeconds, and the agent beats faster."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_recovery.models.commands import AGENT_HEARTBEAT_DEADLINE_SECONDS
from hyperpod_recovery_agent.config import AgentConfig
from sandbox.template import load_template
from tests.conftest import ROOT

WORKFLOWS = ("node_recovery", "job_recovery")
RESOURCES = load_template(ROOT / "template.yaml")["Resources"]


def _sends_commands(logical: str) -> bool:
    """The function may put a command on the agent's queue (its policy says so)."""
    statements = [s for p in RESOURCES[logical]["Properties"].get("Policies", []) if isinstance(p, dict) for s in p.get("Statement", [])]
    return any(s["Action"] == "sqs:SendMessage" and s["Resource"] == {"Fn::GetAtt": ["CommandQueue", "Arn"]} for s in statements)


def _agent_states(workflow: str) -> dict[str, dict[str, Any]]:
    """Every step that waits for a task token the controller agent answers: its function puts a
    command on the agent's queue (Wait For Rejoin also waits for a token, which an event answers)."""
    found: dict[str, dict[str, Any]] = {}

    def walk(states: dict[str, Any]) -> None:
        for name, state in states.items():
            if state["Type"] != "Task" or state["Resource"] != "arn:aws:states:::lambda:invoke.waitForTaskToken":
                pass
            elif _sends_commands(re.fullmatch(r"\$\{(\w+)Arn\}", state["Parameters"]["FunctionName"])[1]):  # type: ignore[index]
                found[name] = state
            if state["Type"] == "Map":
                walk(state["ItemProcessor"]["States"])

    walk(json.loads((ROOT / "statemachines" / f"{workflow}.asl.json").read_text())["States"])
    return found


@pytest.mark.parametrize("workflow", WORKFLOWS)
def test_every_state_the_agent_answers_gives_up_after_a_minute_without_a_heartbeat(workflow: str) -> None:
    states = _agent_states(workflow)
    assert states
    for name, state in states.items():
        # A heartbeat deadline shorter than the state's own timeout, and every end of it escalates
        assert state.get("HeartbeatSeconds") == AGENT_HEARTBEAT_DEADLINE_SECONDS < state["TimeoutSeconds"], name
        assert any("States.ALL" in c["ErrorEquals"] for c in state.get("Catch", [])), name
        # And no Retry runs the command again after a timeout (a dead agent is a human's)
        retried = {e for r in state.get("Retry", []) for e in r["ErrorEquals"]}
        assert not retried & {"States.ALL", "States.Timeout", "States.HeartbeatTimeout", "States.TaskFailed"}, name


def test_the_agent_beats_at_least_twice_within_the_deadline() -> None:
    # The largest heartbeat interval the agent's configuration accepts
    limit = AgentConfig.model_fields["heartbeat_seconds"]
    default = limit.default
    assert default * 2 <= AGENT_HEARTBEAT_DEADLINE_SECONDS


def test_the_longest_health_check_fits_in_the_resume_nodes_wait() -> None:
    # Given the longest check the template accepts, with srun's allocation slack and the Slurm calls
    # around it (reserve, resume, drain or unreserve, cancel: each bounded by the agent's Slurm timeout)
    from hyperpod_recovery.config import Settings
    from hyperpod_recovery_agent.slurm import CHECK_ALLOCATION_SLACK_SECONDS

    parameter = load_template(ROOT / "template.yaml")["Parameters"]["ReplacementHealthCheckSeconds"]
    longest = int(parameter["MaxValue"])
    assert longest == Settings.model_fields["replacement_health_check_seconds"].metadata[1].le  # one bound, two places
    slurm_calls = 5 * AgentConfig.model_fields["slurm_timeout_seconds"].default
    resume = json.loads((ROOT / "statemachines" / "node_recovery.asl.json").read_text())["States"]["Resume Nodes"]
    # Then Resume Nodes waits for all of it (the checks run at once), so a slow check is a failed
    # gate the agent reports, never a state that timed out with the node half done
    assert longest + CHECK_ALLOCATION_SLACK_SECONDS + slurm_calls <= resume["TimeoutSeconds"]


_CHECK = load_template(ROOT / "template.yaml")["Parameters"]["ReplacementHealthCheck"]
_CHECK_PATTERN = _CHECK["AllowedPattern"]


@settings(max_examples=300, deadline=None)
@given(check=st.from_regex(_CHECK_PATTERN, fullmatch=True).filter(lambda c: len(c) <= _CHECK["MaxLength"]))
def test_every_health_check_the_template_accepts_lets_every_function_start(check: str) -> None:
    # A check CloudFormation accepts but the functions refuse would stop every cold start of the stack
    from tests.fakes import make_settings

    configured = make_settings(REPLACEMENT_HEALTH_CHECK=check)
    assert configured.health_check is None or configured.health_check.argv
