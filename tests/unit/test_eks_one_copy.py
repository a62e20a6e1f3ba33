"""One live copy of a job on EKS (adapters/eks_orchestrator/jobs.py resubmit): the old job is stopped the
way the controller that owns it honours (Kueue: its Workload's spec.active; otherwise
runPolicy.suspend), the stop is read back before anything is created, and where it cannot be made
certain nothing is created. The API server (sandbox/kube/) runs Kubeflow's training operator and,
where asked, Kueue, so what they would undo is undone here too."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from hyperpod_recovery.adapters.eks_orchestrator import EksOrchestrator
from hyperpod_recovery.domain.jobs.eks_jobs import GENERATION_ANNOTATION, RECREATION_TOKEN_LABEL, RESUBMITTED_FROM_ANNOTATION
from hyperpod_recovery.errors import JobSpecUnavailable, KubeAccessDenied, OldCopyStillStopping
from hyperpod_recovery.models.commands import CheckpointRef, CordonNodes, ResubmitJob
from hyperpod_recovery.models.kubernetes import KUEUE_QUEUE_LABEL, OPT_IN_ANNOTATION, KubeJobRef
from sandbox.kube import FakeKube
from tests.unit.eks_stopping import Clock, until_stopped

AT = datetime(2026, 3, 14, 9, 5, tzinfo=UTC)
CLOCKS: dict[int, Clock] = {}  # (each cluster's, by the fake's id)
A, B = "hyperpod-i-0123456789abcdef0", "hyperpod-i-0123456789abcdef1"
LLAMA = KubeJobRef(kind="PyTorchJob", namespace="kubeflow", name="llama")
CHECKPOINT = CheckpointRef(uri="s3://ckpt-bucket/llama/step-000001200/", step=1200)
TOKEN = "5" * 32
QUEUE = {KUEUE_QUEUE_LABEL: "team-a"}


def _cluster(*, kueue: bool = False, suspend_field: bool = True, labels: dict[str, str] | None = None) -> FakeKube:
    clock = Clock(AT)
    fake = FakeKube(now=clock, kueue=kueue, suspend_field=suspend_field)
    CLOCKS[id(fake)] = clock
    fake.add_hyperpod_node("i-0123456789abcdef0")
    fake.add_hyperpod_node("i-0123456789abcdef1")
    fake.add_job("PyTorchJob", "kubeflow", "llama", nodes=[A, B], annotations={OPT_IN_ANNOTATION: "true"}, labels=labels)
    fake.calls.clear()
    return fake


def _uid(fake: FakeKube, name: str = "llama") -> str:
    return str(fake.jobs[("PyTorchJob", "kubeflow", name)]["metadata"]["uid"])


def _resubmit_once(fake: FakeKube, token: str = TOKEN) -> Any:
    orchestrator = EksOrchestrator(fake, None, fake.now)  # type: ignore[arg-type]
    return orchestrator.execute(ResubmitJob(job_id=_uid(fake), checkpoint=CHECKPOINT, kube=LLAMA, recreation_token=token), "hpr-a")


def _resubmit(fake: FakeKube, token: str = TOKEN) -> Any:
    """Resubmit Job as the workflow runs it: tried again while the old copy's pods are Terminating."""
    return until_stopped(lambda: _resubmit_once(fake, token), CLOCKS[id(fake)])[0]


def _suspend_only(fake: FakeKube) -> None:
    """What Resubmit Job did before: the copy created, then the old job's runPolicy.suspend set."""
    old = fake.jobs[("PyTorchJob", "kubeflow", "llama")]
    body = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {
            "name": "llama-r1",
            "labels": dict(old["metadata"].get("labels") or {}),
            "annotations": {RESUBMITTED_FROM_ANNOTATION: _uid(fake)},
        },
        "spec": old["spec"],
    }
    fake.create_job("PyTorchJob", "kubeflow", body)
    fake.patch_job(LLAMA, [{"op": "add", "path": "/spec/runPolicy/suspend", "value": True}])


# --- what the cluster does (the fake's controllers) -------------------------------------------------
def test_kueue_un_suspends_a_merely_suspended_job_its_workload_holds_admitted() -> None:
    # Given a job Kueue manages (its queue-name label), admitted and running
    fake = _cluster(kueue=True, labels=QUEUE)
    ((workload_key, workload),) = fake.workloads.items()
    assert workload["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == _uid(fake)
    # When someone suspends it with runPolicy.suspend
    fake.patch_job(LLAMA, [{"op": "add", "path": "/spec/runPolicy/suspend", "value": True}])
    # Then Kueue un-suspends it ("Job admitted, unsuspending"): it runs again
    assert fake.jobs[("PyTorchJob", "kubeflow", "llama")]["spec"]["runPolicy"]["suspend"] is False
    assert fake._live(fake.jobs[("PyTorchJob", "kubeflow", "llama")])
    # And an inactive Workload is evicted and its job suspended for good
    fake.patch_workload("v1beta2", *workload_key, [{"op": "add", "path": "/spec/active", "value": False}])
    job, workload = fake.jobs[("PyTorchJob", "kubeflow", "llama")], fake.workloads[workload_key]
    assert job["spec"]["runPolicy"]["suspend"] is True
    assert {c["type"]: (c["status"], c["reason"]) for c in workload["status"]["conditions"]}["Evicted"] == ("True", "Deactivated")
    # And its pods run on through their grace period (30 s, the default), then are gone
    assert fake._live(job) and all(p["metadata"]["deletionTimestamp"] == "2026-03-14T09:05:30Z" for p in fake.pods.values())
    CLOCKS[id(fake)].advance(29)
    fake.tick()
    assert fake._live(job)
    CLOCKS[id(fake)].advance(1)
    fake.tick()
    assert not fake._live(job) and fake.pods == {}


def test_second_copies_sees_the_old_and_the_new_copy_live_at_once_when_suspend_is_undone() -> None:
    # Given a Kueue-managed job, re-created and then merely suspended (the old Resubmit Job)
    fake = _cluster(kueue=True, labels=QUEUE)
    _suspend_only(fake)
    # Then the fake reports the moment both copies of the lineage were live
    assert fake.second_copies() == [{"lineage": "llama", "copies": ["llama", "llama-r1"], "at": 0.0}]


# --- Resubmit Job: one live copy ----------------------------------------------------------------------
def test_a_kueue_managed_job_is_stopped_by_its_workload_then_re_created_with_never_two_copies() -> None:
    # Given a job Kueue manages, running on two nodes
    fake = _cluster(kueue=True, labels=QUEUE)
    # When Resubmit Job re-creates it
    result = _resubmit(fake)
    # Then its Workload was made inactive (the way Kueue honours), and it is suspended with its pods gone
    ((_, workload),) = [(k, w) for k, w in fake.workloads.items() if w["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == _uid(fake)]
    old = fake.jobs[("PyTorchJob", "kubeflow", "llama")]
    assert workload["spec"]["active"] is False and old["spec"]["runPolicy"]["suspend"] is True and not fake._live(old)
    # And the copy exists, Kueue-managed too, admitted and running; never were two live at once
    new = fake.jobs[("PyTorchJob", "kubeflow", "llama-r1")]
    assert result.cancelled_old and result.new_job_id == new["metadata"]["uid"] and new["metadata"]["labels"][KUEUE_QUEUE_LABEL] == "team-a"
    assert fake._live(new) and fake.second_copies() == []
    # And the old job was stopped before the copy was made
    assert fake.calls.index(("patch", "workloads")) < fake.calls.index(("create", "pytorchjobs"))


def test_an_unmanaged_job_is_suspended_read_back_and_only_then_re_created() -> None:
    fake = _cluster()
    result = _resubmit(fake)
    assert result.cancelled_old and fake.jobs[("PyTorchJob", "kubeflow", "llama")]["spec"]["runPolicy"]["suspend"] is True
    assert fake.calls.index(("patch", "pytorchjobs")) < fake.calls.index(("create", "pytorchjobs")) and fake.second_copies() == []


def test_a_crd_that_prunes_suspend_is_detected_and_nothing_is_created() -> None:
    # Given a training operator older than 1.7: its CRD has no runPolicy.suspend; the API server prunes it and answers 200
    fake = _cluster(suspend_field=False)
    # When Resubmit Job runs, then it reads the suspension back, finds none, and creates nothing
    with pytest.raises(JobSpecUnavailable, match="CRD has no such field"):
        _resubmit(fake)
    assert ("PyTorchJob", "kubeflow", "llama-r1") not in fake.jobs and fake._live(fake.jobs[("PyTorchJob", "kubeflow", "llama")])


def test_a_kueue_job_without_a_workload_found_is_not_re_created_beside_it() -> None:
    # Given a job labelled for Kueue whose Workload we cannot see (Kueue serves its API, and no Workload of the job)
    fake = _cluster(kueue=True, labels=QUEUE)
    fake.workloads.clear()
    fake._settle = lambda keys=None: None  # type: ignore[method-assign]  (and Kueue makes none meanwhile)
    with pytest.raises(JobSpecUnavailable, match="no Workload of it was found"):
        _resubmit(fake)
    assert ("PyTorchJob", "kubeflow", "llama-r1") not in fake.jobs


def test_a_job_labelled_for_a_kueue_the_cluster_does_not_have_is_not_re_created_and_the_answer_says_kueue_is_absent() -> None:
    # Given a job labelled for a Kueue queue on a cluster whose API server serves no kueue.x-k8s.io
    fake = _cluster(labels=QUEUE)
    with pytest.raises(JobSpecUnavailable, match=r"Kueue is not installed \(no kueue.x-k8s.io is served\)"):
        _resubmit(fake)
    assert ("PyTorchJob", "kubeflow", "llama-r1") not in fake.jobs and fake.calls[-1] == ("get", "/apis/kueue.x-k8s.io")


def test_an_old_copy_still_stopping_is_retried_and_the_retry_finds_its_own_work() -> None:
    # Given the old job's pods still running a moment after its suspension (its operator has not acted yet)
    fake = _cluster()
    original = fake._operator_reconciles
    fake._operator_reconciles = lambda key: None  # type: ignore[method-assign]
    with pytest.raises(
        OldCopyStillStopping,
        match=r"is made while anything of it runs \(nothing created\): 2 pod\(s\) of it still run \(llama-worker-0, llama-worker-1\)$",
    ):
        _resubmit_once(fake)
    assert ("PyTorchJob", "kubeflow", "llama-r1") not in fake.jobs  # nothing created meanwhile
    # When the operator has deleted them, their grace period is over, and Resubmit Job runs again
    fake._operator_reconciles = original  # type: ignore[method-assign]
    fake._settle()
    result = _resubmit(fake)
    # Then the job is re-created once, the old one found stopped already
    assert result.cancelled_old and sorted(k[2] for k in fake.jobs) == ["llama", "llama-r1"] and fake.second_copies() == []


def test_a_stopped_jobs_terminating_pods_still_run_and_its_copy_waits_until_they_are_gone() -> None:
    # Given a job whose pods take 120 s to stop (terminationGracePeriodSeconds, in its pod template)
    fake = _cluster()
    for pod in fake.pods.values():
        pod["spec"]["terminationGracePeriodSeconds"] = 120
    clock = CLOCKS[id(fake)]
    # When Resubmit Job stops it, then its copy is not made while they are Terminating: the answer says until when
    with pytest.raises(
        OldCopyStillStopping,
        match=r"2 pod\(s\) of it still run, all Terminating: their grace period ends at 2026-03-14T09:07:00Z "
        r"\(llama-worker-0, llama-worker-1\)",
    ) as waiting:
        _resubmit_once(fake)
    assert (
        "stays stopped, and no copy of it is made while anything of it runs (nothing created)" in str(waiting.value)
        and ("PyTorchJob", "kubeflow", "llama-r1") not in fake.jobs
    )
    # And a try just before the grace period ends still waits, one after it makes the copy: never two at once
    clock.advance(119)
    with pytest.raises(OldCopyStillStopping):
        _resubmit_once(fake)
    clock.advance(1)
    result = _resubmit_once(fake)
    assert result.cancelled_old and result.new_job_name == "kubeflow/llama-r1" and fake.second_copies() == []


def test_a_pod_terminating_on_a_dead_node_still_runs_and_its_copy_waits_until_the_node_is_gone() -> None:
    # Given node B not Ready (its kubelet gone): a deleted pod there stays Terminating past its grace period
    fake = _cluster()
    fake.hyperpod_goes_not_ready(B)
    clock = CLOCKS[id(fake)]
    with pytest.raises(OldCopyStillStopping):
        _resubmit_once(fake)
    clock.advance(600)
    # Then the re-creation still waits, and says no kubelet confirms the pod stopped
    with pytest.raises(OldCopyStillStopping, match=r"past the end of their grace period .*no kubelet has confirmed them stopped"):
        _resubmit_once(fake)
    assert list(fake.pods) == [("kubeflow", "llama-worker-1")] and ("PyTorchJob", "kubeflow", "llama-r1") not in fake.jobs
    # When HyperPod replaces the node (its Node object deleted, its pods with it), then the copy is made
    fake.hyperpod_removes(B)
    assert _resubmit_once(fake).cancelled_old and fake.second_copies() == []


def test_a_workload_write_refused_creates_nothing() -> None:
    fake = _cluster(kueue=True, labels=QUEUE)
    fake.faults[("patch", "workloads")] = [KubeAccessDenied("PATCH workloads: 403 Forbidden")]
    with pytest.raises(KubeAccessDenied):
        _resubmit(fake)
    assert ("PyTorchJob", "kubeflow", "llama-r1") not in fake.jobs and fake._live(fake.jobs[("PyTorchJob", "kubeflow", "llama")])


# --- our re-creation is what our ledger recorded ----------------------------------------------------
def test_a_pre_created_impostor_is_never_adopted_and_the_victim_is_left_running() -> None:
    # Given a tenant who pre-created llama-r1 annotated as our re-creation of the victim
    fake = _cluster()
    fake.add_job(
        "PyTorchJob",
        "kubeflow",
        "llama-r1",
        nodes=[],
        annotations={RESUBMITTED_FROM_ANNOTATION: _uid(fake), GENERATION_ANNOTATION: "1", OPT_IN_ANNOTATION: "true"},
    )
    # When Resubmit Job runs, then it refuses: the object lacks the token our ledger recorded
    with pytest.raises(JobSpecUnavailable, match="lacks the token"):
        _resubmit(fake)
    # And the victim is not stopped
    victim = fake.jobs[("PyTorchJob", "kubeflow", "llama")]
    assert "suspend" not in victim["spec"]["runPolicy"] and fake._live(victim)


def test_a_create_whose_answer_was_lost_is_found_by_its_token_whatever_its_name() -> None:
    # Given a first try that created the copy (its answer lost), and the old object's generation changed since
    fake = _cluster()
    first = _resubmit(fake)
    fake.jobs[("PyTorchJob", "kubeflow", "llama")]["metadata"]["annotations"][GENERATION_ANNOTATION] = "7"
    # When Resubmit Job runs again with the same token, then it finds that copy and makes no other
    again = _resubmit(fake)
    assert again.new_job_id == first.new_job_id and sorted(k[2] for k in fake.jobs) == ["llama", "llama-r1"]
    assert fake.jobs[("PyTorchJob", "kubeflow", "llama-r1")]["metadata"]["labels"][RECREATION_TOKEN_LABEL] == TOKEN


# --- a bare pod with a job's labels is nobody's job ---------------------------------------------------
def test_a_bare_labelled_pod_on_the_failed_node_does_not_make_a_healthy_job_affected() -> None:
    # Given a healthy job on node A, and a hand-made copy of one of its pods (its labels, no owner) on node B
    fake = FakeKube(now=lambda: AT)
    fake.add_hyperpod_node("i-0123456789abcdef0")
    fake.add_hyperpod_node("i-0123456789abcdef1")
    fake.add_job("PyTorchJob", "kubeflow", "llama", nodes=[A], annotations={OPT_IN_ANNOTATION: "true"})
    fake.add_pod("kubeflow", "llama-debug", B, labels={"training.kubeflow.org/job-name": "llama"})
    # When node B fails and is cordoned, then no job is found on it
    result = EksOrchestrator(fake, None, lambda: AT).cordon(CordonNodes(nodes=[B], reason="hyperpod-recovery:hpr-a"))  # type: ignore[arg-type]
    assert result.jobs == []


def test_a_copy_refused_after_the_old_one_stopped_says_the_old_one_stays_stopped() -> None:
    # Given the create refused (RBAC lets us suspend but not create) once the old job is stopped
    fake = _cluster()
    fake.faults[("create", "pytorchjobs")] = [KubeAccessDenied("POST pytorchjobs: 403 Forbidden")]
    # Then the error keeps its name, and says that nothing of the job runs until the copy is made
    with pytest.raises(KubeAccessDenied, match="stays stopped: nothing of it runs until kubeflow/llama-r1 is created"):
        _resubmit(fake)
    assert not fake._live(fake.jobs[("PyTorchJob", "kubeflow", "llama")]) and fake.second_copies() == []


def test_a_retry_that_finds_its_copy_and_the_old_job_running_again_says_both_may_run() -> None:
    # Given our copy made, and then the old job un-suspended by someone and their controller fighting ours
    fake = _cluster()
    _resubmit(fake)
    fake.patch_job(LLAMA, [{"op": "replace", "path": "/spec/runPolicy/suspend", "value": False}])
    original = fake.patch_job

    def undone(ref: KubeJobRef, operations: list[dict[str, Any]]) -> dict[str, Any]:
        original(ref, operations)
        return original(ref, [{"op": "replace", "path": "/spec/runPolicy/suspend", "value": False}])

    fake.patch_job = undone  # type: ignore[method-assign]
    # When Resubmit Job runs again (its answer was lost), then it says what is true: both may run
    with pytest.raises(JobSpecUnavailable, match=r"its copy kubeflow/llama-r1 .* exists: both may run"):
        _resubmit(fake)
