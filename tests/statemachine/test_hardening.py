"""Never a second outage, end to end: the whole class of each defect issue 15 found, through the real
state machines in the drill sandbox (bounded state, every end recorded, exactly once, time sanity,
input edges)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from tests.statemachine.conftest import mutating_slurm_commands, only_incident

pytestmark = pytest.mark.sandbox
Drill = Callable[..., dict[str, Any]]
STATE_BUDGET = 64 * 1024  # a quarter of Step Functions' 256 KiB


def test_a_64_node_storm_under_64_jobs_with_64_kib_scripts_resubmits_all_of_them_with_a_small_state(drill: Drill) -> None:
    # Given 64 nodes failing within 5 s under 64 single-node jobs whose batch scripts are 64 KiB each
    report = drill("rack-storm-64-jobs")
    # Then one execution replaces them all and resubmits every job exactly once
    incident = only_incident(report)
    assert incident["outcome"] == "recovered" and len(report["replacements"]) == 64
    per_job = Counter(s["old_job_id"] for s in report["slurm"]["submissions"])
    assert len(per_job) == 64 and set(per_job.values()) == {1}
    # And no state input or output came near the limit: no script, no job spec travelled through it
    assert report["max_state_bytes"] < STATE_BUDGET, report["max_state_at"]
    # And every resubmission ran as the job's owner (the simulated Slurm records who ran sbatch)
    assert report["ledger_at_end"] == {"nodes_reserved": [], "open_claims": [], "incidents_holding": [], "locks_held": []}


@pytest.mark.parametrize("raw_input", ["i-0391f86fa0fe0d465", [1, 2], 42])
def test_a_start_input_that_is_not_an_object_is_a_named_rejection(drill: Drill, raw_input: Any) -> None:
    report = drill("invalid-start-input", faults=[{"at": 60, "kind": "drill", "raw_input": raw_input}])
    incident = only_incident(report)
    assert (incident["outcome"], incident["error"], incident["execution_status"]) == ("rejected", "InvalidRecoveryRequest", "FAILED")
    assert "expected a JSON object" in incident["cause"]


def test_a_string_false_never_arms_a_drill(drill: Drill) -> None:
    request = {"cluster": "llm-train", "node_ids": ["i-0391f86fa0fe0d465"], "dry_run": "false"}
    report = drill("invalid-start-input", faults=[{"at": 60, "kind": "drill", "raw_input": request}], settings={"dry_run": False})
    incident = only_incident(report)
    assert (incident["outcome"], incident["error"]) == ("rejected", "InvalidRecoveryRequest") and "dry_run" in incident["cause"]
    assert report["replacements"] == [] and mutating_slurm_commands(report) == []


def test_replayed_and_future_events_are_stale_recorded_and_change_nothing(drill: Drill) -> None:
    # Given a health event replayed three days late, and an alarm stamped an hour in the future
    report = drill("stale-event")
    # Then neither is acted on: both incidents end stale, with the reason, and a human is told
    assert [(i["outcome"], i["error"]) for i in report["incidents"]] == [("stale", "StaleEvent"), ("stale", "StaleEvent")]
    assert "3.0 days old" in report["incidents"][0]["cause"] or "3.0 days old" in report["incidents"][1]["cause"]
    assert any("in the future" in i["cause"] for i in report["incidents"])
    assert report["replacements"] == [] and mutating_slurm_commands(report) == []
    assert len(report["notifications"]) == 2 and all("stale" in n["subject"] for n in report["notifications"])


def test_a_job_that_cannot_be_resubmitted_as_it_was_is_named_and_the_others_are_resubmitted(drill: Drill) -> None:
    # Given a node failing under two jobs, one of them an salloc allocation (no batch script)
    jobs = [
        {
            "id": "1001",
            "name": "llama-70b-pretrain",
            "nodes": "workers:0-15",
            "checkpoint_uri": "s3://llm-train-checkpoints/llama-70b-pretrain",
            "checkpoints": [{"step": 1000}],
        },
        {
            "id": "1002",
            "name": "interactive",
            "nodes": "workers:7",
            "checkpoint_uri": "s3://llm-train-checkpoints/interactive",
            "checkpoints": [{"step": 500}],
            "batch": False,
        },
    ]
    report = drill("default", jobs=jobs)
    incident = only_incident(report)
    # Then the batch job is resubmitted, the allocation is named unresumable before anything was sent,
    # and the incident escalates saying exactly that (nobody restarts 1001 a second time)
    assert [s["old_job_id"] for s in report["slurm"]["submissions"]] == ["1001"]
    assert [c for c in report["slurm"]["commands"] if c["type"] == "resubmit_job"] == [
        c for c in report["slurm"]["commands"] if c["type"] == "resubmit_job" and c["status"] == "succeeded"
    ]
    assert (incident["outcome"], incident["error"]) == ("escalated", "NoVerifiedCheckpoint")
    assert "1002" in incident["cause"] and "salloc" in incident["cause"]
    assert re.search(r"job 1001 \([^)]*\) resubmitted as job \d+", incident["summary"])
    assert report["ledger_at_end"]["open_claims"] == [] and report["ledger_at_end"]["nodes_reserved"] == []
