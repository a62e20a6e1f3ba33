"""The fault-injection suite (sandbox/fault_suite.py): every fault ends in a named terminal outcome,
no job is resubmitted twice, nothing is done past the cluster cap, and no job on a replaced node is
lost (it is resubmitted, or its incident escalated to a human who has its spec)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox.aws import REGION
from sandbox.clock import EPOCH
from sandbox.fault_suite import NAMED_OUTCOMES, SUITE, Fault, pages_per_incident, scenario_of, summary
from sandbox.hyperpod import HyperPodDouble
from sandbox.runner import DrillRunner
from sandbox.scenario import Scenario, expand_range

pytestmark = pytest.mark.sandbox


@pytest.mark.parametrize("fault", SUITE, ids=[f.name for f in SUITE])
def test_every_fault_ends_named_with_no_double_restart_and_nothing_past_the_cap(fault: Fault, tmp_path: Path) -> None:
    scenario = scenario_of(fault)
    report = DrillRunner(scenario, log_path=tmp_path / "lambda.log").run()
    figures = summary(fault, scenario, report)
    # A named terminal outcome for each incident, the one expected
    assert all(i["outcome"] in NAMED_OUTCOMES and i["execution_status"] != "RUNNING" for i in report["incidents"])
    if fault.ordered:
        assert tuple(figures["outcomes"]) == fault.expect
    else:
        assert sorted(figures["outcomes"]) == sorted(fault.expect)
    assert all(i["error"] for i in report["incidents"] if i["outcome"] in ("escalated", "capped"))
    # No job resubmitted twice, nothing past the cap, no incident paged twice
    assert figures["max per job"] <= 1 and figures["past the cap"] == 0
    # Never two live copies of one job; nothing a human read contradicts the incident's record
    assert report["second_copies"] == [], report["second_copies"]
    assert report["message_contradictions"] == [], report["message_contradictions"]
    assert figures["max pages per incident"] <= 1 and "?" not in pages_per_incident(report)
    # Every end settled what its incident held: no place under the cap, no claim, nothing held
    ledger = report["ledger_at_end"]
    assert (ledger["nodes_reserved"], ledger["open_claims"], ledger["incidents_holding"]) == ([], [], [])
    # And no state came near Step Functions' 256 KiB
    assert report["max_state_bytes"] < 64 * 1024, report["max_state_at"]
    # No job lost: a job on a replaced node was resubmitted, unless a human has its incident
    replaced = {r["hostname"] for r in report["replacements"]}
    resubmitted = {s["old_job_id"] for s in report["slurm"]["submissions"]}
    if "kubernetes_jobs" in report:  # EKS: a job object re-created from the scenario job's (by its name)
        names = {j["uid"]: j["name"] for j in report["kubernetes_jobs"]}
        made_from = {names.get(j["resubmitted_from"]) for j in report["kubernetes_jobs"] if "resubmitted_from" in j}
        resubmitted = {job.id for job in scenario.jobs if job.name in made_from}
    # (an escalated, aborted or failed incident hands its jobs to a human, with its nodes locked)
    handed_over = set().union(*[i["hostnames"] for i in report["incidents"] if i["outcome"] in ("escalated", "aborted", "failed")])
    # (EKS: an incident names its nodes as Kubernetes does, hyperpod-<instance>; a replacement, by the slot's hostname)
    handed_over |= {r["hostname"] for r in report["replacements"] if f"hyperpod-{r['old_node_id']}" in handed_over}
    for job in scenario.jobs:
        if _hostnames(scenario, job.nodes) & replaced - handed_over:
            assert job.id in resubmitted, f"job {job.id} on a replaced node was not resubmitted"
    # Every execution that ended failed, timed out or aborted reached Reconcile Execution, which
    # processed every end it was given
    assert set(report["intake"]["ends_reconciled"]) == {i["id"] for i in report["incidents"] if i["execution_status"] != "SUCCEEDED"}
    assert report["intake"]["reconcile_failures"] == 0
    # The agent never ran a command whose task was already dead (it would have found no one to answer: dropped)
    assert not [c for c in report["slurm"]["commands"] if c["status"] == "dropped"]


def test_an_agent_back_after_its_commands_timed_out_does_not_run_them(tmp_path: Path) -> None:
    # Given the controller agent is away until long after Cordon Nodes timed out and the incident escalated
    fault = next(f for f in SUITE if f.name == "agent-back-after-timeout")
    report = DrillRunner(scenario_of(fault), log_path=tmp_path / "lambda.log").run()
    # When it comes back and finds the cordon command on its queue
    # Then it does not drain: the command is expired, and no node is drained in Slurm
    assert [(c["type"], c["status"]) for c in report["slurm"]["commands"]] == [("cordon_nodes", "expired")]
    assert report["slurm"]["drained_nodes"] == {}


def test_an_aborted_incident_keeps_its_in_flight_place_only_until_the_rejoin_deadline(tmp_path: Path) -> None:
    # Given an incident stopped by an operator while its replacement provisions, on a cap of one node
    fault = next(f for f in SUITE if f.name == "aborted-mid-rejoin-then-new-faults")
    report = DrillRunner(scenario_of(fault), log_path=tmp_path / "lambda.log").run()
    aborted, capped, recovered = report["incidents"]
    # Then it ends aborted, recorded with where it stopped and what it had started, and a human is told
    assert aborted["outcome"] == "aborted" and "in Wait For Rejoin" in aborted["cause"]
    assert "replacement of" in aborted["summary"] and "still being replaced" in aborted["summary"]
    assert any("aborted" in n["subject"] for n in report["notifications"])
    # And its phases come from its history (the rejoin wait is provisioning, not overhead)
    assert [p["name"] for p in aborted["phases"]][:2] == ["detect", "assess"] and aborted["provisioning_seconds"] > 0
    # And a fault within the rejoin deadline is capped (the place is kept), one after it recovers
    assert (capped["outcome"], recovered["outcome"]) == ("capped", "recovered")


def _hostnames(scenario: Scenario, nodes: str) -> set[str]:
    """A job's Slurm node names, as the drill's HyperPod double names them."""
    double = HyperPodDouble(scenario.cluster, scenario.behaviour, REGION, EPOCH, now=lambda: 0.0)
    return {double.slurm_name(f"{group}:{index}") for group, index in expand_range(nodes)}
