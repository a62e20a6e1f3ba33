"""The workflows against Step Functions' documented limits, not moto's (docs/decisions.md, 2026-11-23), over
the whole space the template's parameters accept: a Standard execution's history at most 25,000 events;
the only loops are the bounded waits; JobRecovery's nested NodeRecovery must not time out before the child
can end; the sweep of ended executions reads back past the longest run."""

from __future__ import annotations

import json
import math
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from hyperpod_recovery.config import Settings
from hyperpod_recovery.domain.nodes.cadence import next_wait_seconds
from hyperpod_recovery.domain.nodes.rejoin import MAX_BOOT_READINGS
from hyperpod_recovery.domain.planned_swap.wait import MAX_CHECKS
from hyperpod_recovery.domain.policy.limits import (
    EXECUTION_HISTORY_EVENTS,
    MAX_EVENT_WAKES,
    MAX_GATE_REPLACEMENTS,
    MAX_REJOIN_CHECKS,
    NODE_RECOVERY_OVERHEAD_SECONDS,
    execution_time_bound_seconds,
    node_recovery_time_bound_seconds,
    rejoin_wait_bounds,
    rejoin_window_seconds,
)
from hyperpod_recovery.models.common import MAX_JOBS_PER_INCIDENT
from hyperpod_recovery.models.node_recovery import MAX_GROW_BACK_CHECKS, MAX_SHRUNK_JOBS_PER_INCIDENT, CheckpointPlan
from tests.conftest import ROOT
from tests.contract.aws_limits_support import PARAMETERS, RESOURCES, TEMPLATE, stack_resolver

ASL = {path.name.removesuffix(".asl.json"): json.loads(path.read_text()) for path in (ROOT / "statemachines").glob("*.asl.json")}


# --- Step Functions: history and time bounds ---------------------------------------------------
def _edges(state: dict[str, Any]) -> set[str]:
    targets = {state.get("Next"), state.get("Default")}
    targets |= {c.get("Next") for c in state.get("Choices", [])}
    targets |= {c.get("Next") for c in state.get("Catch", [])}
    return {t for t in targets if t}


def _loops(states: dict[str, Any]) -> list[set[str]]:
    """The state machine's cycles, as strongly connected components (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(name: str) -> None:
        index[name] = low[name] = len(index)
        stack.append(name)
        for target in _edges(states[name]):
            if target not in index:
                visit(target)
                low[name] = min(low[name], low[target])
            elif target in stack:
                low[name] = min(low[name], index[target])
        if low[name] == index[name]:
            component = set()
            while True:
                member = stack.pop()
                component.add(member)
                if member == name:
                    break
            if len(component) > 1 or name in _edges(states[name]):
                found.append(component)

    for name in states:
        if name not in index:
            visit(name)
    return found


def _retries(state: dict[str, Any]) -> int:
    return sum(r.get("MaxAttempts", 3) for r in state.get("Retry", []))


def _visit_events(state: dict[str, Any]) -> int:
    """The most history events one visit of a state writes, every retry included (event types of the
    Step Functions history reference: a Lambda task writes Entered, Scheduled, Started, Succeeded,
    Exited and Scheduled, Started, Failed per retry; a service integration adds Submitted)."""
    kind = state["Type"]
    if kind == "Task":
        integration = state["Resource"].startswith("arn:aws:states:::")
        per_attempt = 4 if integration else 3
        return 2 + per_attempt + per_attempt * _retries(state)
    if kind == "Map":
        return 4 + MAX_JOBS_PER_INCIDENT * _item_events(state)
    return 2


def _item_events(state: dict[str, Any]) -> int:
    return 2 + sum(_visit_events(s) for s in state["ItemProcessor"]["States"].values())


# Maps over the lists of one CheckpointPlan (Resubmit Jobs Now, Resubmit Jobs): each job is in one
# list, and the plan holds at most MAX_JOBS_PER_INCIDENT jobs in all, so they share that many items.
SHARED_ITEMS_PREFIX = "$.checkpoints."


def _sharing_maps(states: dict[str, Any]) -> set[str]:
    return {name for name, s in states.items() if s["Type"] == "Map" and s["ItemsPath"].startswith(SHARED_ITEMS_PREFIX)}


def test_given_the_maps_over_a_checkpoint_plan_then_the_plan_bounds_their_items_together() -> None:
    # Given the NodeRecovery Maps that share the item budget
    maps = _sharing_maps(ASL["node_recovery"]["States"])
    lists = {ASL["node_recovery"]["States"][name]["ItemsPath"].removeprefix(SHARED_ITEMS_PREFIX) for name in maps}
    assert maps == {"Resubmit Jobs Now", "Resubmit Jobs"} and lists == {"resume_now", "resumable"}
    # Then a plan with more jobs in those lists together than one incident carries does not validate
    plan = {"job": {"job_id": "1", "name": "j"}, "checkpoint": {"uri": "s3://bucket/p/step-000000001/", "step": 1}}
    half = MAX_JOBS_PER_INCIDENT // 2
    with pytest.raises(ValidationError):
        CheckpointPlan.model_validate({"at": "2026-01-01T00:00:00Z", "resume_now": [plan] * (half + 1), "resumable": [plan] * half})


# States of a loop that do not run on every pass but a bounded number of times per execution: Read
# Boot Times runs at most MAX_BOOT_READINGS times (observe_rejoin budgets them), and each reading is
# followed by one more pass through the loop's other states but its wait (Check Rejoin, Check Rejoined).
# Resume Nodes and its Check Health Gate run once per rejoin, and a failed health gate leads to at
# most MAX_GATE_REPLACEMENTS more (Replace Unhealthy Nodes, Check Unhealthy Replaced).
# Grow Back Job runs once per shrunk job (at most MAX_SHRUNK_JOBS_PER_INCIDENT), each followed by one
# more pass of Check Shrunk Jobs and its Choice.
BOUNDED_LOOP_STATES = {
    "Read Boot Times": MAX_BOOT_READINGS,
    "Resume Nodes": 1 + MAX_GATE_REPLACEMENTS,
    "Check Health Gate": 1 + MAX_GATE_REPLACEMENTS,
    "Replace Unhealthy Nodes": MAX_GATE_REPLACEMENTS,
    "Check Unhealthy Replaced": MAX_GATE_REPLACEMENTS,
    "Grow Back Job": MAX_SHRUNK_JOBS_PER_INCIDENT,
}


# How many passes each loop makes at most, by the wait that paces it: the wait for rejoin's checks
# (rejoin_wait_bounds), and the grow-back's checks (domain/elastic/grow_back.py stops at MAX_GROW_BACK_CHECKS).
LOOP_PASSES = {
    "Wait For Rejoin": MAX_REJOIN_CHECKS + 1,
    "Wait For Other Recovery": MAX_REJOIN_CHECKS + 1,
    "Wait For Next Checkpoint": MAX_GROW_BACK_CHECKS,
    "Wait For Checkpoint Commit": MAX_CHECKS,
}


def _is_wait(state: dict[str, Any]) -> bool:
    """A Wait state, or a task that waits for its token at most its TimeoutSecondsPath (Wait For
    Rejoin: a Cluster Event may complete it early, its timeout is the fallback)."""
    return state["Type"] == "Wait" or (
        state["Type"] == "Task" and "TimeoutSecondsPath" in state and state["Resource"].endswith(".waitForTaskToken")
    )


def _worst_case_events(definition: dict[str, Any]) -> int:
    """Every state visited once, each loop MAX_REJOIN_CHECKS + 1 times, plus MAX_EVENT_WAKES passes
    a Cluster Event cut short (its bounded states as often as their bound, with the extra pass each
    adds), plus the execution's own start and end: an upper bound of any execution's history."""
    states = definition["States"]
    total = 2
    in_loop: set[str] = set()
    for loop in _loops(states):
        bounded = loop & set(BOUNDED_LOOP_STATES)
        every_pass = loop - bounded
        woken = MAX_EVENT_WAKES if any(_is_wait(states[name]) and states[name]["Type"] == "Task" for name in loop) else 0
        passes = max(LOOP_PASSES[name] for name in loop if _is_wait(states[name]))
        total += (passes + woken) * sum(_visit_events(states[name]) for name in every_pass)
        extra_pass = sum(_visit_events(states[name]) for name in every_pass if not _is_wait(states[name]))
        total += sum(BOUNDED_LOOP_STATES[name] * (_visit_events(states[name]) + extra_pass) for name in bounded)
        in_loop |= loop
    sharing = _sharing_maps(states) - in_loop
    total += sum(4 for _ in sharing) + MAX_JOBS_PER_INCIDENT * max((_item_events(states[name]) for name in sharing), default=0)
    return total + sum(_visit_events(s) for name, s in states.items() if name not in in_loop | sharing)


@pytest.mark.parametrize("workflow", sorted(ASL))
def test_given_the_longest_possible_execution_then_its_history_stays_within_25000_events(workflow: str) -> None:
    # Given a workflow, its loops taken as often as the wait bounds allow, every retry taken
    events = _worst_case_events(ASL[workflow])
    # Then its history stays below Step Functions' 25,000 events (the execution fails past it)
    assert events <= EXECUTION_HISTORY_EVENTS, f"{workflow}: up to {events} events"


def test_given_the_workflows_then_their_only_loops_are_the_bounded_waits() -> None:
    # The bound above holds only for loops whose checks are counted by rejoin_wait_bounds.
    loops = {workflow: [sorted(loop) for loop in _loops(d["States"])] for workflow, d in ASL.items()}
    waits = {
        workflow: {name for loop in found for name in loop if _is_wait(ASL[workflow]["States"][name])} for workflow, found in loops.items()
    }
    expected = {
        "node_recovery": {"Wait For Rejoin", "Wait For Next Checkpoint"},
        "job_recovery": {"Wait For Other Recovery"},
        "agent_check": set(),
        "planned_swap": {"Wait For Checkpoint Commit"},
    }
    assert waits == expected, loops
    # And each loop has exactly one wait, whose passes LOOP_PASSES bounds
    for workflow, found in loops.items():
        for loop in found:
            assert len([n for n in loop if _is_wait(ASL[workflow]["States"][n])]) == 1, loop
    assert loops["agent_check"] == []


def _parameter_space() -> st.SearchStrategy[dict[str, int]]:
    numbers = {name: spec for name, spec in PARAMETERS.items() if spec["Type"] == "Number"}
    return st.fixed_dictionaries(
        {name: st.integers(int(spec.get("MinValue", 0)), int(spec.get("MaxValue", 10**6))) for name, spec in numbers.items()}
    )


def _settings(values: dict[str, Any]) -> Settings:
    resolver = stack_resolver(
        "hpr", {"ClusterName": "llm-train", "ClusterArn": "arn:aws:sagemaker:us-west-2:111122223333:cluster/a1b2c3d4e5f6"}
    )
    resolver.parameters.update({name: str(value) for name, value in values.items()})
    environment = resolver.resolve(TEMPLATE["Globals"]["Function"]["Environment"]["Variables"])
    return Settings.from_environ({k: str(v) for k, v in environment.items()})


@settings(max_examples=300, deadline=None)
@given(values=_parameter_space(), paced=st.booleans(), announced=st.booleans())
def test_given_any_accepted_parameters_then_every_function_starts_and_the_waits_stay_within_budget(
    values: dict[str, int], paced: bool, announced: bool
) -> None:
    # Given any combination of numbers the template's parameters accept
    configured = _settings(values)
    # When the rejoin checks run as often as the derived waits allow, over the longest window (all
    # its passes), paced by the replacements' typical duration or not, announced by events or not
    window = rejoin_window_seconds(configured.reboot_deadline_seconds, configured.rejoin_deadline_seconds)
    first, longest = configured.rejoin_waits
    expected = configured.expected_replacement_seconds if paced else None
    elapsed, checks = 0, 0
    while elapsed < window:
        expected_in = expected - elapsed if expected is not None else None
        elapsed += next_wait_seconds(checks, first, longest, window - elapsed, expected_in, announced=announced)
        checks += 1
    # Then the functions' settings are valid (no cold start refuses them) and the checks stay counted
    assert checks <= MAX_REJOIN_CHECKS + 1, (checks, first, longest, window)
    backoff, max_backoff = configured.job_restart_backoffs
    assert 0 <= backoff <= max_backoff
    # And no lock, cap place or claim can lapse under a NodeRecovery still running
    bound = node_recovery_time_bound_seconds(
        configured.reboot_deadline_seconds, configured.rejoin_deadline_seconds, configured.elastic_grow_back_grace_seconds
    )
    assert configured.lock_ttl_seconds_in_effect >= bound


@settings(max_examples=300, deadline=None)
@given(poll=st.integers(5, 3600), longest=st.integers(5, 3600), window=st.integers(60, 2 * 86_400))
def test_given_any_poll_and_window_then_the_derived_waits_cover_it_in_bounded_checks(poll: int, longest: int, window: int) -> None:
    first, maximum = rejoin_wait_bounds(poll, longest, window)
    assert first >= poll and maximum >= first >= math.ceil(window / MAX_REJOIN_CHECKS)
    # And the parameters are kept as they are when they are already within budget
    if poll >= math.ceil(window / MAX_REJOIN_CHECKS):
        assert first == poll and maximum == max(poll, longest)


def _worst_case_seconds(definition: dict[str, Any], loops: set[str]) -> int:
    """The longest the non-waiting part of a workflow can take: every Task at its timeout on every
    attempt, plus each retry's longest backoff; Map items in waves of MaxConcurrency."""

    def task_seconds(state: dict[str, Any], items: int = MAX_JOBS_PER_INCIDENT) -> int:
        if state["Type"] == "Map":
            inner = sum(task_seconds(s) for s in state["ItemProcessor"]["States"].values())
            return math.ceil(items / state.get("MaxConcurrency", 1)) * inner
        if state["Type"] != "Task":
            return 0
        # A Lambda step's attempt lasts at most its function's timeout. A callback step's retried
        # errors all come from its Lambda putting the command on the queue (ControllerChannelError,
        # Lambda.*), before the wait for the agent starts: it waits TimeoutSeconds once.
        if state["Resource"].startswith("arn:aws:states:::dynamodb:"):  # a service call of its own (Recall Outcome)
            attempt = state["TimeoutSeconds"]
        else:
            function = state.get("Parameters", {}).get("FunctionName", state["Resource"])
            logical = re.fullmatch(r"\$\{(\w+)Arn\}", function)
            assert logical, function
            attempt = int(RESOURCES[logical[1]]["Properties"].get("Timeout", TEMPLATE["Globals"]["Function"]["Timeout"]))
        waited = state.get("TimeoutSeconds", 0) if state["Resource"].endswith(".waitForTaskToken") else 0
        retries = state.get("Retry", [])
        backoff = sum(r.get("MaxAttempts", 3) * r.get("MaxDelaySeconds", 0) for r in retries)
        return waited + attempt * (1 + _retries(state)) + backoff

    states = definition["States"]
    sharing = _sharing_maps(states) - loops
    # Maps sharing the plan's jobs: all of them in the slowest, plus one more wave in each other
    # (a part-filled wave in each Map takes as long as a full one).
    shared = [(task_seconds(states[name]), task_seconds(states[name], items=1)) for name in sharing]
    slowest_shared = max((whole for whole, _ in shared), default=0) + sum(wave for _, wave in shared) if shared else 0
    return slowest_shared + sum(task_seconds(s) for name, s in states.items() if name not in loops | sharing)


def test_given_the_node_workflow_then_the_nested_timeout_covers_its_longest_run() -> None:
    # Given NodeRecovery: its steps outside the wait for rejoin at their slowest, plus one check past
    # the deadline
    node = ASL["node_recovery"]
    loop = set().union(*_loops(node["States"]))
    slowest = _worst_case_seconds(node, loop) + sum(_worst_case_seconds({"States": {n: node["States"][n]}}, set()) for n in loop)
    # And the grow-back's passes past the first (counted above): every check at its slowest, and every
    # shrunk job's grow-back (its waits are the grace, outside the overhead: node_recovery_time_bound_seconds)
    check = _worst_case_seconds({"States": {"Check Shrunk Jobs": node["States"]["Check Shrunk Jobs"]}}, set())
    grow = _worst_case_seconds({"States": {"Grow Back Job": node["States"]["Grow Back Job"]}}, set())
    slowest += (MAX_GROW_BACK_CHECKS - 1) * check + (MAX_SHRUNK_JOBS_PER_INCIDENT - 1) * grow
    # And the Resume Nodes of each failed health gate, outside every deadline (the replacement's
    # own deadline starts at Replace Unhealthy Nodes, counted above once per execution)
    slowest += MAX_GATE_REPLACEMENTS * _worst_case_seconds({"States": {"Resume Nodes": node["States"]["Resume Nodes"]}}, set())
    assert BOUNDED_LOOP_STATES["Replace Unhealthy Nodes"] == MAX_GATE_REPLACEMENTS == 1
    # Then the overhead JobRecovery allows on top of the deadlines covers it
    print(f"NodeRecovery outside its deadlines, at worst: {slowest} s")
    assert slowest <= NODE_RECOVERY_OVERHEAD_SECONDS, slowest
    # And Recover Nodes waits for the child as long as that, whatever the deadlines
    recover = ASL["job_recovery"]["States"]["Recover Nodes"]
    assert recover["TimeoutSecondsPath"] == "$.classification.node_timeout_seconds" and "TimeoutSeconds" not in recover
    for reboot, rejoin in ((60, 60), (900, 2700), (86_400, 86_400)):
        assert node_recovery_time_bound_seconds(reboot, rejoin) >= reboot + (1 + MAX_GATE_REPLACEMENTS) * rejoin + slowest


def _check_other_recovery_margin() -> int:
    """How long past the holder's rejoin window Check Other Recovery waits (its handler's MARGIN_SECONDS)."""
    found = re.search(r"^MARGIN_SECONDS = (\d+)$", (ROOT / "functions" / "check_other_recovery" / "app.py").read_text(), re.MULTILINE)
    assert found
    return int(found[1])


def test_given_the_job_workflow_then_the_sweeps_lookback_covers_its_longest_run() -> None:
    # Given JobRecovery: its own steps at their slowest (Recover Nodes and the waits aside)...
    job = ASL["job_recovery"]["States"]
    loop = set().union(*_loops(job))
    own = _worst_case_seconds({"States": {n: s for n, s in job.items() if n != "Recover Nodes"}}, loop)
    own += sum(_worst_case_seconds({"States": {n: job[n]}}, set()) for n in loop)
    print(f"JobRecovery's own steps, at worst: {own} s")
    for reboot, rejoin, backoff, grace in ((60, 60, 0, 0), (900, 2700, 900, 1800), (86_400, 86_400, 86_400, 86_400)):
        # ...plus its nested NodeRecovery, the wait for another incident holding its nodes (as long as
        # that incident's rejoin window and grow-back, and a margin), and its longest restart backoff
        node = node_recovery_time_bound_seconds(reboot, rejoin, grace)
        other = rejoin_window_seconds(reboot, rejoin) + 2 * grace + _check_other_recovery_margin()
        # Then the sweep of ended executions reads back far enough to list any execution that may have just ended
        assert own + node + other + backoff <= execution_time_bound_seconds(reboot, rejoin, backoff, grace)
        assert node <= execution_time_bound_seconds(reboot, rejoin, backoff, grace)
