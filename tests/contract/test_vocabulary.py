"""The incident vocabulary (hyperpod_recovery/vocabulary.py) is defined once, and every reader knows
every word of it: a new phase or outcome that one reader forgot fails here, not in a drill report."""

from __future__ import annotations

import inspect
from datetime import UTC, datetime
from typing import get_args

import pytest
from pydantic import ValidationError

from hyperpod_recovery import errors
from hyperpod_recovery.domain.messages.advice import ERROR_MEANING as NEXT_STEPS
from hyperpod_recovery.domain.messages.notification import HEADLINES
from hyperpod_recovery.domain.record.phases import PHASE_OF_STATE
from hyperpod_recovery.models.node_recovery import SafetyDecision
from hyperpod_recovery.models.records import Phase
from hyperpod_recovery.vocabulary import ORCHESTRATOR_PHASES, OUTCOMES, PHASES
from sandbox.html_report import OUTCOME_COLORS, PHASE_COLORS

ERROR_CLASSES = {name for name, cls in inspect.getmembers(errors, inspect.isclass) if issubclass(cls, errors.RecoveryError)}
T = datetime(2026, 3, 14, tzinfo=UTC)


def test_every_outcome_has_a_headline_and_a_colour() -> None:
    assert set(HEADLINES) == set(OUTCOMES)
    assert set(OUTCOME_COLORS) == set(OUTCOMES)


def test_every_phase_a_step_records_has_a_colour_and_every_state_maps_to_a_phase() -> None:
    recorded = set(PHASES) - {"other"}  # "other": a state no phase names, read back from a history only
    assert set(PHASE_COLORS) == recorded
    assert set(PHASE_OF_STATE.values()) <= recorded
    assert set(ORCHESTRATOR_PHASES) <= recorded


def test_a_stored_phase_this_version_does_not_know_reads_as_other_and_nothing_else_changes() -> None:
    # Given a record written by another version (a newer one, rolled back) naming a phase unknown here
    stored = {"name": "drain_pods", "start": T.isoformat(), "end": T.isoformat()}
    # When it is read, Then the incident stays readable and the phase is "other"
    assert Phase.model_validate(stored).name == "other"
    assert Phase.model_validate({**stored, "name": "cordon"}).name == "cordon"
    with pytest.raises(ValidationError):  # a phase name is text: anything else is still refused
        Phase.model_validate({**stored, "name": 7})


def test_error_names_records_carry_are_our_error_classes() -> None:
    # Given every error name a record can carry from a literal type or the next-step table
    optional = get_args(SafetyDecision.model_fields["error"].annotation)  # (Literal[...], None)
    from_safety = {name for literal in optional for name in get_args(literal)}
    from_table = set(NEXT_STEPS) - {"States.Timeout", "States.HeartbeatTimeout"}  # Step Functions' own names for a task's timeouts
    # Then each is a class in errors.py: a renamed class cannot leave a record naming nothing
    assert from_safety | from_table <= ERROR_CLASSES
