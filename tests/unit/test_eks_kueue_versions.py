"""Kueue's Workload API at the version the cluster serves (adapters/eks_workloads.py): discovered once
per command, v1beta2 where served, else v1beta1; its group absent is "Kueue is not installed", and
anything else that leaves it unknown (a version that 404s, discovery that fails or says something we
cannot read) is "cannot be stopped for certain": nothing stopped by a suspend Kueue would undo,
nothing created."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from hyperpod_recovery.adapters.eks_orchestrator import EksOrchestrator
from hyperpod_recovery.domain.jobs.eks_kueue import UnreadableDiscovery, workload_version
from hyperpod_recovery.errors import (
    ControllerChannelError,
    JobSpecUnavailable,
    KubeAccessDenied,
    KubeObjectGone,
    KubeUnavailable,
)
from hyperpod_recovery.models.commands import CheckpointRef, CommandEnvelope, ResubmitJob
from hyperpod_recovery.models.kubernetes import KUEUE_QUEUE_LABEL, OPT_IN_ANNOTATION, KubeJobRef
from sandbox.kube import FakeKube
from tests.unit.eks_stopping import Clock, until_stopped

AT = datetime(2026, 3, 14, 9, 5, tzinfo=UTC)
A, B = "hyperpod-i-0123456789abcdef0", "hyperpod-i-0123456789abcdef1"
LLAMA = KubeJobRef(kind="PyTorchJob", namespace="kubeflow", name="llama")
QUEUE = {KUEUE_QUEUE_LABEL: "team-a"}
DISCOVERY = ("get", "/apis/kueue.x-k8s.io")


class VersionSpy:
    """The version each Workload request of the orchestrator named."""

    def __init__(self, fake: FakeKube) -> None:
        self.versions: list[tuple[str, str]] = []
        for method in ("list_workloads", "get_workload", "patch_workload"):
            real = getattr(fake, method)

            def spy(version: str, *args: Any, _real: Any = real, _name: str = method) -> Any:
                self.versions.append((_name, version))
                return _real(version, *args)

            setattr(fake, method, spy)


def _cluster(versions: tuple[str, ...] = ("v1beta1", "v1beta2"), *, kueue: bool = True, labels: dict[str, str] | None = None) -> FakeKube:
    fake = FakeKube(now=Clock(AT), kueue=kueue, kueue_versions=versions)
    fake.add_hyperpod_node("i-0123456789abcdef0")
    fake.add_hyperpod_node("i-0123456789abcdef1")
    fake.add_job("PyTorchJob", "kubeflow", "llama", nodes=[A, B], annotations={OPT_IN_ANNOTATION: "true"}, labels=labels or QUEUE)
    fake.calls.clear()
    return fake


def _command(fake: FakeKube) -> ResubmitJob:
    uid = fake.jobs[("PyTorchJob", "kubeflow", "llama")]["metadata"]["uid"]
    checkpoint = CheckpointRef(uri="s3://ckpt-bucket/llama/step-000001200/", step=1200)
    return ResubmitJob(job_id=uid, checkpoint=checkpoint, kube=LLAMA, recreation_token="5" * 32)


def _resubmit(fake: FakeKube) -> Any:
    """Resubmit Job as the workflow runs it: tried again while the old copy's pods are Terminating."""
    return _resubmit_counted(fake)[0]


def _resubmit_counted(fake: FakeKube) -> tuple[Any, int]:
    """Its result, and how many tries found the old copy still stopping first."""
    orchestrator = EksOrchestrator(fake, None, fake.now)  # type: ignore[arg-type]
    assert isinstance(fake.now, Clock)
    return until_stopped(lambda: orchestrator.execute(_command(fake), "hpr-a"), fake.now)


def _untouched(fake: FakeKube) -> bool:
    """Nothing created, the old job neither suspended nor its Workload deactivated: it runs as it ran."""
    old = fake.jobs[("PyTorchJob", "kubeflow", "llama")]
    return (
        ("PyTorchJob", "kubeflow", "llama-r1") not in fake.jobs
        and not old["spec"]["runPolicy"].get("suspend")
        and all(w["spec"].get("active", True) for w in fake.workloads.values())
        and fake._live(old)
    )


# --- the version spoken -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("served", "spoken"),
    [(("v1beta1", "v1beta2"), "v1beta2"), (("v1beta2",), "v1beta2"), (("v1beta1",), "v1beta1")],
    ids=["kueue-0.19-both", "v1beta2-only", "v1beta1-only"],
)
def test_the_workload_is_stopped_at_the_version_kueue_serves_and_the_job_re_created_once(served: tuple[str, ...], spoken: str) -> None:
    # Given a job Kueue manages, on a Kueue serving its API at ``served``
    fake = _cluster(served)
    spy = VersionSpy(fake)
    # When Resubmit Job re-creates it
    result, waited = _resubmit_counted(fake)
    # Then Kueue's API was discovered once a try (the first stops it, the last finds its pods gone and
    # creates), and every Workload request spoke the version it serves (v1beta2 first)
    assert waited >= 1 and fake.calls.count(DISCOVERY) == 1 + waited and {v for _, v in spy.versions} == {spoken}
    assert [m for m, _ in spy.versions] == ["list_workloads", "patch_workload", "get_workload"] + [
        "list_workloads",
        "get_workload",
    ] * waited
    # And the old copy is stopped for good (its Workload inactive), the copy runs, never two at once
    old, new = fake.jobs[("PyTorchJob", "kubeflow", "llama")], fake.jobs[("PyTorchJob", "kubeflow", "llama-r1")]
    assert result.cancelled_old and not fake._live(old) and fake._live(new) and fake.second_copies() == []


def test_discovery_prefers_v1beta2_then_v1beta1_and_knows_no_other() -> None:
    def group(*versions: str) -> dict[str, Any]:
        listed = [{"groupVersion": f"kueue.x-k8s.io/{v}", "version": v} for v in versions]
        return {"kind": "APIGroup", "apiVersion": "v1", "name": "kueue.x-k8s.io", "versions": listed, "preferredVersion": listed[0]}

    assert workload_version(group("v1beta2", "v1beta1", "v1alpha1")) == "v1beta2"
    assert workload_version(group("v1beta1", "v1beta2")) == "v1beta2"  # (ours, whatever the server prefers)
    assert workload_version(group("v1beta1", "v1alpha1")) == "v1beta1"
    assert workload_version(group("v1")) is None
    with pytest.raises(UnreadableDiscovery):
        workload_version({"kind": "Status", "code": 404})


# --- absent, and unknown ------------------------------------------------------------------------------
def test_kueue_absent_from_discovery_means_not_installed_and_an_unlabelled_job_is_suspended_the_plain_way() -> None:
    # Given a cluster whose API server serves no kueue.x-k8s.io, and a job that names no queue
    fake = _cluster(kueue=False, labels={"team": "a"})
    result = _resubmit(fake)
    # Then no Workload was asked for: the job was suspended, read back, and re-created
    assert DISCOVERY in fake.calls and ("list", "workloads") not in fake.calls
    assert result.cancelled_old and fake.jobs[("PyTorchJob", "kubeflow", "llama")]["spec"]["runPolicy"]["suspend"] is True


@pytest.mark.parametrize("labels", [QUEUE, {"team": "a"}], ids=["queue-labelled", "managed-without-queue-label"])
def test_kueue_served_but_its_workload_version_404s_is_cannot_stop_for_certain_never_kueue_absent(labels: dict[str, str]) -> None:
    # Given Kueue installed whose discovery lists v1beta2, while its Workloads answer 404 there (a CRD
    # half-upgraded; or a job Kueue manages with no queue label, which a suspend would not stop)
    fake = _cluster(("v1beta1",), labels=labels)
    fake.api_group = lambda group: {  # type: ignore[method-assign]
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": [{"groupVersion": f"{group}/v1beta2", "version": "v1beta2"}],
        "preferredVersion": {"groupVersion": f"{group}/v1beta2", "version": "v1beta2"},
    }
    # When Resubmit Job runs, then it refuses, saying what it saw, and never that Kueue is absent
    with pytest.raises(JobSpecUnavailable) as refused:
        _resubmit(fake)
    said = str(refused.value)
    assert "Kueue is installed" in said and "at v1beta2 answered 404" in said and "cannot be stopped for certain" in said
    assert "not installed" not in said
    # And nothing was stopped (no suspend Kueue would undo) and nothing created
    assert _untouched(fake)


def test_discovery_unanswered_is_retried_by_the_workflow_and_says_why_nothing_was_created() -> None:
    fake = _cluster()
    fake.faults[DISCOVERY] = [KubeUnavailable("GET /apis/kueue.x-k8s.io: 503 ServiceUnavailable")]
    orchestrator = EksOrchestrator(fake, None, lambda: AT)  # type: ignore[arg-type]
    envelope = CommandEnvelope(
        command_id="c", incident_id="hpr-a", execution_name="hpr-a", task_token="t", requested_at=AT, command=_command(fake)
    )
    with pytest.raises(ControllerChannelError, match=r"Kueue's API could not be discovered .*503.*cannot be stopped for certain"):
        orchestrator.dispatch(envelope)
    assert _untouched(fake)


def test_discovery_refused_escalates_under_its_own_name() -> None:
    fake = _cluster()
    fake.faults[DISCOVERY] = [KubeAccessDenied("GET /apis/kueue.x-k8s.io: 403 Forbidden")]
    with pytest.raises(KubeAccessDenied, match="could not be discovered"):
        _resubmit(fake)
    assert _untouched(fake)


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (
            {"kind": "APIGroup", "name": "kueue.x-k8s.io", "versions": [{"version": "v1"}], "preferredVersion": {"version": "v1"}},
            "at v1 only",
        ),
        ({"kind": "APIGroupList", "groups": []}, "no APIGroup kueue.x-k8s.io"),
        ({"kind": "APIGroup", "name": "kueue.x-k8s.io", "versions": []}, "at no version only"),
    ],
    ids=["a-version-we-do-not-speak", "not-an-apigroup", "no-versions"],
)
def test_discovery_we_cannot_act_on_is_cannot_stop_for_certain(answer: dict[str, Any], said: str) -> None:
    fake = _cluster()
    fake.api_group = lambda group: answer  # type: ignore[method-assign]
    with pytest.raises(JobSpecUnavailable, match=said) as refused:
        _resubmit(fake)
    assert "cannot be stopped for certain" in str(refused.value) and _untouched(fake)


def _deleted_before_its_patch(fake: FakeKube, *, replaced: bool) -> None:
    """The job's Workload deleted between the stop's list and its patch (by a human, or Kueue itself);
    ``replaced``: Kueue has made the job a new one by the time it is read again."""
    real = fake.patch_workload
    calls = 0

    def patch(version: str, namespace: str, name: str, operations: list[dict[str, Any]]) -> dict[str, Any]:
        nonlocal calls
        calls += 1
        if calls == 1:
            del fake.workloads[(namespace, name)]
            try:
                return real(version, namespace, name, operations)  # (the API server's 404 names the Workload)
            finally:
                if replaced:
                    fake._settle([("PyTorchJob", "kubeflow", "llama")])  # (Kueue's reconciler: a Workload for the job)
        return real(version, namespace, name, operations)

    fake.patch_workload = patch  # type: ignore[method-assign]


def test_a_workload_deleted_before_its_patch_is_read_again_and_its_replacement_stopped() -> None:
    # Given a job Kueue manages, whose Workload is deleted after the stop listed it and replaced by Kueue
    fake = _cluster(("v1beta2",))
    _deleted_before_its_patch(fake, replaced=True)
    # When Resubmit Job stops it and re-creates it
    result = _resubmit(fake)
    # Then the job's Workloads were read again, the new one made inactive, and the job re-created once
    uid = fake.jobs[("PyTorchJob", "kubeflow", "llama")]["metadata"]["uid"]
    (workload,) = [w for w in fake.workloads.values() if w["metadata"]["ownerReferences"][0]["uid"] == uid]
    assert workload["spec"]["active"] is False and fake.calls.count(("list", "workloads")) >= 2
    assert result.cancelled_old and ("PyTorchJob", "kubeflow", "llama-r1") in fake.jobs and fake.second_copies() == []


def test_a_workload_deleted_and_not_replaced_refuses_saying_so_never_that_kueue_is_absent() -> None:
    # Given the same Workload deleted, and none in its place when the job's Workloads are read again
    fake = _cluster(("v1beta2",))
    name = next(iter(fake.workloads))[1]
    _deleted_before_its_patch(fake, replaced=False)
    # When Resubmit Job runs, then it refuses, naming the Workload deleted (never "Kueue is not installed")
    with pytest.raises(JobSpecUnavailable) as refused:
        _resubmit(fake)
    said = str(refused.value)
    assert f"Workload kubeflow/{name} of PyTorchJob kubeflow/llama was deleted while we stopped the job" in said
    assert "nothing created" in said and "not installed" not in said and "answered 404" not in said
    # And nothing was suspended (a suspend Kueue would undo) and nothing created
    assert not fake.jobs[("PyTorchJob", "kubeflow", "llama")]["spec"]["runPolicy"].get("suspend")
    assert ("PyTorchJob", "kubeflow", "llama-r1") not in fake.jobs


def test_a_404_on_a_workloads_patch_that_names_no_object_is_a_version_not_served_cannot_stop_for_certain() -> None:
    # Given the Workload API answering a bare 404 (how the API server answers a version it stopped serving)
    fake = _cluster(("v1beta2",))
    fake.faults[("patch", "workloads")] = [KubeObjectGone("PATCH workloads kubeflow/w: 404 NotFound")]
    # When Resubmit Job runs, then it refuses as "cannot be stopped for certain", saying the 404 named no object
    with pytest.raises(JobSpecUnavailable, match=r"answered 404 naming no object .*cannot be stopped for certain") as refused:
        _resubmit(fake)
    assert "not installed" not in str(refused.value) and "was deleted" not in str(refused.value)
    assert ("PyTorchJob", "kubeflow", "llama-r1") not in fake.jobs
