"""NodeRecovery resubmits a job at one of two points (ResumePolicy): right after the replacement
starts (Resubmit Jobs Now) or once the nodes are back (Resubmit Jobs). These tests hold the two
points to one behaviour and keep what depends on "the nodes are back" after the wait."""

from __future__ import annotations

import copy
import json
from typing import Any

from hyperpod_recovery.domain.record.reconcile import NODES_BACK_STATES, NODES_OUT_AGAIN_STATES
from tests.conftest import ROOT

NODE = json.loads((ROOT / "statemachines" / "node_recovery.asl.json").read_text())
STATES: dict[str, Any] = NODE["States"]
RENAMED = {"Resubmit Job Now": "Resubmit Job", "Note Resubmit Now Failure": "Note Resubmit Failure"}


def _successors(name: str) -> set[str]:
    state = STATES[name]
    targets = {state.get("Next"), state.get("Default")}
    targets |= {c.get("Next") for c in state.get("Choices", [])} | {c.get("Next") for c in state.get("Catch", [])}
    return {t for t in targets if t}


def _reachable(start: str, avoiding: set[str]) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        name = todo.pop()
        if name in seen or name in avoiding:
            continue
        seen.add(name)
        todo += _successors(name)
    return seen


def test_given_the_two_resubmit_points_then_they_resubmit_alike() -> None:
    # Given Resubmit Jobs Now with its inner states named as Resubmit Jobs names them
    now = copy.deepcopy(STATES["Resubmit Jobs Now"])
    later = copy.deepcopy(STATES["Resubmit Jobs"])
    inner = now["ItemProcessor"]
    inner["StartAt"] = RENAMED[inner["StartAt"]]
    inner["States"] = {RENAMED[name]: state for name, state in inner["States"].items()}
    for state in inner["States"].values():
        for catch in state.get("Catch", []):
            catch["Next"] = RENAMED[catch["Next"]]
    # Then they differ only in which jobs they take, where their results go, what follows and their words
    for state in (now, later):
        for key in ("ItemsPath", "ResultPath", "Next", "Comment"):
            state.pop(key)
    assert now == later
    assert (STATES["Resubmit Jobs Now"]["ItemsPath"], STATES["Resubmit Jobs Now"]["ResultPath"]) == (
        "$.checkpoints.resume_now",
        "$.resubmissions_now",
    )
    assert (STATES["Resubmit Jobs"]["ItemsPath"], STATES["Resubmit Jobs"]["ResultPath"]) == ("$.checkpoints.resumable", "$.resubmissions")


def test_given_the_workflow_then_jobs_resubmitted_now_come_before_the_wait_and_the_rest_after_the_resume() -> None:
    before_wait = _reachable("Check Replacement", avoiding={"Wait For Rejoin"})
    assert {"Find Newest Checkpoint", "Resubmit Jobs Now"} <= before_wait
    assert "Resubmit Jobs" not in before_wait and "Resume Nodes" not in before_wait
    # And Find Newest Checkpoint tells the step this workflow can resubmit now
    assert STATES["Find Newest Checkpoint"]["Parameters"]["resume_now_allowed"] is True
    # And the jobs planned for after the rejoin wait for the health gate: once it passed, or once
    # a failed gate's second replacement was tried and checked in turn
    after_resume = _reachable("Resume Nodes", avoiding={"Wait For Rejoin", "Resubmit Jobs", "Escalate Incident"})
    assert after_resume == {"Resume Nodes", "Check Health Gate", "Replace Unhealthy Nodes", "Check Unhealthy Replaced"}
    assert {STATES["Check Health Gate"]["Default"], STATES["Check Unhealthy Replaced"]["Default"]} == {"Resubmit Jobs"}
    assert STATES["Check Unhealthy Replaced"]["Choices"][0]["Next"] == "Wait For Rejoin"


def test_given_a_failed_health_gate_then_a_node_is_replaced_again_at_most_once() -> None:
    # Given the choice after Resume Nodes
    (rule,) = STATES["Check Health Gate"]["Choices"]
    # Then it replaces again only when a node failed the gate and no node was replaced again yet
    # (Replace Unhealthy Nodes sets the watch's first_gate, whatever it did)
    assert rule == {
        "And": [
            {"Variable": "$.resume.result.unhealthy", "IsPresent": True},
            {"Variable": "$.replacement.watch.first_gate", "IsPresent": False},
        ],
        "Next": "Replace Unhealthy Nodes",
    }
    assert STATES["Replace Unhealthy Nodes"]["ResultPath"] == "$.replacement.watch"


def test_given_the_states_that_prove_the_nodes_are_back_then_none_is_reachable_without_the_rejoin_check() -> None:
    # Reconcile Execution keeps an aborted incident's replaced nodes reserved unless its history
    # entered one of these: each must lie past Check Rejoined's "done" branch.
    without_rejoin = _reachable(NODE["StartAt"], avoiding={"Check Rejoined"})
    assert NODES_BACK_STATES and not (NODES_BACK_STATES & without_rejoin)
    assert _reachable("Check Rejoined", avoiding=set()) >= NODES_BACK_STATES
    # And a node replaced again is out of service until the next rejoin check: the state that does
    # it is named for Reconcile Execution, and leads back to the wait
    assert {"Replace Unhealthy Nodes"} == NODES_OUT_AGAIN_STATES
    assert "Wait For Rejoin" in _reachable("Replace Unhealthy Nodes", avoiding={"Check Rejoined"})


def _paths(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in ([v] if k.endswith(".$") and isinstance(v, str) else _paths(v))]
    if isinstance(value, list):
        return [p for v in value for p in _paths(v)]
    return []


def test_given_every_path_the_workflow_reads_from_the_cordons_answer_then_every_answer_has_it() -> None:
    # Given the fields of Cordon Nodes' answer the workflow reads (Find Newest Checkpoint, Forget Job
    # Details: a Pass state, which cannot catch a missing path: the execution would fail unrecorded)
    prefix = "$.cordon.result."
    read = {p.removeprefix(prefix) for s in STATES.values() for p in _paths(s.get("Parameters", {})) if p.startswith(prefix)}
    assert read == {"jobs", "omitted", "drained", "already_drained"}
    # Then an answer always carries them, as the agent sends it (live or a dry run's), empty or not
    from hyperpod_recovery.models.commands import CommandReply, CordonResult

    for result in (CordonResult(), CordonResult(drained=["ip-10-1-0-7"], jobs=[], omitted=0)):
        reply = CommandReply[CordonResult](requested_at="2026-01-01T00:00:00Z", completed_at="2026-01-01T00:00:00Z", result=result)
        sent = json.loads(reply.model_dump_json())["result"]
        assert read <= set(sent), sorted(read - set(sent))
