"""Who restarts a Kubernetes training job (domain/jobs/eks_jobs.py): never us on top of someone else."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from hyperpod_recovery.domain.jobs.eks_jobs import (
    CHECKPOINT_ANNOTATION,
    JOB_NAME_ANNOTATION,
    RESUME_ANNOTATION,
    job_spec_of,
    jobs_of_pods,
    owning_job,
)
from hyperpod_recovery.models.commands import left_alone_reason
from hyperpod_recovery.models.kubernetes import AUTO_RESUME_ANNOTATION, OPT_IN_ANNOTATION, KubeJobRef
from hyperpod_recovery.models.progress import PROGRESS_TABLE_ENV
from sandbox.kube import FakeKube

NODE = "hyperpod-i-0123456789abcdef0"
OPT_IN = {OPT_IN_ANNOTATION: "true", CHECKPOINT_ANNOTATION: "s3://ckpt-bucket/llama/"}


def _spec(kind: str, *, annotations: dict[str, str] | None = None, restart_policy: str = "Never") -> Any:
    fake = FakeKube()
    fake.add_hyperpod_node("i-0123456789abcdef0")
    job = fake.add_job(kind, "kubeflow", "llama", nodes=[NODE], annotations=annotations, restart_policy=restart_policy)
    return job_spec_of(job, KubeJobRef(kind=kind, namespace="kubeflow", name="llama"))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kind", "annotations", "restart_policy", "restarted_by", "unresumable"),
    [
        ("HyperPodPyTorchJob", OPT_IN, "Never", "hyperpod_training_operator", False),
        ("PyTorchJob", {AUTO_RESUME_ANNOTATION: "true", **OPT_IN}, "Never", "hyperpod_auto_resume", False),
        ("PyTorchJob", {AUTO_RESUME_ANNOTATION: "True"}, "OnFailure", "hyperpod_auto_resume", False),
        ("PyTorchJob", OPT_IN, "OnFailure", "kubeflow", False),
        ("PyTorchJob", OPT_IN, "ExitCode", "kubeflow", False),
        ("PyTorchJob", {}, "Always", "kubeflow", False),
        ("PyTorchJob", OPT_IN, "Never", None, False),  # ours: re-created from its checkpoint
        ("PyTorchJob", {}, "Never", None, True),  # nobody's: a human decides
        ("PyTorchJob", {OPT_IN_ANNOTATION: "yes"}, "Never", None, True),
    ],
)
def test_who_restarts_a_job_and_we_never_on_top_of_them(
    kind: str, annotations: dict[str, str], restart_policy: str, restarted_by: str | None, unresumable: bool
) -> None:
    spec = _spec(kind, annotations=annotations, restart_policy=restart_policy)
    assert spec.restarted_by == restarted_by
    assert spec.auto_resume is (restarted_by is not None)
    assert (spec.unresumable is not None) is unresumable
    assert spec.kube == KubeJobRef(kind=kind, namespace="kubeflow", name="llama") and spec.name == "llama"
    if restarted_by is not None:
        assert "restart" in left_alone_reason(spec)


def test_a_job_carries_its_checkpoint_its_resume_choice_and_its_lineage_name() -> None:
    spec = _spec("PyTorchJob", annotations={**OPT_IN, RESUME_ANNOTATION: "after_rejoin", JOB_NAME_ANNOTATION: "llama-first"})
    assert spec.checkpoint_uri == "s3://ckpt-bucket/llama/"
    assert spec.resume == "after_rejoin"
    assert spec.name == "llama-first"  # the name its checkpoints' manifests were written under
    assert spec.state == "Running" and spec.num_nodes == 1


@pytest.mark.parametrize("bad", ["gs://bucket/x", "s3://B/upper", "s3://" + "a" * 300, "not a uri"])
def test_a_checkpoint_location_we_cannot_use_makes_the_job_unresumable_with_its_reason(bad: str) -> None:
    spec = _spec("PyTorchJob", annotations={OPT_IN_ANNOTATION: "true", CHECKPOINT_ANNOTATION: bad})
    assert spec.checkpoint_uri is None and CHECKPOINT_ANNOTATION in (spec.unresumable or "")


def _pod(namespace: str = "kubeflow", **metadata: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": namespace, **metadata}, "status": {"phase": "Running"}}


def test_a_pod_belongs_to_the_job_its_controller_names_never_to_one_a_label_names() -> None:
    owner = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "llama", "uid": "u", "controller": True}
    assert owning_job(_pod(ownerReferences=[owner])) == KubeJobRef(kind="PyTorchJob", namespace="kubeflow", name="llama")
    # a bare pod made by hand with a job's labels (kubectl debug --copy-to --keep-labels) is no job's
    assert owning_job(_pod(labels={"HPJob": "hp"})) is None
    assert owning_job(_pod(labels={"training.kubeflow.org/job-name": "llama"})) is None
    assert owning_job(_pod(ownerReferences=[{**owner, "uid": ""}], labels={"training.kubeflow.org/job-name": "llama"})) is None
    # not training jobs of ours: a DaemonSet's pod, an owner that is not the controller, another group's kind
    daemon = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "health-monitoring-agent", "uid": "u", "controller": True}
    assert owning_job(_pod(ownerReferences=[daemon])) is None
    assert owning_job(_pod(ownerReferences=[{**owner, "controller": False}])) is None
    assert owning_job(_pod(ownerReferences=[{**owner, "apiVersion": "example.com/v1"}])) is None
    # a finished pod is no job's on this node any more
    assert owning_job({**_pod(ownerReferences=[owner]), "status": {"phase": "Succeeded"}}) is None


@settings(max_examples=200, deadline=None)
@given(namespace=st.text(max_size=70), name=st.text(max_size=70))
def test_a_pod_naming_a_job_kubernetes_could_not_hold_never_names_one(namespace: str, name: str) -> None:
    owner = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": name, "uid": "u", "controller": True}
    ref = owning_job(_pod(namespace, ownerReferences=[owner]))
    if ref is not None:  # then both are names the API could hold, and the model accepts them
        assert KubeJobRef.model_validate(ref.model_dump()) == ref


def test_each_job_is_listed_once_in_the_order_first_seen() -> None:
    def owned(name: str) -> dict[str, Any]:
        owner = {"apiVersion": "sagemaker.amazonaws.com/v1", "kind": "HyperPodPyTorchJob", "name": name, "uid": name, "controller": True}
        return _pod(ownerReferences=[owner])

    assert [r.name for r in jobs_of_pods([owned("b"), owned("a"), owned("b")])] == ["b", "a"]


def test_a_job_object_without_a_uid_is_not_named() -> None:
    job = {"metadata": {"name": "x", "namespace": "kubeflow"}, "spec": {}}
    assert job_spec_of(job, KubeJobRef(kind="PyTorchJob", namespace="kubeflow", name="x")) is None


def test_a_replica_without_a_restart_policy_restarts_as_kubeflow_defaults_it() -> None:
    # (Kubeflow's default is OnFailure, applied in memory: the stored spec has none)
    fake = FakeKube()
    fake.add_hyperpod_node("i-0123456789abcdef0")
    job = fake.add_job("PyTorchJob", "kubeflow", "llama", nodes=[NODE], annotations=OPT_IN)
    del job["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"]
    spec = job_spec_of(job, KubeJobRef(kind="PyTorchJob", namespace="kubeflow", name="llama"))
    assert spec is not None and spec.restarted_by == "kubeflow"


@pytest.mark.parametrize("kind", ["PyTorchJob", "HyperPodPyTorchJob"])
def test_a_job_reports_progress_only_when_its_own_pod_template_names_the_progress_table(kind: str) -> None:
    # Given the same job with, and without, the progress table in its pod template's environment
    fake = FakeKube()
    fake.add_hyperpod_node("i-0123456789abcdef0")
    ref = KubeJobRef(kind=kind, namespace="kubeflow", name="llama")  # type: ignore[arg-type]
    opted = fake.add_job(kind, "kubeflow", "llama", nodes=[NODE], annotations=OPT_IN, env={PROGRESS_TABLE_ENV: "progress"})
    plain = fake.add_job(kind, "kubeflow", "other", nodes=[], annotations=OPT_IN, env={"NCCL_DEBUG": "WARN"})
    # Then only the first is taken as opted in to hang detection (a label or a report proves nothing)
    assert job_spec_of(opted, ref).reports_progress  # type: ignore[union-attr]
    assert not job_spec_of(plain, ref.model_copy(update={"name": "other"})).reports_progress  # type: ignore[union-attr]


@pytest.mark.parametrize("kind", ["MPIJob", "TFJob", "Deployment"])
def test_a_pod_another_controller_owns_is_no_pytorchjob_whatever_its_labels(kind: str) -> None:
    owner = {"apiVersion": "kubeflow.org/v1", "kind": kind, "name": "llama", "uid": "u", "controller": True}
    assert owning_job(_pod(ownerReferences=[owner], labels={"training.kubeflow.org/job-name": "llama"})) is None


def test_a_job_another_controller_made_or_its_owner_suspended_is_not_ours_to_re_create() -> None:
    fake = FakeKube()
    fake.add_hyperpod_node("i-0123456789abcdef0")
    job = fake.add_job("PyTorchJob", "kubeflow", "llama", nodes=[NODE], annotations=OPT_IN)
    ref = KubeJobRef(kind="PyTorchJob", namespace="kubeflow", name="llama")
    owned = {
        **job,
        "metadata": {
            **job["metadata"],
            "ownerReferences": [{"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow", "name": "w", "uid": "u"}],
        },
    }
    assert "Workflow w" in (job_spec_of(owned, ref).unresumable or "")  # type: ignore[union-attr]
    suspended = {**job, "spec": {**job["spec"], "runPolicy": {"suspend": True}}}
    assert job_spec_of(suspended, ref).unresumable == "suspended by its owner"  # type: ignore[union-attr]


labels_ = st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?\Z")


@settings(max_examples=200, deadline=None)
@given(namespace=labels_, name=st.lists(labels_, min_size=1, max_size=3).map(".".join))
def test_any_name_kubernetes_gives_a_job_is_named_as_it_is(namespace: str, name: str) -> None:
    owner = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": name, "uid": "u", "controller": True}
    ref = owning_job(_pod(namespace, ownerReferences=[owner]))
    assert (ref is not None) == (len(name) <= 63)
    if ref is not None:
        assert (ref.namespace, ref.name) == (namespace, name)


DNS1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")


@settings(max_examples=400, deadline=None)
@given(
    name=st.lists(labels_, min_size=1, max_size=9).map(".".join).filter(lambda n: len(n) <= 253),
    generation=st.one_of(st.none(), st.integers(min_value=0, max_value=99_999).map(str), st.text(max_size=8)),
    replicas=st.dictionaries(st.sampled_from(["Master", "Worker"]), st.integers(min_value=1, max_value=100_000), min_size=1),
)
# (a digit str.isdigit() takes and int() refuses: a tenant's annotation must not stop Resubmit Job)
@example(name="0", generation="\u00b2", replicas={"Master": 1})
@example(name="0", generation="\u0663", replicas={"Master": 1})
def test_a_re_created_job_name_leaves_room_for_every_name_its_operator_derives(
    name: str, generation: str | None, replicas: dict[str, int]
) -> None:
    # Given any job name Kubernetes holds (a subdomain, up to 253), any generation, any replicas
    from hyperpod_recovery.domain.jobs.eks_jobs import GENERATION_ANNOTATION, recreated_name
    from hyperpod_recovery.models.kubernetes import KUBE_JOB_NAME_MAX

    annotations = {GENERATION_ANNOTATION: generation} if generation is not None else {}
    job = {
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"pytorchReplicaSpecs": {t: {"replicas": n} for t, n in replicas.items()}},
    }
    # When its re-creation is named
    new = recreated_name(job, "PyTorchJob")
    # Then the name, and each pod's and Service's <name>-<replica type>-<index>, is a DNS-1035 label of
    # at most 63 (the operator could make them all), decided by the old object alone (a retry finds it)
    assert new is not None and new == recreated_name(job, "PyTorchJob") and len(new) <= KUBE_JOB_NAME_MAX
    for replica_type, count in replicas.items():
        for index in {0, count - 1}:
            derived = f"{new}-{replica_type.lower()}-{index}"
            assert len(derived) <= 63 and DNS1035.fullmatch(derived), derived
    # And it is of its lineage: its start, or its start and a hash of the whole when it had to be cut
    stem = new.rsplit("-r", 1)[0]
    flat = name.replace(".", "-")
    assert stem == flat or stem == "j-" + flat or re.fullmatch(r"[a-z][-a-z0-9]*-[0-9a-f]{6}", stem)


def test_two_long_lineages_that_share_their_start_get_two_names() -> None:
    from hyperpod_recovery.domain.jobs.eks_jobs import recreated_name

    spec = {"pytorchReplicaSpecs": {"Worker": {"replicas": 512}}}
    first, second = ("llama-3-405b-pretrain-long-context-ablation-a", "llama-3-405b-pretrain-long-context-ablation-b")
    names = {recreated_name({"metadata": {"name": n}, "spec": spec}, "PyTorchJob") for n in (first, second)}
    assert len(names) == 2 and all(n is not None and len(n) + len("-worker-511") <= 63 for n in names)


@settings(max_examples=200, deadline=None)
@given(uid=st.uuids().map(str), ended=st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)))
def test_a_job_recovery_of_an_eks_job_is_named_within_step_functions_limits(uid: str, ended: datetime) -> None:
    # (StartExecution: at most 80 characters of [0-9A-Za-z_-]; the name is the exactly-once key)
    from hyperpod_recovery.domain.intake.execution_names import NAME_LIMIT, job_execution_name, node_execution_name

    for name in (job_execution_name(uid, ended), node_execution_name(job_execution_name(uid, ended))):
        assert len(name) <= NAME_LIMIT and re.fullmatch(r"[0-9A-Za-z_-]+", name)


def test_a_failed_jobs_condition_message_is_redacted_before_it_becomes_the_failure_reason() -> None:
    # Given a failed job whose condition message carries a pod's termination message with a secret key
    from hyperpod_recovery.domain.jobs.eks_jobs import failure_event

    secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    job = {
        "metadata": {"uid": "0f5d5c1e-8a55-4f1b-9f1e-2f1d5b6c7a8b", "namespace": "team-a", "name": "llama"},
        "status": {
            "conditions": [
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "BackoffLimitExceeded",
                    "message": f"pod llama-worker-0 exited: aws_secret_access_key={secret}",
                    "lastTransitionTime": "2026-11-27T10:00:00Z",
                }
            ]
        },
    }
    # When the failure event is built from it
    detail = failure_event(job, "PyTorchJob", "llm-train", ["hyperpod-i-0123456789abcdef0"], exit_code=1)
    # Then the reason says what failed, and the secret is not in it
    assert detail is not None and "BackoffLimitExceeded" in detail.reason
    assert secret[:12] not in detail.reason and "[REDACTED:" in detail.reason
