"""Classify Failure for a hang (domain/hangs/classify.py): act only on a job slurmctld runs, whose
submission opted in, whose reporters are still heard, that nobody resubmitted already and that no
one else restarts; blame only allocated nodes; check a first suspect, replace a repeat one."""

from __future__ import annotations

from datetime import timedelta

import pytest

from hyperpod_recovery.domain.hangs.classify import classify_hang
from hyperpod_recovery.domain.hangs.detect import slow_verdict, stall_verdict
from hyperpod_recovery.domain.hangs.rules import HangRules
from hyperpod_recovery.domain.jobs.states import EKS_STILL_RUNNING, SLURM_STILL_RUNNING, still_running_on_either
from hyperpod_recovery.domain.record.fates import job_incident_job_fates
from hyperpod_recovery.domain.record.job_incident import evidence_text
from hyperpod_recovery.errors import CrashLoopDetected
from hyperpod_recovery.models.cluster import ClusterNode
from hyperpod_recovery.models.commands import CommandReply, HangEvidenceResult, JobSpec, JobSpecResult, NodeStacks, NodeStatesResult
from hyperpod_recovery.models.job_recovery import ClassifyJobFailureInput, JobWorkflowState, RestartEntry
from hyperpod_recovery.models.progress import ProgressReport
from hyperpod_recovery.models.records import ResubmissionClaim
from hyperpod_recovery.models.requests import JobRecoveryRequest
from hyperpod_recovery.steps.classify_job_failure import classify_job_failure
from tests.fakes import CLUSTER, T0, FakeCluster, FakeLedger, node_id
from tests.unit.test_hang_detection import nodes, report

NAMES = [f"ip-10-1-0-{i}" for i in range(1, 5)]


def _setup(**job_fields: object) -> tuple[JobRecoveryRequest, JobSpec, list[ClusterNode]]:
    reports = [*[report(n, step=101, idle=90) for n in NAMES[:3]], report(NAMES[3], step=100, idle=95)]
    verdict = stall_verdict(CLUSTER, "1001", reports, HangRules(), T0)
    assert verdict is not None and verdict.suspects == [NAMES[3]]
    request = JobRecoveryRequest(cluster=CLUSTER, job_id="1001", source="progress", reason="hung", detected_at=T0, hang=verdict)
    fields = {"job_id": "1001", "name": "llama", "num_nodes": 4, "nodes": NAMES, "state": "RUNNING", "reports_progress": True}
    job = JobSpec.model_validate({**fields, **job_fields})
    cluster = [
        ClusterNode.model_validate(
            {"node_id": node_id(i + 1), "instance_group": "workers", "status": "Running", "private_dns_hostname": f"{name}.ec2.internal"}
        )
        for i, name in enumerate(NAMES)
    ]
    return request, job, cluster


def _classify(request, job, cluster, reports=None, **kwargs):  # type: ignore[no-untyped-def]
    still = reports if reports is not None else [*[report(n, step=101, idle=100) for n in NAMES[:3]], report(NAMES[3], step=100, idle=105)]
    return classify_hang(request, job, None, still, cluster, "hpj-1001-hung-1", T0 + timedelta(seconds=10), **kwargs)


def test_given_a_job_still_stuck_then_hung_and_its_first_suspect_is_only_checked() -> None:
    request, job, cluster = _setup()
    c = _classify(request, job, cluster)
    assert c.kind == "hung" and [f.slurm_node for f in c.faulty_nodes] == [NAMES[3]]
    assert c.node_request is not None and {t.recommends for t in c.node_request.triggers} == {"check"}
    # (suspected before on this cluster: replaced)
    again = _classify(request, job, cluster, repeat_suspects=frozenset({NAMES[3]}))
    assert again.node_request is not None and {t.recommends for t in again.node_request.triggers} == {"replace"}


def test_given_a_job_already_resubmitted_then_nothing_more_is_done() -> None:
    request, job, cluster = _setup()
    claim = ResubmissionClaim(job_id="1001", incident_id="hpj-1001-hung-1-nodes", claimed=False, new_job_id="1002")
    c = _classify(request, job, cluster, claim=claim)
    assert c.kind == "left_alone" and "already resubmitted by incident hpj-1001-hung-1-nodes as job 1002" in c.reason


def test_given_a_job_another_incident_is_resubmitting_then_left_alone_until_its_claim_expires() -> None:
    request, job, cluster = _setup()
    now = T0 + timedelta(seconds=10)
    claim = ResubmissionClaim(job_id="1001", incident_id="hpr-x", claimed=False, claimed_at=T0, open_until=now + timedelta(minutes=5))
    # When the open claim holds, then the hang is left to it, said as what it is: not done yet
    c = _classify(request, job, cluster, claim=claim)
    assert c.kind == "left_alone"
    assert "job 1001 (llama) is claimed for resubmission by incident hpr-x (open until 2026-03-14 09:05:10 UTC):" in c.reason
    # When it expired (its incident died unsettled), then the hang is recovered as any other
    expired = claim.model_copy(update={"open_until": now - timedelta(seconds=1)})
    assert _classify(request, job, cluster, claim=expired).kind == "hung"


def test_given_a_job_completing_or_ended_then_left_alone() -> None:
    for state in ("COMPLETING", "CANCELLED", "FAILED"):
        request, job, cluster = _setup(state=state)
        c = _classify(request, job, cluster)
        assert c.kind == "left_alone" and f"no longer running ({state})" in c.reason


def test_given_a_job_someone_else_restarts_or_not_opted_in_then_left_alone() -> None:
    request, job, cluster = _setup(auto_resume=True)
    assert _classify(request, job, cluster).kind == "left_alone"
    request, job, cluster = _setup(reports_progress=False)
    c = _classify(request, job, cluster)
    assert c.kind == "left_alone" and "not trusted" in c.reason


def test_given_every_reporter_silent_when_read_again_then_left_alone() -> None:
    request, job, cluster = _setup()
    c = _classify(request, job, cluster, reports=nodes(4, idle=400, heartbeat_age=200))
    assert c.kind == "left_alone" and "reporters is heard" in c.reason


def test_given_progress_since_the_verdict_then_recovered_by_itself() -> None:
    request, job, cluster = _setup()
    c = _classify(request, job, cluster, reports=nodes(4, step=102, idle=2))
    assert c.kind == "recovered_by_itself"


def test_given_a_suspect_slurm_did_not_allocate_to_the_job_then_it_is_not_blamed() -> None:
    request, job, cluster = _setup(nodes=NAMES[:3], num_nodes=3)
    c = _classify(request, job, cluster)
    assert c.kind == "hung" and c.faulty_nodes == [] and c.node_request is None


def test_given_a_hangs_node_request_nested_for_its_job_then_it_names_the_hung_job() -> None:
    request, job, cluster = _setup()
    c = _classify(request, job, cluster)
    assert c.node_request is not None and c.node_request.hung_job is None  # (until Recover Nodes names the job it nests for)
    assert c.node_request.model_copy(update={"nested_for_job": "1001"}).hung_job == "1001"


# --- EKS: the same rules, in the Kubernetes API's words ---------------------------------------------
UID = "bea1bd05-1aff-56fd-aeef-72f72fd01614"
KUBE_NAMES = [f"hyperpod-{node_id(i)}" for i in range(1, 5)]


def _eks_setup(**job_fields: object) -> tuple[JobRecoveryRequest, JobSpec, list[ClusterNode]]:
    """PyTorchJob kubeflow/llama on four nodes, reporting as kubeflow/llama from each Kubernetes node."""
    reports = [
        *[report(n, step=101, idle=90, job="kubeflow/llama") for n in KUBE_NAMES[:3]],
        report(KUBE_NAMES[3], step=100, idle=95, job="kubeflow/llama"),
    ]
    verdict = stall_verdict(CLUSTER, "kubeflow/llama", reports, HangRules(), T0)
    assert verdict is not None and verdict.suspects == [KUBE_NAMES[3]]
    request = JobRecoveryRequest(cluster=CLUSTER, job_id=UID, source="progress", reason="hung", detected_at=T0, hang=verdict)
    fields = {
        "job_id": UID,
        "name": "llama",
        "num_nodes": 4,
        "nodes": KUBE_NAMES,
        "state": "Running",
        "reports_progress": True,
        "kube": {"kind": "PyTorchJob", "namespace": "kubeflow", "name": "llama"},
    }
    job = JobSpec.model_validate({**fields, **job_fields})
    cluster = [ClusterNode.model_validate({"node_id": node_id(i + 1), "instance_group": "workers", "status": "Running"}) for i in range(4)]
    return request, job, cluster


def _eks_classify(request, job, cluster, reports=None, **kwargs):  # type: ignore[no-untyped-def]
    still = (
        reports
        if reports is not None
        else [
            *[report(n, step=101, idle=100, job="kubeflow/llama") for n in KUBE_NAMES[:3]],
            report(KUBE_NAMES[3], step=100, idle=105, job="kubeflow/llama"),
        ]
    )
    return classify_hang(request, job, None, still, cluster, f"hpj-{UID}-hung-1", T0 + timedelta(seconds=10), orchestrator="eks", **kwargs)


def test_given_an_eks_job_still_stuck_then_hung_and_its_kubernetes_node_is_checked_by_its_instance() -> None:
    request, job, cluster = _eks_setup()
    c = _eks_classify(request, job, cluster)
    assert c.kind == "hung" and [(f.slurm_node, f.node_id) for f in c.faulty_nodes] == [(KUBE_NAMES[3], node_id(4))]
    assert c.node_request is not None and {t.recommends for t in c.node_request.triggers} == {"check"}
    assert c.node_execution_name == f"hpj-{UID}-hung-1-nodes" and c.node_request.model_copy(update={"nested_for_job": UID}).hung_job == UID


def test_given_an_eks_job_not_running_or_gone_then_left_alone_in_the_apis_words() -> None:
    for state in ("Restarting", "Created", "Succeeded", "Failed"):
        request, job, cluster = _eks_setup(state=state)
        c = _eks_classify(request, job, cluster)
        assert c.kind == "left_alone" and f"no longer running ({state})" in c.reason
    request, _, cluster = _eks_setup()
    c = _eks_classify(request, None, cluster)
    assert c.kind == "left_alone" and "gone from the Kubernetes API" in c.reason


def test_given_an_eks_job_kubeflow_restarts_or_whose_pod_template_did_not_opt_in_then_left_alone() -> None:
    request, job, cluster = _eks_setup(auto_resume=True, restarted_by="kubeflow")
    assert _eks_classify(request, job, cluster).kind == "left_alone"
    request, job, cluster = _eks_setup(reports_progress=False)
    c = _eks_classify(request, job, cluster)
    assert c.kind == "left_alone" and "is not in its pod template" in c.reason


def test_given_an_eks_suspect_no_pod_of_the_job_runs_on_then_it_is_not_blamed() -> None:
    request, job, cluster = _eks_setup(nodes=KUBE_NAMES[:3], num_nodes=3)
    c = _eks_classify(request, job, cluster)
    assert c.kind == "hung" and c.faulty_nodes == [] and c.node_request is None and "no node blamed" in c.reason


def test_given_an_eks_job_that_moved_on_then_recovered_by_itself() -> None:
    request, job, cluster = _eks_setup()
    moved = [report(n, step=102, idle=2, job="kubeflow/llama") for n in KUBE_NAMES]
    assert _eks_classify(request, job, cluster, reports=moved).kind == "recovered_by_itself"


class RecordingProgress:
    """A ProgressReader that answers one job's key and says which key it was asked for."""

    def __init__(self, key: str, reports: list[ProgressReport]) -> None:
        self.key, self.reports, self.asked = key, reports, []

    def running_jobs(self) -> dict[str, list[ProgressReport]]:
        return {self.key: self.reports}

    def job(self, job: str) -> list[ProgressReport]:
        self.asked.append(job)
        return self.reports if job == self.key else []


def test_given_an_eks_hang_when_the_step_classifies_it_then_the_progress_is_read_again_under_the_key_its_pods_report() -> None:
    # Given an EKS job's hang, its pods reporting as kubeflow/llama and the job object known by its uid
    request, job, cluster = _eks_setup()
    moved = [report(n, step=102, idle=2, job="kubeflow/llama") for n in KUBE_NAMES]
    progress = RecordingProgress("kubeflow/llama", moved)
    step = ClassifyJobFailureInput(
        execution_name=f"hpj-{UID}-hung-1",
        request=request,
        inspection=CommandReply[JobSpecResult](requested_at=T0, completed_at=T0, result=JobSpecResult(job=job)),
        node_states=CommandReply[NodeStatesResult](requested_at=T0, completed_at=T0, result=NodeStatesResult(nodes=[])),
    )
    # When Classify Failure runs
    c = classify_job_failure(
        step,
        cluster=FakeCluster(cluster),
        now=T0 + timedelta(seconds=10),
        node_timeout_seconds=600,
        orchestrator="eks",
        progress=progress,
        ledger=FakeLedger(),
    )
    # Then it asked for namespace/name (never the uid, under which nothing is filed), and saw the job move on
    assert progress.asked == ["kubeflow/llama"] and c.kind == "recovered_by_itself"


# --- an enforced slowdown: the same path, its pace read again -----------------------------------------
def _slow_setup() -> tuple[JobRecoveryRequest, JobSpec, list[ClusterNode]]:
    """Job 1001 30 % over its 2 s baseline, ip-10-1-0-4 waiting least (the slow one)."""
    reports = [report(n, step_seconds=2.6, baseline=2.0, wait=0.6) for n in NAMES[:3]] + [
        report(NAMES[3], step_seconds=2.6, baseline=2.0, wait=0.01)
    ]
    verdict = slow_verdict(CLUSTER, "1001", reports, HangRules(slow_mode="enforce"), T0)
    assert verdict is not None and verdict.suspects == [NAMES[3]]
    request = JobRecoveryRequest(cluster=CLUSTER, job_id="1001", source="progress", reason="slow", detected_at=T0, hang=verdict)
    _, job, cluster = _setup()
    return request, job, cluster


def test_given_a_job_still_slow_then_slow_and_its_slow_node_is_only_checked() -> None:
    request, job, cluster = _slow_setup()
    still = [report(n, step_seconds=2.6, baseline=2.0) for n in NAMES]
    c = classify_hang(request, job, None, still, cluster, "hpj-1001-slow-1", T0 + timedelta(seconds=10))
    assert c.kind == "slow" and [f.slurm_node for f in c.faulty_nodes] == [NAMES[3]] and "is slow: steps take" in c.reason
    assert c.node_request is not None and {t.recommends for t in c.node_request.triggers} == {"check"}
    assert (
        c.node_execution_name == "hpj-1001-slow-1-nodes" and c.node_request.model_copy(update={"nested_for_job": "1001"}).hung_job == "1001"
    )


def test_given_a_slow_job_back_at_its_pace_then_recovered_by_itself() -> None:
    request, job, cluster = _slow_setup()
    back = [report(n, step_seconds=2.1, baseline=2.0) for n in NAMES]
    c = classify_hang(request, job, None, back, cluster, "hpj-1001-slow-1", T0 + timedelta(seconds=10))
    assert c.kind == "recovered_by_itself" and "steps at 1.05 × its baseline again, within 1.20 ×" in c.reason


def test_given_a_slow_job_whose_evidence_names_an_odd_node_then_it_is_not_blamed_by_its_stacks() -> None:
    # (a slow job's stacks are the others', a step later: only the waits name its slow node)
    request, job, cluster = _slow_setup()
    request = request.model_copy(update={"hang": request.hang.model_copy(update={"suspects": [], "suspects_why": ""})})  # type: ignore[union-attr]
    odd = HangEvidenceResult(
        job_id="1001",
        nodes=[NodeStacks(node=n, outcome="captured", text="t", signature="b" if n == NAMES[0] else "a") for n in NAMES],
    )
    still = [report(n, step_seconds=2.6, baseline=2.0) for n in NAMES]
    c = classify_hang(request, job, odd, still, cluster, "hpj-1001-slow-1", T0 + timedelta(seconds=10))
    assert c.kind == "slow" and c.faulty_nodes == [] and "no node blamed" in c.reason


def test_given_forged_rows_under_a_healthy_jobs_id_then_its_slowdown_is_measured_on_its_own_nodes_only() -> None:
    # Given a slow verdict, and now the job's own 4 nodes at their baseline pace, plus 5 rows under its
    # id from nodes it does not run on (anyone with the writer policy), 4.5 times slower than theirs
    request, job, cluster = _slow_setup()
    own = [report(n, step_seconds=2.0, baseline=2.0) for n in NAMES]
    forged = [report(f"ip-10-9-0-{i}", step_seconds=9.0, baseline=0.5) for i in range(5)]
    c = classify_hang(request, job, None, own + forged, cluster, "hpj-1001-slow-1", T0 + timedelta(seconds=10))
    # Then the forged rows decide nothing: the job's own pace is back
    assert c.kind == "recovered_by_itself"
    # And with only forged rows (or rows too young to measure), nothing is done at all
    c = classify_hang(request, job, None, forged, cluster, "hpj-1001-slow-1", T0 + timedelta(seconds=10))
    assert c.kind == "left_alone" and "comes from a node it runs on now" in c.reason
    young = [report(n, step_seconds=2.6, baseline=2.0, intervals=10) for n in NAMES]
    c = classify_hang(request, job, None, young, cluster, "hpj-1001-slow-1", T0 + timedelta(seconds=10))
    assert c.kind == "left_alone" and "do not measure its pace" in c.reason


def test_given_a_slowdown_suspect_suspected_before_then_it_is_still_only_checked() -> None:
    request, job, cluster = _slow_setup()
    still = [report(n, step_seconds=2.6, baseline=2.0) for n in NAMES]
    c = classify_hang(
        request, job, None, still, cluster, "hpj-1001-slow-1", T0 + timedelta(seconds=10), repeat_suspects=frozenset({NAMES[3]})
    )
    assert c.node_request is not None and {t.recommends for t in c.node_request.triggers} == {"check"}


def test_given_an_eks_job_whose_one_pod_log_differs_then_the_log_blames_no_node() -> None:
    # Given every EKS node at the same step (progress names no node), rank 0's log ending elsewhere
    request, job, cluster = _eks_setup()
    request = request.model_copy(update={"hang": request.hang.model_copy(update={"suspects": [], "suspects_why": ""})})  # type: ignore[union-attr]
    logs = HangEvidenceResult(
        job_id=UID,
        tool="pods/log tailLines=40",
        nodes=[NodeStacks(node=n, outcome="captured", text="t", signature="eval" if i == 0 else "wait") for i, n in enumerate(KUBE_NAMES)],
    )
    c = classify_hang(
        request,
        job,
        logs,
        [report(n, step=101, idle=100, job="kubeflow/llama") for n in KUBE_NAMES],
        cluster,
        f"hpj-{UID}-hung-1",
        T0 + timedelta(seconds=10),
        orchestrator="eks",
    )
    # Then no node is blamed for what a pod printed: the job is restarted where it was
    assert c.kind == "hung" and c.faulty_nodes == [] and "no node blamed" in c.reason


class LineageLedger:
    """The ledger's answers a slowdown's classification reads: the lineage and its restarts."""

    def __init__(self, history: list[RestartEntry]) -> None:
        self.history = history

    def lineage_root(self, cluster: str, job_id: str) -> str | None:
        return "1000"

    def restart_history(self, cluster: str, root: str) -> list[RestartEntry]:
        return self.history if root == "1000" else []

    def recovery_log(self, cluster: str, since: object) -> list[object]:
        return []

    def resubmission_claim(self, cluster: str, job_id: str) -> None:
        return None


def test_given_a_lineage_restarted_for_a_slowdown_when_it_is_slow_again_then_a_human_decides() -> None:
    # Given job 1001, a copy of 1000 restarted for a slowdown an hour ago, slow again
    request, job, cluster = _slow_setup()
    still = [report(n, step_seconds=2.6, baseline=2.0) for n in NAMES]
    step = ClassifyJobFailureInput(
        execution_name="hpj-1001-slow-1",
        request=request,
        inspection=CommandReply[JobSpecResult](requested_at=T0, completed_at=T0, result=JobSpecResult(job=job)),
        node_states=CommandReply[NodeStatesResult](requested_at=T0, completed_at=T0, result=NodeStatesResult(nodes=[])),
    )
    earlier = RestartEntry(
        failed_job_id="1000",
        new_job_id="1001",
        kind="slow",
        checkpoint_step=1000,
        restarted_at=T0 - timedelta(hours=1),
        incident="hpj-1000-slow-9",
    )

    def classify(history: list[RestartEntry]):  # type: ignore[no-untyped-def]
        return classify_job_failure(
            step,
            cluster=FakeCluster(cluster),
            now=T0,
            node_timeout_seconds=600,
            progress=RecordingProgress("1001", still),
            ledger=LineageLedger(history),  # type: ignore[arg-type]
            restart_window_seconds=6 * 3600,
        )

    # When it is classified, Then it escalates (a crash loop) before any node is checked or the job stopped
    with pytest.raises(CrashLoopDetected, match="slow again after its restart for a slowdown"):
        classify([earlier])
    # And a lineage restarted for another reason, or long ago, is classified as slow as usual
    assert classify([earlier.model_copy(update={"kind": "hung"})]).kind == "slow"
    assert classify([earlier.model_copy(update={"restarted_at": T0 - timedelta(hours=7)})]).kind == "slow"


# --- an answer carrying secrets, as the state holds it (an agent older than redaction) ----------------
SECRET_KEY = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
TOKEN = "ghp_" + "Z" * 36


def _raw_evidence() -> dict[str, object]:
    """The evidence as SendTaskSuccess put it in the state: unredacted, the odd rank's last line a secret."""
    said = f"step 2050 loss 1.69\nexport AWS_SECRET_ACCESS_KEY={SECRET_KEY} GH={TOKEN}"
    stacks = [{"node": n, "outcome": "captured", "text": "all_reduce", "signature": "a" * 16} for n in NAMES[:3]]
    odd = {"node": NAMES[3], "outcome": "captured", "text": said, "signature": "b" * 16}
    result = {"job_id": "1001", "job_state": "RUNNING", "job_text": f"JobId=1001 Comment=key={SECRET_KEY}", "nodes": [*stacks, odd]}
    return {"requested_at": T0.isoformat(), "completed_at": T0.isoformat(), "result": result}


def test_given_an_answer_carrying_secrets_when_classified_then_neither_the_ledger_nor_the_classification_holds_one() -> None:
    # Given a hang whose evidence, as the state holds it, carries an AWS secret key and a token
    request, job, cluster = _setup()
    step = ClassifyJobFailureInput.model_validate(
        {
            "execution_name": "hpj-1001-hung-1",
            "request": request.model_dump(mode="json"),
            "inspection": {"requested_at": T0.isoformat(), "completed_at": T0.isoformat(), "result": {"job": job.model_dump(mode="json")}},
            "node_states": {"requested_at": T0.isoformat(), "completed_at": T0.isoformat(), "result": {"nodes": []}},
            "evidence": _raw_evidence(),
        }
    )
    ledger = FakeLedger()
    # When Classify Failure runs (it keeps the evidence with the incident)
    c = classify_job_failure(
        step,
        cluster=FakeCluster(cluster),
        now=T0 + timedelta(seconds=10),
        node_timeout_seconds=600,
        progress=RecordingProgress("1001", [*[report(n, step=101, idle=100) for n in NAMES[:3]], report(NAMES[3], step=100, idle=105)]),
        ledger=ledger,  # type: ignore[arg-type]
    )
    # Then the evidence kept and the classification (its reasons go to the record and every channel) hold neither
    kept = ledger.evidence_of("hpj-1001-hung-1").model_dump_json() + c.model_dump_json()
    assert SECRET_KEY[:16] not in kept and SECRET_KEY[-16:] not in kept and "Z" * 16 not in kept
    assert "[REDACTED:aws-secret-key]" in kept


def test_given_an_answer_carrying_secrets_when_the_outcome_is_recorded_then_the_timeline_holds_none() -> None:
    # Given the state Record Job Outcome reads, its evidence unredacted
    state = JobWorkflowState.model_validate({"evidence": _raw_evidence()})
    # When the timeline's evidence line is written; Then it says where the rank was, without the secret
    assert state.evidence is not None
    said = evidence_text(state.evidence.result)
    assert SECRET_KEY[:16] not in said and "Z" * 16 not in said and "[REDACTED:" in said


# --- a verdict the job's own nodes do not bear out ------------------------------------------
def test_given_a_verdict_from_a_forged_fast_pace_then_the_job_is_left_alone_by_its_own_nodes_pace() -> None:
    # Given a verdict whose threshold (45 s: the heartbeat's gap) came from rows claiming half-second steps
    forged = [report(n, step=101, idle=90, step_seconds=0.5) for n in NAMES]
    verdict = stall_verdict(CLUSTER, "1001", forged, HangRules(), T0)
    assert verdict is not None and verdict.threshold_seconds == 45.0
    request = JobRecoveryRequest(cluster=CLUSTER, job_id="1001", source="progress", reason="hung", detected_at=T0, hang=verdict)
    _, job, cluster = _setup()
    # When Classify Failure reads the job's own nodes again: 300 s a step, 100 s since the last
    own = [report(n, step=101, idle=100, step_seconds=300.0) for n in NAMES]
    c = _classify(request, job, cluster, reports=own)
    # Then it is no hang by its own pace: nothing is done
    assert c.kind == "left_alone" and "its own nodes' pace makes 1500 s without progress its threshold" in c.reason


def test_given_a_node_an_hour_ahead_that_did_not_step_then_the_hang_is_not_taken_as_cleared() -> None:
    # Given a hung job whose nodes' clocks run an hour ahead (their stamps after the verdict's last progress)
    request, job, cluster = _setup()
    ahead = [*[report(n, step=101, idle=-3600) for n in NAMES[:3]], report(NAMES[3], step=100, idle=-3600)]
    # When Classify Failure reads them again: no node stepped past step 101
    c = _classify(request, job, cluster, reports=ahead)
    # Then it is still hung
    assert c.kind == "hung"


@pytest.mark.parametrize("orchestrator", ["slurm", "eks"])
def test_given_a_hang_left_alone_on_a_running_job_then_its_record_says_it_runs_on(orchestrator: str) -> None:
    # Given a hung job someone else restarts, still running, on either orchestrator
    if orchestrator == "eks":
        request, job, cluster = _eks_setup(auto_resume=True, restarted_by="kubeflow")
        classification = _eks_classify(request, job, cluster)
    else:
        request, job, cluster = _setup(auto_resume=True)
        classification = _classify(request, job, cluster)
    assert classification.kind == "left_alone" and job.state in ("Running", "RUNNING")
    # When the incident's record is written
    (fate,) = job_incident_job_fates(JobWorkflowState(request=request, classification=classification), "duplicate", None)
    # Then the job is left running, as its orchestrator reports it, not "ended by itself"
    assert (fate.fate, fate.copy_state) == ("left_running", job.state)


def test_the_two_orchestrators_words_for_a_running_job_never_meet() -> None:
    # A record that does not carry its orchestrator reads a job's state against both sets
    assert not SLURM_STILL_RUNNING & EKS_STILL_RUNNING
    assert all(word.isupper() for word in SLURM_STILL_RUNNING) and not any(word.isupper() for word in EKS_STILL_RUNNING)
    assert still_running_on_either("Running") and still_running_on_either("RUNNING") and not still_running_on_either("COMPLETING")
