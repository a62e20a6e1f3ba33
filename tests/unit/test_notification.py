"""The notification a human reads (domain/messages/notification.py): one per outcome, both workflows."""

from __future__ import annotations

from datetime import timedelta

import pytest

from hyperpod_recovery.domain.messages.advice import ERROR_MEANING
from hyperpod_recovery.domain.messages.notification import notification, subject
from hyperpod_recovery.domain.record.durations import phase_durations
from hyperpod_recovery.models.records import IncidentRecord, JobFate, NodeFate, Phase, Resubmission, TimelineEntry
from tests.fakes import T0

URL = "https://us-west-2.console.aws.amazon.com/states/home#/v2/executions/details/arn:exec"


def _at(seconds: float):  # type: ignore[no-untyped-def]
    return T0 + timedelta(seconds=seconds)


def _record(outcome: str, *, error: str | None = None, cause: str | None = None, **fields) -> IncidentRecord:  # type: ignore[no-untyped-def]
    summaries = {
        "recovered": "Recovered ip-10-3-0-11; resubmitted 1 job(s): 1001 -> 1002 from step 3000.",
        "escalated": "Escalated to a human: node not back.",
        "capped": "Capped, nothing was changed for ip-10-3-0-11: breaker open.",
        "duplicate": "Duplicate: i-0a is already in recovery by hpr-other.",
        "rejected": "Rejected, nothing was changed: no such node.",
        "dry_run": "Dry run for ip-10-3-0-11: every step ran, nothing was changed.",
    }
    base = {
        "incident_id": "hpr-i-0a-20260314T0900",
        "cluster": "llm-train",
        "outcome": outcome,
        "dry_run": outcome == "dry_run",
        "trigger": ["hyperpod_node_health"],
        "nodes": ["i-0000000000000000a"],
        "hostnames": ["ip-10-3-0-11"],
        "error": error,
        "cause": cause,
        "summary": summaries[outcome],
        "detected_at": _at(0),
        "recorded_at": _at(645),
        "timeline": [
            TimelineEntry(at=_at(0), event="fault detected", detail="i-0a via hyperpod_node_health: NvidiaErrorTerminate"),
            TimelineEntry(at=_at(5), event="event received", detail="incident hpr-i-0a"),
            TimelineEntry(at=_at(8), event="nodes cordoned", detail="ip-10-3-0-11"),
            TimelineEntry(at=_at(10), event="replace initiated", detail="ip-10-3-0-11 (i-0a: replace initiated) in 1 call(s)"),
            TimelineEntry(at=_at(640), event="node rejoined", detail="ip-10-3-0-11 as i-0b after 11 check(s)"),
            TimelineEntry(at=_at(645), event=f"outcome: {outcome}", detail="summary"),
        ],
        "resubmissions": [
            Resubmission(job="1001", job_name="llama", new_job_id="1002", checkpoint_step=3000, checkpoint_uri="s3://b/p/step-000003000/")
        ]
        if outcome == "recovered"
        else [],
        "job_fates": [
            JobFate(
                job="1001",
                name="llama",
                fate="resubmitted",
                copy_id="1002",
                copy_state="RUNNING",
                copy_seen_at=_at(644),
                checkpoint_step=3000,
                checkpoint_uri="s3://b/p/step-000003000/",
            )
        ]
        if outcome == "recovered"
        else [],
        "node_fates": [
            NodeFate(
                node="ip-10-3-0-11",
                instance="i-0000000000000000a",
                fate={"recovered": "in_service", "escalated": "replacing"}.get(outcome, "untouched"),
                replacement="i-0000000000000000b",
                replacement_status="Pending",
                held=outcome == "escalated",
                acted=outcome in ("recovered", "escalated"),
            )
        ],
    }
    base.update(fields)
    return IncidentRecord.model_validate(base)


@pytest.mark.parametrize(
    ("outcome", "error", "headline", "next_step"),
    [
        ("recovered", None, "RECOVERED - no action needed.", "job 1001 (llama) was resubmitted as job 1002 from step 3000 (RUNNING"),
        ("dry_run", None, "DRY RUN - nothing was changed.", "this was a drill"),
        ("duplicate", None, "NO ACTION - this incident changed nothing", "someone else handled this"),
        ("rejected", "InvalidRecoveryRequest", "REJECTED - nothing was changed.", "the cause says what was wrong"),
        ("escalated", "RejoinDeadlineExceeded", "ACTION NEEDED", "scontrol update nodename=ip-10-3-0-11 state=resume"),
        ("capped", "CircuitBreakerOpen", "ACTION NEEDED - a safety limit", "breaker reset --cluster llm-train"),
    ],
)
def test_given_each_outcome_then_the_body_says_what_failed_what_was_done_what_next_and_where(
    outcome: str, error: str | None, headline: str, next_step: str
) -> None:
    # Given an incident that ended with this outcome
    record = _record(outcome, error=error, cause="the cause" if error else None)
    # When it is turned into a notification
    title, body = notification(record, URL)
    lines = body.splitlines()
    # Then the first line says whether a human is needed, the second what happened
    assert lines[0].startswith(headline) and lines[1] == record.summary
    # And the sections come in the order a human reads them
    sections = [lines.index(s) for s in ("WHAT FAILED", "WHAT WAS DONE (UTC, time since the fault)", "WHAT HAPPENS NEXT")]
    assert sections == sorted(sections)
    # And what failed names the fault with its time; what was done has clock time and time since the fault
    assert "  09:00:00  i-0a via hyperpod_node_health: NvidiaErrorTerminate" in lines
    assert any(line.startswith("  09:10:40    +10:40  node rejoined: ip-10-3-0-11 as i-0b") for line in lines)
    assert next_step in body
    # And the error, the elapsed time and the execution link close it
    assert ("Error: " + error in body) if error else ("Error:" not in body)
    assert "Fault to this message: 10 min 45 s." in body and lines[-1] == f"Execution: {URL}"
    # And the subject names cluster, outcome and the node as a human knows it, within SNS's limit
    assert title.startswith("[hyperpod-recovery] llm-train: ") and title.endswith("ip-10-3-0-11") and len(title) <= 100


def test_given_an_escalation_then_the_subject_shouts_and_names_the_error_and_the_hold() -> None:
    record = _record("escalated", error="RejoinDeadlineExceeded", cause="ip-10-3-0-11 not back")
    title, body = notification(record, URL, hold_until=_at(86_400))
    assert title == "[hyperpod-recovery] llm-train: ESCALATED RejoinDeadlineExceeded ip-10-3-0-11"
    assert "The nodes stay locked until 2026-03-15 09:00 UTC" in body


def test_given_a_job_incident_then_the_subject_names_the_job() -> None:
    record = _record("escalated", error="CrashLoopDetected", cause="c", workflow="job", job_id="3101", hostnames=["ip-10-3-0-1"])
    title, body = notification(record, URL)
    assert title == "[hyperpod-recovery] llm-train: ESCALATED CrashLoopDetected job 3101 ip-10-3-0-1"
    assert ERROR_MEANING["CrashLoopDetected"] in body and "(job recovery, cluster llm-train)" in body


def test_given_an_eks_job_incident_then_the_subject_names_the_object_kubectl_finds_not_its_uid() -> None:
    uid = "bea1bd05-1aff-56fd-aeef-72f72fd01614"
    fate = JobFate(job=uid, name="llama", kind="PyTorchJob", namespace="kubeflow", fate="not_resubmitted", reason="r")
    record = _record("escalated", error="DoNotRequeue", cause="c", workflow="job", job_id=uid, hostnames=["hyperpod-i-0aaaaaaaaaaaaaaa1"])
    title, _ = notification(record.model_copy(update={"job_fates": [fate]}), URL)
    assert (
        title.startswith("[hyperpod-recovery] llm-train: ESCALATED DoNotRequeue PyTorchJob kubeflow/llama hyperpod-i-") and uid not in title
    )
    # (known by its uid alone, it is named by it)
    bare = record.model_copy(update={"job_fates": [fate.model_copy(update={"name": None})]})
    assert f"job {uid}" in subject(bare)


def test_given_many_nodes_or_odd_characters_then_the_subject_still_fits_sns() -> None:
    many = [f"ip-10-3-{n // 250}-{n % 250}" for n in range(64)]
    title = subject(_record("capped", error="ClusterCapReached", hostnames=many, cluster="llm-träin-" + "x" * 40))
    assert len(title) <= 100 and title.endswith("...") and title.isascii()
    assert "+61" not in title or "ClusterCapReached" in title


def test_given_an_unknown_error_then_the_next_step_points_at_the_runbook() -> None:
    _, body = notification(_record("escalated", error="LedgerError", cause="c"), URL)
    assert "docs/runbook.md (Escalations)" in body


@pytest.mark.parametrize(
    ("outcome", "workflow", "expected"),
    [
        (
            "recovered",
            "node",
            {
                "DetectToCordonSeconds": 8.0,
                "ReplaceToRejoinSeconds": 630.0,
                "RejoinToResubmitSeconds": 4.0,
                "DetectToResubmitSeconds": 644.0,
                "TimeToRecoverSeconds": 645.0,
            },
        ),
        (
            "escalated",
            "node",
            {
                "DetectToCordonSeconds": 8.0,
                "ReplaceToRejoinSeconds": 630.0,
                "RejoinToResubmitSeconds": 4.0,
                "DetectToResubmitSeconds": 644.0,
                "TimeToEscalateSeconds": 645.0,
            },
        ),
        ("recovered", "job", {"JobTimeToRecoverSeconds": 645.0}),
        ("dry_run", "node", {}),
        (
            "duplicate",
            "node",
            {
                "DetectToCordonSeconds": 8.0,
                "ReplaceToRejoinSeconds": 630.0,
                "RejoinToResubmitSeconds": 4.0,
                "DetectToResubmitSeconds": 644.0,
            },
        ),
    ],
)
def test_phase_durations_come_from_the_incident_phases(outcome: str, workflow: str, expected: dict[str, float]) -> None:
    phases = [
        Phase(name="detect", start=_at(0), end=_at(5)),
        Phase(name="cordon", start=_at(6), end=_at(8)),
        Phase(name="wait_for_rejoin", start=_at(10), end=_at(640)),
        Phase(name="resubmit", start=_at(642), end=_at(644)),
    ]
    record = _record(outcome, error="E" if outcome == "escalated" else None, workflow=workflow, phases=phases)
    assert phase_durations(record) == expected


@pytest.mark.parametrize(
    ("resubmits", "expected"),
    [
        # a job resubmitted at once, while the replacement provisions: no "rejoined -> resubmitted"
        ([(12, 14)], {"DetectToResubmitSeconds": 14.0}),
        # one job at once, one after the rejoin
        ([(12, 14), (642, 644)], {"DetectToResubmitSeconds": 14.0, "RejoinToResubmitSeconds": 4.0}),
        ([], {}),
    ],
)
def test_resubmit_durations_follow_when_each_job_was_resubmitted(resubmits: list[tuple[int, int]], expected: dict[str, float]) -> None:
    phases = [
        Phase(name="detect", start=_at(0), end=_at(5)),
        Phase(name="cordon", start=_at(6), end=_at(8)),
        *[Phase(name="resubmit", start=_at(start), end=_at(end)) for start, end in resubmits],
        Phase(name="wait_for_rejoin", start=_at(10), end=_at(640)),
    ]
    figures = phase_durations(_record("recovered", workflow="node", phases=phases))
    assert {k: v for k, v in figures.items() if "Resubmit" in k} == expected


def test_a_job_incident_on_more_nodes_than_its_record_names_counts_the_rest_in_its_subject() -> None:
    # Given a job incident whose record names 64 of its job's 2,048 nodes and counts the rest
    names = [f"n{n}" for n in range(64)]
    fields = {"workflow": "job", "job_id": "1001", "hostnames": names, "nodes": names, "nodes_omitted": 1984}
    record = _record("escalated", error="CrashLoopDetected", **fields)
    # Then its subject says how many more there are, all of them
    assert subject(record).endswith("job 1001 n0, n1, n2 +2045")
