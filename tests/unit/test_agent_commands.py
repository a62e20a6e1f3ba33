"""What the agent will and will not do to Slurm, whatever the command says: a resume undoes only
the drains of the incident that asks, and no text reaches Slurm with a control character in it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from hyperpod_recovery.models.commands import CommandEnvelope, DrainNodes, ResumeNodes, carries_owner_tag, owner_tag
from hyperpod_recovery.models.common import one_line
from hyperpod_recovery.models.workflow import CordonNodesInput
from hyperpod_recovery.steps.controller_commands import cordon_nodes
from hyperpod_recovery_agent.executor import CommandExecutor
from sandbox.slurm import SimulatedSlurm
from tests.fakes import T0, FakeController
from tests.unit.test_safety import _assessment
from tests.unit.test_steps import _request

incident_names = st.from_regex(r"\A[a-z][a-z0-9-]{0,20}\Z")


@settings(max_examples=200, deadline=None)
@given(first=incident_names, suffix=st.from_regex(r"\A[a-z0-9-]{1,6}\Z"))
def test_a_resume_never_undoes_a_drain_of_another_incident_whose_name_it_prefixes(first: str, suffix: str) -> None:
    # Given node A drained by incident "<first><suffix>" (drill-10) and node B by "<first>" (drill-1)
    slurm = SimulatedSlurm()
    slurm.add_node("a")
    slurm.add_node("b")
    executor = CommandExecutor(slurm, now=lambda: T0)
    longer = first + suffix
    executor.drain(DrainNodes(nodes=["a"], reason=f"{owner_tag(longer)} fault"))
    executor.drain(DrainNodes(nodes=["b"], reason=f"{owner_tag(first)} fault"))
    # When the shorter-named incident resumes both
    result = executor.resume(ResumeNodes(nodes=["a", "b"], owner_tag=owner_tag(first)))
    # Then only its own drain is undone
    assert (result.resumed, result.not_ours) == (["b"], ["a"])
    assert slurm.nodes["a"].drained and not slurm.nodes["b"].drained


@pytest.mark.parametrize("reason", ["hyperpod-recovery:drill-1", "hyperpod-recovery:drill-1 fault", "hyperpod-recovery:drill-1\tx"])
def test_the_owner_tag_is_the_reasons_first_word(reason: str) -> None:
    assert carries_owner_tag(reason, "hyperpod-recovery:drill-1")
    assert not carries_owner_tag(reason.replace("drill-1", "drill-10"), "hyperpod-recovery:drill-1")


@pytest.mark.parametrize("bad", ["\x00", "\n", "\r", "\x1b[2J", "\x7f"])
def test_a_drain_reason_with_a_control_character_is_refused_by_the_command_model(bad: str) -> None:
    with pytest.raises(ValidationError, match="control characters"):
        DrainNodes(nodes=["a"], reason=f"hyperpod-recovery:inc-1 fault{bad}text")


@settings(max_examples=200, deadline=None)
@given(text=st.text(min_size=1, max_size=600))
def test_cordon_turns_any_fault_text_into_a_drain_reason_slurm_accepts(text: str) -> None:
    # Given a trigger whose reason came from an outside event with anything in it
    request = _request(1)
    request = request.model_copy(update={"triggers": [request.triggers[0].model_copy(update={"reason": text})]})
    controller = FakeController()
    # When Cordon Nodes builds its command
    cordon_nodes(
        CordonNodesInput(execution_name="inc-1", task_token="t", request=request, assessment=_assessment(1)), controller=controller, now=T0
    )
    # Then the command is valid on both sides of the queue: one printable line, our tag first
    (envelope,) = controller.sent
    assert isinstance(envelope.command, DrainNodes)
    CommandEnvelope.model_validate_json(envelope.model_dump_json())
    assert envelope.command.reason == one_line(envelope.command.reason, 256)
    assert carries_owner_tag(envelope.command.reason, owner_tag("inc-1"))
