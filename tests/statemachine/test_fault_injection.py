"""The fault-injection suite (sandbox/fault_suite.py): every fault ends in a named terminal outcome,
no job is resubmitted twice, nothing is done past the cluster cap, and no job on a replaced node is
lost (it is resubmitted, or its incident escalated to a human who has its spec)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox.aws import REGION
from sandbox.clock import EPOCH
from sandbox.fault_suite import NAMED_OUTCOMES, SUITE, Fault, scenario_of, summary
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
    assert tuple(figures["outcomes"]) == fault.expect
    assert all(i["error"] for i in report["incidents"] if i["outcome"] in ("escalated", "capped"))
    # No job resubmitted twice, nothing past the cap
    assert figures["max per job"] <= 1 and figures["past the cap"] == 0
    # Every end settled what its incident held: no place under the cap, no claim, nothing held
    ledger = report["ledger_at_end"]
    assert (ledger["nodes_reserved"], ledger["open_claims"], ledger["incidents_holding"]) == ([], [], [])
    # And no state came near Step Functions' 256 KiB
    assert report["max_state_bytes"] < 64 * 1024, report["max_state_at"]
    # No job lost: a job on a replaced node was resubmitted, unless a human has its incident
    replaced = {r["hostname"] for r in report["replacements"]}
    resubmitted = {s["old_job_id"] for s in report["slurm"]["submissions"]}
    escalated = any(i["outcome"] == "escalated" for i in report["incidents"])
    for job in scenario.jobs:
        if _hostnames(scenario, job.nodes) & replaced and not escalated:
            assert job.id in resubmitted, f"job {job.id} on a replaced node was not resubmitted"


def _hostnames(scenario: Scenario, nodes: str) -> set[str]:
    """A job's Slurm node names, as the drill's HyperPod double names them."""
    double = HyperPodDouble(scenario.cluster, scenario.behaviour, REGION, EPOCH, now=lambda: 0.0)
    return {double.slurm_name(f"{group}:{index}") for group, index in expand_range(nodes)}
