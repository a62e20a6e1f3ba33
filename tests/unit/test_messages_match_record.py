"""What a human reads never contradicts the record (issue 30 §1): for every outcome × error ×
combination of job and node facts × orchestrator, the rendered notification is checked claim by
claim against the record it came from (sandbox/message_check.py). And the checker itself catches
each kind of contradiction it exists for, so that a green run means something."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, get_args

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hyperpod_recovery.domain.messages.advice import ERROR_MEANING, Deployment
from hyperpod_recovery.domain.messages.notification import notification
from hyperpod_recovery.domain.record.fates import acted, jobs_sentence
from hyperpod_recovery.models.records import IncidentRecord, JobFate, JobFateKind, NodeFate, TimelineEntry
from hyperpod_recovery.vocabulary import OUTCOMES
from sandbox.message_check import contradictions
from tests.fakes import T0

URL = "https://console/exec"
DEPLOYMENT = Deployment(stack="llm-train-recovery", ledger_table="llm-train-recovery-ledger")
ERRORS = [*ERROR_MEANING, "LedgerError", "SlurmCommandFailed", "KubeAccessDenied", None]
# Every fate but a hang's that did nothing (left_running, ended_by_itself: no node incident has them).
JOB_FATES = [f for f in get_args(JobFateKind) if f not in ("left_running", "ended_by_itself")]
NODE_FATES = ["in_service", "replacing", "out_of_service", "not_ours", "unknown", "skipped", "untouched"]
REASONS = st.sampled_from(
    [
        "its resubmission failed: SlurmCommandFailed: sbatch: error: Batch job submission failed: Invalid account",
        "no checkpoint verifies: step 3000: shard 2 missing",
        "the incident ended escalated before it chose a checkpoint",
        "the Kubernetes API refused: 403 Forbidden",
    ]
)


@st.composite
def job_fates(draw: Any, orchestrator: str, index: int) -> JobFate:
    fate = draw(st.sampled_from(JOB_FATES if orchestrator == "slurm" else [f for f in JOB_FATES if f != "requeued_by_slurm"]))
    live = fate in ("resubmitted", "resubmitted_before")
    step = draw(st.one_of(st.none(), st.integers(0, 10**6)))
    name = draw(st.sampled_from([f"llama-{index}", ""]))  # (Reconcile may know a job by its id alone)
    if orchestrator == "eks":
        uid = f"{index:08x}-aaaa-4bbb-8ccc-{index:012x}"
        names: dict[str, Any] = {"job": uid, "name": name, "kind": draw(st.sampled_from(["PyTorchJob", "HyperPodPyTorchJob", None]))}
        names["namespace"] = draw(st.sampled_from(["team-a", None]))
        copy: dict[str, Any] = {"copy_id": f"{index:08x}-dddd-4eee-8fff-{index:012x}"} if live else {}
        if live and draw(st.booleans()):  # (a copy known from a ledger claim has no name)
            copy["copy_name"] = f"llama-{index}-r1"
    else:
        names = {"job": str(1000 + index), "name": name}
        copy = {"copy_id": str(5000 + index)} if live else {}
    if live and draw(st.integers(0, 4)) == 0:
        copy = {}  # another incident (or the history) has not recorded its copy's id
    return JobFate(
        **names,
        fate=fate,
        **copy,
        copy_state=draw(st.sampled_from([None, "PENDING", "RUNNING", "Created"])) if copy else None,
        copy_seen_at=T0 + timedelta(seconds=9) if copy else None,
        by=draw(st.one_of(st.none(), st.just("hpr-i-0b-20260314T0900"))) if fate in ("resubmitted", "resubmitted_before") else None,
        checkpoint_step=step,
        checkpoint_uri=f"s3://ckpt/llama-{index}/step-{step:09d}/" if step is not None else None,
        checkpoint_prefix=draw(st.one_of(st.none(), st.just(f"s3://ckpt/llama-{index}"))),
        reason=draw(REASONS) if fate in ("not_resubmitted", "restarted_by_owner", "copy_unknown") else "",
    )


@st.composite
def node_fates(draw: Any, orchestrator: str, index: int) -> NodeFate:
    instance = f"i-{index:017x}"
    name = f"hyperpod-{instance}" if orchestrator == "eks" else f"ip-10-3-0-{index}"
    fate = draw(st.sampled_from(NODE_FATES))
    new = f"i-{index + 100:017x}" if fate in ("replacing", "out_of_service", "in_service") and draw(st.booleans()) else None
    held = fate in ("replacing", "out_of_service") and draw(st.booleans())
    return NodeFate(
        node=name,
        instance=instance,
        fate=fate,
        replacement=new,
        replacement_node=f"hyperpod-{new}" if new and orchestrator == "eks" else None,
        replacement_status=draw(st.sampled_from([None, "Pending", "Running"])) if new else None,
        detail=draw(st.sampled_from(["", "HyperPod did not start its replacement (InsufficientCapacity: none)", "left drained"])),
        held=held,
        acted=held or (fate in ("in_service", "replacing") and draw(st.booleans())),
        replace_refused=fate == "out_of_service" and draw(st.booleans()),
    )


@st.composite
def records(draw: Any) -> IncidentRecord:
    orchestrator = draw(st.sampled_from(["slurm", "eks"]))
    outcome = draw(st.sampled_from(OUTCOMES))
    jobs = [draw(job_fates(orchestrator, i)) for i in range(draw(st.sampled_from([0, 1, 2, 4, 8])))]
    nodes = [draw(node_fates(orchestrator, i + 1)) for i in range(draw(st.integers(0, 3)))]
    if outcome == "dry_run":  # a drill changed nothing: as domain/record/fates.py derives its facts
        jobs = [j.model_copy(update={"fate": draw(st.sampled_from(["would_resubmit", "would_not_resubmit"]))}) for j in jobs]
        nodes = [n.model_copy(update={"fate": "untouched", "held": False, "acted": False}) for n in nodes]
    if outcome in ("rejected", "capped", "stale"):  # nothing was changed (a capped JobRecovery keeps its job's fate)
        jobs = [j.model_copy(update={"fate": "not_resubmitted"}) for j in jobs][: 1 if outcome == "capped" else 0]
        nodes = [n.model_copy(update={"fate": "untouched", "held": False, "acted": False}) for n in nodes]
    if outcome == "recovered" and not acted(jobs, nodes):
        outcome = "duplicate"  # as the Record step decides (domain/record/incident.py: conclude)
    needs_error = outcome in ("escalated", "capped", "stale", "rejected", "aborted", "failed")
    error = draw(st.sampled_from([e for e in ERRORS if e])) if needs_error else None
    cause = draw(st.sampled_from(["1 node(s) not back by 09:45 UTC", "sbatch: error: Invalid account"])) if error else None
    summary = f"{outcome}: {cause or ''}; {jobs_sentence(jobs)}."
    return IncidentRecord(
        incident_id="hpr-i-0a-20260314T0900",
        cluster="llm-train",
        workflow=draw(st.sampled_from(["node", "job"])),
        outcome=outcome,
        dry_run=outcome == "dry_run",
        trigger=["hyperpod_node_health"],
        nodes=[n.instance or n.node for n in nodes],
        hostnames=[n.node for n in nodes],
        error=error,
        cause=cause,
        summary=summary,
        detected_at=T0,
        recorded_at=T0 + timedelta(minutes=20),
        timeline=[TimelineEntry(at=T0, event="fault detected", detail="NvidiaErrorTerminate")],
        orchestrator=orchestrator,
        job_fates=jobs,
        node_fates=nodes,
        jobs_omitted=draw(st.sampled_from([0, 0, 3])),
    )


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records(), st.booleans())
def test_no_rendered_message_contradicts_its_record(record: IncidentRecord, held: bool) -> None:
    # Given any incident record, of any outcome, error, jobs' and nodes' fates and orchestrator
    # When its notification is rendered
    subject, body = notification(record, URL, hold_until=record.recorded_at + timedelta(days=1) if held else None, deployment=DEPLOYMENT)
    # Then no claim of it contradicts the record
    assert contradictions(record, subject, body) == []


def _record(**fields: Any) -> IncidentRecord:
    base: dict[str, Any] = {
        "incident_id": "hpr-i-0a-20260314T0900",
        "cluster": "llm-train",
        "outcome": "escalated",
        "dry_run": False,
        "trigger": ["hyperpod_node_health"],
        "nodes": ["i-0000000000000000a"],
        "error": "RejoinDeadlineExceeded",
        "cause": "not back",
        "summary": "Escalated to a human: not back.",
        "recorded_at": T0,
    }
    return IncidentRecord.model_validate(base | fields)


COPY = JobFate(job="1001", name="llama", fate="resubmitted", copy_id="1002", copy_state="PENDING", checkpoint_step=3000)
UID = "bea1bd05-1aff-56fd-aeef-72f72fd01614"
COPY_UID = "056d620f-e512-59b8-9de3-ee81aa389b40"
EKS_COPY = JobFate(
    job=UID,
    name="llama-1",
    kind="PyTorchJob",
    namespace="kubeflow",
    fate="resubmitted",
    copy_id=COPY_UID,
    copy_name="llama-1-r1",
    copy_state="Created",
    checkpoint_step=3000,
)
EKS_NOT_RESUBMITTED = EKS_COPY.model_copy(update={"fate": "not_resubmitted", "copy_id": None, "copy_name": None, "reason": "no checkpoint"})


@pytest.mark.parametrize(
    ("record", "body", "problem"),
    [
        (_record(job_fates=[COPY]), "jobs were not resubmitted. job 1001 (llama) as job 1002", "without naming them"),
        (_record(job_fates=[COPY]), "job 1001 (llama) failed: resubmit it from step 3000.", "its copy job 1002 is not named"),
        (_record(job_fates=[COPY]), "job 1001 (llama) is job 1002: resubmit it.", "asks to start another"),
        (_record(job_fates=[COPY]), "job 1001 (llama) runs again as job 1002.", "said to run again"),
        (_record(orchestrator="eks"), "run `scontrol update nodename=x state=resume`", "a Slurm command"),
        (_record(orchestrator="eks"), "run `squeue -j 1002`", "a Slurm command"),
        (_record(), "run `kubectl get nodes`", "a kubectl command"),
        (_record(), "run `scontrol show node <node>`", "unfilled placeholder"),
        (
            _record(node_fates=[NodeFate(node="ip-10-3-0-11", fate="not_ours")]),
            "`scontrol update nodename=ip-10-3-0-11 state=resume`",
            "which this incident does not hold",
        ),
        (_record(job_fates=[COPY.model_copy(update={"fate": "not_resubmitted"})]), "nothing about it", "does not name it"),
        (
            _record(outcome="recovered", error=None, cause=None, node_fates=[NodeFate(node="ip-10-3-0-11", fate="untouched")]),
            "RECOVERED - no action needed.",
            "changed nothing",
        ),
        (_record(cause=""), "Cause: -", "without its error and cause"),
        (_record(job_fates=[COPY]), "job 1001 (llama) was resubmitted as job 1002.\nResubmit it from step 3000.", "names no job"),
        (_record(job_fates=[COPY]), "job 1001 (llama) is job 1002; if slow, restart it", "start another copy of job 1001"),
        (
            _record(outcome="dry_run", error=None, cause=None, job_fates=[COPY.model_copy(update={"fate": "would_not_resubmit"})]),
            "job 1001 (llama) would not be resubmitted: if not, resubmit it.",
            "nothing to do",
        ),
        (_record(hostnames=["ip-10-3-0-11"]), "`sinfo -R -n ip-10-9-9-9`", "no node of this incident"),
        (_record(), "run `aws sagemaker list-cluster-nodes --cluster-name {cluster}`", "placeholder"),
        (_record(), "run `hyperpod-recovery checkpoint latest s3://... --json`", "placeholder"),
        (
            _record(node_fates=[NodeFate(node="ip-10-3-0-11", fate="not_ours")]),
            "`scontrol update NodeName=ip-10-3-0-11 State=RESUME`",
            "which this incident does not hold",
        ),
        (
            _record(orchestrator="eks", node_fates=[NodeFate(node="hyperpod-i-0a", fate="not_ours")]),
            "`kubectl uncordon hyperpod-i-0a`",
            "which this incident does not hold",
        ),
        # EKS: a job is named as kubectl shows it, and a name is not found inside a longer one
        (
            _record(orchestrator="eks", job_fates=[EKS_COPY]),
            "PyTorchJob kubeflow/llama-1 re-created as PyTorchJob kubeflow/llama-1-r1.\n"
            "Re-create PyTorchJob kubeflow/llama-1 from step 3000.",
            "asks to start another copy of PyTorchJob kubeflow/llama-1",
        ),
        (
            _record(orchestrator="eks", job_fates=[EKS_NOT_RESUBMITTED]),
            "PyTorchJob kubeflow/llama-10 was NOT re-created: no checkpoint.",
            "does not name it",
        ),
        (
            _record(orchestrator="eks", job_fates=[EKS_NOT_RESUBMITTED]),
            "HyperPodPyTorchJob kubeflow/llama-1 was NOT re-created: no checkpoint.",
            "does not name it",
        ),
        (
            _record(orchestrator="eks", job_fates=[EKS_COPY]),
            "PyTorchJob kubeflow/llama-1 re-created as PyTorchJob kubeflow/llama-1-r10.",
            "its copy PyTorchJob kubeflow/llama-1-r1 is not named",
        ),
        (
            _record(orchestrator="eks", job_fates=[EKS_COPY]),
            f"job resubmitted: PyTorchJob kubeflow/llama-1 -> PyTorchJob kubeflow/llama-1-r1 (uid {COPY_UID}), Created: runs again",
            "said to run again",
        ),
    ],
)
def test_the_checker_catches_each_kind_of_contradiction(record: IncidentRecord, body: str, problem: str) -> None:
    # Given a message that makes a claim the record contradicts
    # When it is checked
    found = contradictions(record, "", body)
    # Then the contradiction is named
    assert any(problem in f for f in found), found


@pytest.mark.parametrize(
    ("record", "body"),
    [
        (_record(job_fates=[COPY]), "job 1001 (llama) was resubmitted as job 1002: do not resubmit it."),
        (_record(cause="sbatch: error: please resubmit the job later"), "Cause: sbatch: error: please resubmit the job later"),
        (_record(), "no job ran on these nodes"),
        (
            _record(job_fates=[COPY.model_copy(update={"fate": "not_resubmitted", "copy_id": None, "reason": "no checkpoint"})]),
            "job 1001 (llama) was NOT resubmitted: no checkpoint. If not running, resubmit it from step 3000.",
        ),
        # The wordings the summaries and timelines use for a copy (fates.copy_made_text, the timelines' job resubmitted)
        (_record(job_fates=[COPY]), "resubmitted 6 job(s) (PENDING when submitted): 1001 -> 1002, 1003 -> 1004"),
        (
            _record(orchestrator="eks", job_fates=[EKS_COPY]),
            "re-created 6 job(s) (Created when submitted): PyTorchJob kubeflow/llama-1 -> PyTorchJob kubeflow/llama-1-r1, "
            "PyTorchJob kubeflow/llama-10 -> PyTorchJob kubeflow/llama-10-r1",
        ),
        (
            _record(orchestrator="eks", job_fates=[EKS_COPY]),
            f"  09:11:05  job resubmitted: PyTorchJob kubeflow/llama-1 -> PyTorchJob kubeflow/llama-1-r1 (uid {COPY_UID}), Created",
        ),
        (
            _record(orchestrator="eks", job_fates=[EKS_NOT_RESUBMITTED]),
            f"PyTorchJob kubeflow/llama-1 (uid {UID}) ended FAILED.\nPyTorchJob kubeflow/llama-1 was NOT re-created: no checkpoint. "
            "Re-create PyTorchJob kubeflow/llama-1 from step 3000.",
        ),
    ],
)
def test_the_checker_lets_true_messages_through(record: IncidentRecord, body: str) -> None:
    # Given a message true to its record (a negation, an error's own words quoted, a job with no copy to restart)
    # Then the checker finds nothing to contradict
    assert contradictions(record, "", body) == []


@pytest.mark.parametrize("workflow", ["node", "job"])
@pytest.mark.parametrize("orchestrator", ["slurm", "eks"])
@pytest.mark.parametrize("error", sorted(ERROR_MEANING))
def test_every_escalations_meaning_reads_true_on_both_orchestrators(orchestrator: str, error: str, workflow: str) -> None:
    # (the drawn records above may not draw every error: each is rendered on each orchestrator and workflow here;
    # the large-job errors' first texts named Slurm commands on EKS and an unfilled <job>)
    fields: dict[str, Any] = {"job_id": "1001"} if workflow == "job" else {}
    record = _record(orchestrator=orchestrator, outcome="escalated", error=error, workflow=workflow, **fields)
    subject, body = notification(record, URL, deployment=Deployment())
    assert contradictions(record, subject, body) == []
