"""The drill report leads with the jobs (terminal and HTML), keeps a storm's lines bounded, draws
only the phases it uses, and shows a dry run's "would do" (sandbox/report/, sandbox/html_report.py)."""

from __future__ import annotations

import re
from typing import Any

from sandbox.html_report import OUTCOME_COLORS, PHASE_COLORS, render_html
from sandbox.report import bounded, condensed_timeline, job_line, jobs_lines


def _job(**changes: Any) -> dict[str, Any]:
    job = {
        "job": "2201",
        "label": "job 2201 (llama)",
        "fault_at": 60.0,
        "running_as": "2202",
        "copy": "job 2202",
        "state": "RUNNING",
        "running_again_at": 67.4,
        "pending_since": None,
        "on": "spare nodes",
        "checkpoint_step": 600,
        "fate": "resubmitted",
        "reason": "",
        "down": [[60.0, 67.4]],
        "downtime_seconds": 7.4,
    }
    return job | changes


def test_given_a_job_running_again_then_its_line_says_how_long_it_was_down_from_when_to_when_as_what_where_and_from_which_step() -> None:
    assert job_line(_job()) == (
        "job 2201 (llama): down 7.4s, from its stop at T+1m 00.0s to its copy running at T+1m 07.4s; "
        "running again as job 2202 on spare nodes, from step 600"
    )


def test_given_two_interruptions_then_the_line_counts_them_and_says_when_each_was() -> None:
    line = job_line(_job(down=[[60.0, 67.4], [1800.0, 1807.4]], downtime_seconds=14.8))
    assert line == (
        "job 2201 (llama): down 14.8s in 2 interruptions, each from its stop to a copy running: "
        "T+1m 00.0s to T+1m 07.4s, T+30m 00.0s to T+30m 07.4s; running again as job 2202 on spare nodes, from step 600"
    )


def test_given_a_copy_still_pending_then_the_line_says_not_running_and_since_when() -> None:
    job = _job(state="PENDING", running_again_at=None, pending_since=129.4, on=None, downtime_seconds=None)
    assert job_line(job) == "job 2201 (llama): not running: job 2202 pending since T+2m 09.4s, from step 600"


def test_given_an_eks_copy_whose_pods_wait_then_the_line_names_it_as_kubectl_does() -> None:
    job = _job(
        label="PyTorchJob kubeflow/llama",
        copy="PyTorchJob kubeflow/llama-r1",
        running_as="056d620f-e512-59b8-9de3-ee81aa389b40",
        state="no condition yet",
        pending_since=125.0,
        pods="16 Pending",
        on=None,
        downtime_seconds=None,
    )
    line = job_line(job)
    copy = "PyTorchJob kubeflow/llama-r1 pending since T+2m 05.0s, its pods 16 Pending, from step 600"
    assert line == f"PyTorchJob kubeflow/llama: not running: {copy}"
    assert line is not None and "056d620f" not in line


def test_given_a_dry_run_then_the_line_says_what_would_have_been_done_and_that_the_job_is_unchanged() -> None:
    job = _job(running_as=None, copy=None, fate="would_resubmit", checkpoint_step=3000, on=None, downtime_seconds=None)
    assert job_line(job) == "job 2201 (llama): dry run: would be resubmitted from step 3000; still RUNNING as the same job"


def test_given_a_job_no_fault_hit_then_it_gets_no_line() -> None:
    assert job_line(_job(fault_at=None)) is None


def test_given_64_jobs_then_8_lines_and_the_rest_counted_by_how_they_ended() -> None:
    jobs = [_job(job=str(n), label=f"job {n}", downtime_seconds=float(n)) for n in range(1, 61)]
    jobs += [_job(job=str(n), label=f"job {n}", state="PENDING", downtime_seconds=None, pending_since=9.0) for n in range(61, 65)]
    lines = jobs_lines(jobs)
    assert len(lines) == 9
    assert lines[-1] == "and 56 more jobs: 52 running again (down 9.0s to 1m 00.0s), 4 PENDING"


def test_given_a_64_node_list_then_it_is_cut_on_a_node_boundary_and_the_rest_counted() -> None:
    nodes = ", ".join(f"ip-10-2-0-{n} (i-{n:017x}, workers, Running)" for n in range(64))
    text = bounded(nodes)
    assert len(text) <= 240 + len(" and 64 more")
    kept = text.split(" and ")[0].count("(i-")
    assert text.endswith(f" and {64 - kept} more") and kept >= 3


def test_given_a_long_sentence_that_is_no_list_then_it_is_left_whole() -> None:
    sentence = "HyperPod Health Monitoring Agent has detected fault type NvidiaErrorTerminate on this node " * 4
    assert bounded(sentence) == sentence


def test_given_64_resubmissions_in_a_row_then_the_timeline_keeps_the_first_three_and_the_last_and_counts_the_rest() -> None:
    timeline = [{"at": 1.0, "event": "event received", "detail": "x"}]
    timeline += [{"at": 100.0 + n, "event": "job resubmitted", "detail": f"job {n}"} for n in range(64)]
    shown = condensed_timeline(timeline)
    assert [e["event"] for e in shown] == ["event received", *["job resubmitted"] * 3, "…", "job resubmitted"]
    assert shown[4]["detail"] == "and 60 more job resubmitted to T+2m 42.0s" and shown[-1]["detail"] == "job 63"


def _report(outcome: str, phases: list[str], timeline: list[tuple[float, str, str]], dry_run: bool = False) -> dict[str, Any]:
    incident = {
        "id": "inc-1",
        "workflow": "node",
        "job": None,
        "trigger": ["manual"],
        "nodes": ["i-1"],
        "outcome": outcome,
        "summary": "s",
        "error": None,
        "cause": None,
        "phases": [{"name": name, "start": 10.0 * n, "end": 10.0 * n + 5} for n, name in enumerate(phases)],
        "resubmissions": [],
        "timeline": [{"at": at, "event": event, "detail": detail} for at, event, detail in timeline],
        "workflow_seconds": 6.0,
        "provisioning_seconds": 0.0,
        "agent_seconds": 0.0,
        "pipeline_overhead_seconds": 6.0,
    }
    return {
        "scenario": "s",
        "description": "",
        "dry_run": dry_run,
        "cluster": {"name": "c", "orchestrator": "slurm", "node_recovery": "None", "instance_groups": {"w": 2}},
        "incidents": [incident],
        "jobs": [_job()],
        "api_calls": {"sns.Publish": 2},
        "api_calls_total": 2,
        "state_transitions": 10,
        "executions": 1,
        "virtual_seconds": 26.0,
        "pipeline_overhead_seconds": 6.0,
        "wall_seconds": 1.0,
        "notifications": [],
        "metrics": {},
    }


def test_given_a_report_page_then_it_leads_with_the_jobs_and_the_api_calls_come_after_the_incident() -> None:
    page = render_html(_report("recovered", ["detect", "record"], [(0.0, "fault detected", "x")]))
    jobs, incident, calls = page.index("<h2>Jobs</h2>"), page.index('<section class="incident"'), page.index("<h2>API calls</h2>")
    assert jobs < incident < calls
    assert "running again as job 2202 on spare nodes, from step 600" in page


def test_given_a_report_page_then_the_legend_shows_only_the_phases_drawn() -> None:
    page = render_html(_report("recovered", ["detect", "cordon", "record"], []))
    legend = re.search(r'<p class="legend">(.*?)</p>', page)
    assert legend is not None
    assert re.findall(r"</span>([a-z_]+) ", legend.group(1)) == ["detect", "cordon", "record"]


def test_given_the_colours_then_no_outcome_shares_a_colour_with_a_phase_or_with_another_outcome() -> None:
    assert not set(OUTCOME_COLORS.values()) & set(PHASE_COLORS.values())
    assert len(set(OUTCOME_COLORS.values())) == len(OUTCOME_COLORS)


def test_given_events_then_each_marker_group_is_labelled_with_its_event() -> None:
    page = render_html(
        _report(
            "recovered",
            ["detect", "record"],
            [(0.0, "fault detected", "x"), (0.1, "event received", "y"), (14.0, "outcome: recovered", "z")],
        )
    )
    labels = re.findall(r'<text class="event-label"[^>]*>([^<]*)</text>', page)
    assert labels == ["fault detected +1", "outcome: recovered"]


def test_given_a_dry_run_then_what_it_would_have_done_is_shown_outside_the_folded_timeline() -> None:
    timeline = [
        (0.0, "would cordon", "ip-10-3-0-11"),
        (1.0, "would replace", "ip-10-3-0-11 (i-1: replace dry_run)"),
        (2.0, "nodes assessed", "x"),
    ]
    page = render_html(_report("dry_run", ["detect", "record"], timeline, dry_run=True))
    would = re.search(r'<div class="would">(.*?)</div>', page)
    assert would is not None and page.index('<div class="would">') < page.index("<details>")
    assert re.findall(r"<li>([^<]*)</li>", would.group(1)) == [
        "would cordon: ip-10-3-0-11",
        "would replace: ip-10-3-0-11 (i-1: replace dry_run)",
    ]


def test_given_a_copy_a_later_fault_hit_and_nothing_replaced_then_the_line_says_it_is_not_training() -> None:
    # Given job 2202 running again, then hit at 7200 s and left running in Slurm (a repeat offender's node)
    job = _job(down=[[60.0, 67.4], [7200.0, 7205.0]], downtime_seconds=None)
    # Then its line does not say "running again"
    assert job_line(job) == (
        "job 2201 (llama): not running again: job 2202 is RUNNING in Slurm, but a fault hit it at T+120m 00.0s and it was not resubmitted"
    )
