"""One dispatch for the controller command protocol (models/command_dispatch.py): a handler per command
type, filled in by the Slurm agent and the EKS orchestrator; a type without one is one error."""

from __future__ import annotations

import typing
from dataclasses import fields
from datetime import UTC, datetime

import pytest

from hyperpod_recovery.adapters.eks_orchestrator import EKS_COMMANDS
from hyperpod_recovery.adapters.eks_orchestrator import HANDLERS as EKS_HANDLERS
from hyperpod_recovery.errors import InvalidCommand
from hyperpod_recovery.models.command_dispatch import CommandHandlers, command_reply
from hyperpod_recovery.models.commands import (
    COMMAND_TYPES,
    CommandEnvelope,
    ControllerCommand,
    CordonNodes,
    CordonResult,
    DrainNodes,
    DrainResult,
    RequeueJob,
)
from hyperpod_recovery_agent.executor import HANDLERS as SLURM_HANDLERS

AT = datetime(2026, 3, 14, 9, 5, tzinfo=UTC)


def _envelope(command: object) -> CommandEnvelope:
    return CommandEnvelope.model_validate(
        {
            "command_id": "c-1",
            "incident_id": "hpr-a",
            "execution_name": "hpr-a",
            "task_token": "token",
            "requested_at": AT.isoformat(),
            "command": command,
        }
    )


def test_the_table_has_a_field_for_every_command_type_of_the_protocol_and_no_other() -> None:
    # Given the command models of the protocol's union
    union = typing.get_args(typing.get_args(ControllerCommand)[0])
    declared = {model.model_fields["type"].default for model in union}
    # When the table's handler fields are read
    handler_fields = {f.name for f in fields(CommandHandlers) if f.name != "where"}
    # Then each command type has exactly one, named for it
    assert handler_fields == declared == COMMAND_TYPES


def test_the_slurm_agent_carries_out_every_command_type() -> None:
    assert set(SLURM_HANDLERS.types()) == COMMAND_TYPES


def test_the_eks_orchestrator_carries_out_all_but_requeue_and_its_check_names_them() -> None:
    assert set(EKS_HANDLERS.types()) == COMMAND_TYPES - {"requeue_job"}
    assert EKS_HANDLERS.types() == EKS_COMMANDS


def test_a_command_type_without_a_handler_is_an_invalid_command_naming_what_is_executed() -> None:
    # Given a table that carries out drains only
    table = CommandHandlers[object](where="here", drain_nodes=lambda _o, command, _i: DrainResult(drained=list(command.nodes)))
    # When a requeue is run through it
    with pytest.raises(InvalidCommand) as raised:
        table.run(object(), RequeueJob(job_id="42"))
    # Then the error names the command and what the table does execute
    assert str(raised.value) == "requeue_job is not carried out here (it executes drain_nodes)"


def test_a_command_is_carried_out_by_its_own_types_handler_with_the_incident() -> None:
    # Given a table whose drain handler says what it was given
    seen: list[tuple[object, str]] = []

    def drain(orchestrator: object, command: DrainNodes, incident_id: str) -> DrainResult:
        seen.append((orchestrator, incident_id))
        return DrainResult(drained=list(command.nodes))

    table = CommandHandlers[object](where="here", drain_nodes=drain, check=lambda *_: pytest.fail("the check's handler ran"))
    target = object()
    # When a drain is run
    result = table.run(target, DrainNodes(nodes=["ip-10-1-0-1"], reason="hyperpod-recovery:hpr-a"), "hpr-a")
    # Then the drain's handler answered, given the orchestrator and the incident
    assert result == DrainResult(drained=["ip-10-1-0-1"]) and seen == [(target, "hpr-a")]


def test_a_reply_echoes_the_envelope_and_marks_only_a_dry_run_cordon() -> None:
    # Given a dry run's cordon and a real one
    dry = _envelope(CordonNodes(nodes=["ip-10-1-0-1"], reason="hyperpod-recovery:hpr-a", drain=False).model_dump())
    real = _envelope(CordonNodes(nodes=["ip-10-1-0-1"], reason="hyperpod-recovery:hpr-a").model_dump())
    # When each is answered
    replies = [command_reply(e, CordonResult(), started=AT, completed=AT) for e in (dry, real)]
    # Then both echo the id and type, and only the dry run's says so
    assert [(r.command_id, r.type, r.dry_run) for r in replies] == [("c-1", "cordon_nodes", True), ("c-1", "cordon_nodes", False)]
