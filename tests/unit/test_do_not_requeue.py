"""A job its launcher said not to requeue (exit code 93, NVIDIA's resiliency extension) is never
restarted by JobRecovery, on Slurm and on EKS, and a human is paged with what to do."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hyperpod_recovery.domain.jobs.eks_jobs import UNKNOWN_FAILURE_EXIT_CODE, failed_exit_code
from hyperpod_recovery.domain.jobs.job_failure import classify_failure
from hyperpod_recovery.domain.messages.advice import Deployment
from hyperpod_recovery.errors import DoNotRequeue
from hyperpod_recovery.models.cluster import ClusterNode
from hyperpod_recovery.models.commands import CommandReply, JobSpec, JobSpecResult, NodeStatus
from hyperpod_recovery.models.job_events import DO_NOT_REQUEUE_EXIT_CODE, JobFailedDetail
from hyperpod_recovery.models.job_recovery import JobWorkflowState, RecordJobOutcomeInput
from hyperpod_recovery.models.kubernetes import OPT_IN_ANNOTATION, KubeJobRef
from hyperpod_recovery.models.node_recovery import StepError
from hyperpod_recovery.models.requests import JobRecoveryRequest
from hyperpod_recovery.steps.record_outcome import record_outcome
from tests.fakes import CLUSTER, T0, FakeLedger, FakeNotifier, node_id
from tests.unit.test_eks_job_recovery import _cluster, _poll

NODES = ["ip-10-1-0-1", "ip-10-1-0-2"]
UID = "0f8fad5b-d9cb-469f-a165-70867728950e"
LLAMA = KubeJobRef(kind="PyTorchJob", namespace="kubeflow", name="llama")


def _failure(state: str = "FAILED", exit_code: int = DO_NOT_REQUEUE_EXIT_CODE, **changes: Any) -> JobFailedDetail:
    values: dict[str, Any] = {
        "cluster_name": CLUSTER,
        "job_id": "1001",
        "name": "llama",
        "nodes": NODES,
        "state": state,
        "reason": "NonZeroExitCode" if state == "FAILED" else "NodeDown",
        "exit_code": exit_code,
        "ended_at": T0,
        "event_key": f"{CLUSTER}:1001:{int(T0.timestamp())}",
    }
    return JobFailedDetail(**{**values, **changes})


def _request(failure: JobFailedDetail | None, *, dry_run: bool = False, job_id: str = "1001") -> JobRecoveryRequest:
    return JobRecoveryRequest(
        cluster=CLUSTER,
        job_id=job_id,
        source="job_failed" if failure is not None else "manual",
        reason="job failed",
        detected_at=T0,
        failure=failure,
        dry_run=dry_run,
        incident_id="hpj-1001",
        received_at=T0,
    )


def _job(state: str = "FAILED", **changes: Any) -> JobSpec:
    return JobSpec(**{"job_id": "1001", "name": "llama", "num_nodes": 2, "nodes": NODES, "state": state, **changes})


def _nodes(slurm_state: str = "idle", hyperpod_status: str = "Running") -> tuple[list[NodeStatus], list[ClusterNode]]:
    slurm = [NodeStatus(name=NODES[0], state="idle"), NodeStatus(name=NODES[1], state=slurm_state)]
    hyperpod = [
        ClusterNode(
            node_id=node_id(i),
            instance_group="workers",
            status=hyperpod_status if i == 2 else "Running",
            private_dns_hostname=f"{name}.ec2.internal",
        )
        for i, name in enumerate(NODES, start=1)
    ]
    return slurm, hyperpod


def _classify(request: JobRecoveryRequest, job: JobSpec | None, slurm_state: str = "idle", hyperpod_status: str = "Running") -> Any:
    slurm, hyperpod = _nodes(slurm_state, hyperpod_status)
    return classify_failure(request, job, slurm, hyperpod, "hpj-1001", T0)


# --- Slurm: the verdict comes first ----------------------------------------------------------------
def test_exit_93_on_healthy_nodes_is_never_resubmitted_and_says_whose_verdict_it_is() -> None:
    # Given job 1001 (llama) ended FAILED with exit code 93 on healthy nodes
    # When JobRecovery classifies the failure
    with pytest.raises(DoNotRequeue) as raised:
        _classify(_request(_failure()), _job())
    # Then it escalates, in words naming the job, the code and the launcher's verdict
    assert str(raised.value) == (
        "job 1001 (llama) ended FAILED with exit code 93: its launcher (NVIDIA resiliency extension) "
        "decided it must not be requeued; not resubmitted"
    )


def test_exit_93_with_a_node_failure_is_not_resubmitted_nor_are_its_nodes_replaced_for_it() -> None:
    # Given a NODE_FAIL end with exit code 93, one node down in Slurm and failed in HyperPod
    # When JobRecovery classifies the failure
    with pytest.raises(DoNotRequeue, match="Slurm also reported a node failure: its nodes are not replaced for this job"):
        # Then no node recovery is planned (no classification at all): the verdict wins
        _classify(_request(_failure("NODE_FAIL")), _job("NODE_FAIL"), slurm_state="down", hyperpod_status="Failure")


@pytest.mark.parametrize(
    ("failure", "job"),
    [
        (_failure(auto_resume=True), _job()),
        (_failure(), _job(auto_resume=True)),
        (_failure("NODE_FAIL"), _job("PENDING")),
        (_failure(), None),
    ],
    ids=["event-auto-resume", "script-auto-resume", "requeued-by-slurm", "slurmctld-forgot-it"],
)
def test_exit_93_wins_over_every_other_rule(failure: JobFailedDetail, job: JobSpec | None) -> None:
    # Given an exit-93 end that another rule would leave alone or escalate otherwise
    # When it is classified
    # Then the launcher's verdict is the one reported
    with pytest.raises(DoNotRequeue, match="exit code 93"):
        _classify(_request(failure), job)


@pytest.mark.parametrize("exit_code", [92, 94, 1, 0])
def test_an_exit_code_next_to_93_is_an_ordinary_failure(exit_code: int) -> None:
    # Given healthy nodes and an exit code that is not the launcher's verdict
    # When it is classified
    result = _classify(_request(_failure(exit_code=exit_code)), _job())
    # Then it is an application failure, restarted as usual
    assert result.kind == "application"


def test_a_job_a_human_names_by_hand_carries_no_verdict_and_is_restarted() -> None:
    # Given a human asks for job 1001's recovery (no failure event: the way to overrule the launcher)
    # When it is classified
    # Then it is restarted as an application failure
    assert _classify(_request(None), _job()).kind == "application"


@given(
    exit_code=st.integers(min_value=0, max_value=255),
    state=st.sampled_from(["FAILED", "NODE_FAIL", "TIMEOUT"]),
    slurm_state=st.sampled_from(["idle", "down"]),
)
def test_a_failure_is_refused_a_restart_exactly_when_its_exit_code_is_93(exit_code: int, state: str, slurm_state: str) -> None:
    # Given any end, exit code and node state
    request = _request(_failure(state, exit_code=exit_code))
    # When it is classified
    try:
        kind = _classify(request, _job(state), slurm_state=slurm_state).kind
    except DoNotRequeue:
        kind = "do_not_requeue"
    # Then only exit code 93 is refused, and nothing else is
    assert (kind == "do_not_requeue") is (exit_code == DO_NOT_REQUEUE_EXIT_CODE)


# --- EKS: the exit code comes from the job's pods ----------------------------------------------------
def _pod(name: str, *statuses: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"phase": "Failed", "containerStatuses": list(statuses)}}


def _ended(code: int, *, last: bool = False, running: bool = False) -> dict[str, Any]:
    terminated = {"terminated": {"exitCode": code}}
    if last:  # restarted by the kubelet, now waiting (CrashLoopBackOff)
        state = {"running": {"startedAt": "2026-03-14T09:00:00Z"}} if running else {"waiting": {"reason": "CrashLoopBackOff"}}
        return {"name": "pytorch", "state": state, "lastState": terminated}
    return {"name": "pytorch", "state": terminated}


@pytest.mark.parametrize(
    ("pods", "code"),
    [
        ([_pod("llama-worker-0", _ended(137)), _pod("llama-worker-1", _ended(93))], 93),
        ([_pod("llama-worker-1", _ended(2)), _pod("llama-worker-0", _ended(0), _ended(1))], 1),
        ([_pod("llama-worker-0", _ended(93, last=True))], 93),
        ([_pod("llama-worker-0", _ended(93, last=True, running=True))], UNKNOWN_FAILURE_EXIT_CODE),
        ([_pod("llama-worker-0", _ended(-1), _ended(300))], UNKNOWN_FAILURE_EXIT_CODE),
        ([], UNKNOWN_FAILURE_EXIT_CODE),
    ],
    ids=["one-verdict-stands-for-the-job", "first-non-zero-by-pod-name", "crash-loop", "running-again", "out-of-range", "no-pods"],
)
def test_a_failed_jobs_exit_code_is_read_from_its_containers(pods: list[dict[str, Any]], code: int) -> None:
    # Given the pods of a failed job, their containers ended as given
    # When the poller reads the job's exit code
    # Then it is the launcher's verdict if any container gave it, else the first failure's code
    assert failed_exit_code(pods) == code


@pytest.mark.parametrize("exit_code", [93, 1, 94])
def test_the_eks_poller_carries_the_containers_exit_code_into_the_failure(exit_code: int) -> None:
    # Given an opted-in PyTorchJob whose containers ended with an exit code
    fake = _cluster(annotations={OPT_IN_ANNOTATION: "true"})
    fake.job_fails("PyTorchJob", "kubeflow", "llama", exit_code=exit_code)
    # When the job poller finds it
    ((_, payload),) = _poll(fake)[1].started.items()
    # Then JobRecovery's request carries that code
    request = JobRecoveryRequest.model_validate(json.loads(payload))
    assert request.failure is not None and request.failure.exit_code == exit_code


def test_exit_93_on_eks_is_never_re_created_and_names_the_job_as_kubectl_does() -> None:
    # Given the poller's failure of PyTorchJob kubeflow/llama with exit code 93
    failure = _failure(job_id=UID, name="kubeflow/llama", kube=LLAMA)
    job = _job(job_id=UID, kube=LLAMA)
    # When it is classified
    with pytest.raises(DoNotRequeue) as raised:
        classify_failure(_request(failure, job_id=UID), job, [], [], "hpj-x", T0, "eks")
    # Then it is refused in the orchestrator's own words
    assert str(raised.value) == (
        "PyTorchJob kubeflow/llama ended FAILED with exit code 93: its launcher (NVIDIA resiliency extension) "
        "decided it must not be requeued; not re-created"
    )


# --- the human's message ------------------------------------------------------------------------------
def _escalate(failure: JobFailedDetail, *, dry_run: bool = False, orchestrator: str = "slurm") -> tuple[str, str, dict[str, str]]:
    """Record Job Outcome as Escalate Job Incident calls it after Classify Failure raised (the job
    captured, no classification)."""
    request = _request(failure, dry_run=dry_run, job_id=failure.job_id)
    job = _job(job_id=failure.job_id, kube=failure.kube)
    try:
        classify_failure(request, job, [], [], "hpj-1001", T0, orchestrator)  # type: ignore[arg-type]
    except DoNotRequeue as exc:
        error = StepError(Error=type(exc).__name__, Cause=str(exc))
    inspection = CommandReply(
        command_id="c", type="capture_job_spec", requested_at=T0, started_at=T0, completed_at=T0, result=JobSpecResult(job=job)
    )
    state = JobWorkflowState(request=request, inspection=inspection)
    step = RecordJobOutcomeInput(execution_name="hpj-1001", disposition="escalated", state=state, error=error)
    notifier = FakeNotifier()
    record_outcome(
        step,
        ledger=FakeLedger(),
        notifier=notifier,
        cluster=CLUSTER,
        execution_url="https://x",
        now=T0,
        orchestrator=orchestrator,  # type: ignore[arg-type]
        deployment=Deployment(stack="hpr"),
    )
    ((subject, body, attributes),) = notifier.published
    return subject, body, attributes


def test_the_slurm_page_names_the_job_the_verdict_and_both_ways_to_restart_it_by_hand() -> None:
    # Given job 1001 (llama) ended with exit code 93
    # When its incident is recorded
    subject, body, attributes = _escalate(_failure())
    # Then a human is paged, told why in the pipeline's words, and given the commands to overrule it
    assert attributes["severity"] == "page" and subject.startswith(f"[hyperpod-recovery] {CLUSTER}: ESCALATED DoNotRequeue job 1001")
    assert body.startswith("ACTION NEEDED")
    assert "job 1001 (llama) ended FAILED with exit code 93: its launcher (NVIDIA resiliency extension) decided" in body
    assert "job 1001 (llama) was NOT resubmitted" in body and "`squeue -j 1001`" in body
    assert "`hyperpod-recovery drill --stack hpr --job 1001 --live --yes`" in body
    assert "Runbook: docs/runbook.md#escalations-the-error-says-what-happened (row DoNotRequeue)." in body


def test_the_eks_page_gives_kubectls_command_and_no_slurm_job_drill() -> None:
    # Given PyTorchJob kubeflow/llama ended with exit code 93
    # When its incident is recorded
    _, body, attributes = _escalate(_failure(job_id=UID, name="kubeflow/llama", kube=LLAMA), orchestrator="eks")
    # Then the page says how to re-create it with kubectl, and offers no Slurm job id to drill
    assert attributes["severity"] == "page"
    assert "PyTorchJob kubeflow/llama was NOT re-created" in body and "kubectl -n kubeflow get pytorchjob llama" in body
    assert "--job" not in body


def test_a_dry_run_with_exit_93_pages_nobody_and_says_it_would_not_resubmit() -> None:
    # Given the same failure in a dry run
    # When its incident is recorded
    _, body, attributes = _escalate(_failure(), dry_run=True)
    # Then it is quiet, and says what a real run would not have done
    assert attributes["severity"] == "quiet" and "would not be resubmitted (dry run)" in body
