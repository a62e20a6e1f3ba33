"""The Kubernetes access the stack asks for is the access its functions use, and no more.

Each Kubernetes-calling function's role is put in Kubernetes groups by its EKS access entry
(template.yaml); deploy/kubernetes-rbac.yaml binds those groups to ClusterRoles. Each command the EKS
orchestrator carries out is run here against the in-memory API server, which records every call
(verb, resource): every one must be granted to the groups of the function that sends that command,
and every write the manifest grants must be one some function makes.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import kubernetes_validate
import pytest
import yaml

from hyperpod_recovery.adapters.eks_orchestrator import EKS_COMMANDS, EksOrchestrator
from hyperpod_recovery.models.commands import (
    BootTimes,
    CaptureHangEvidence,
    CaptureJobSpec,
    CheckAgent,
    CheckpointRef,
    CordonNodes,
    JobsOnNodes,
    NodeStates,
    ResubmitJob,
    ResumeNodes,
)
from hyperpod_recovery.models.kubernetes import KUEUE_QUEUE_LABEL, OPT_IN_ANNOTATION, KubeJobRef
from sandbox.kube import FakeKube
from sandbox.template import load_template
from tests.conftest import ROOT
from tests.unit.eks_stopping import Clock, until_stopped

AT = datetime(2026, 3, 14, 9, 5, tzinfo=UTC)
A = "hyperpod-i-0123456789abcdef0"
TAG = "hyperpod-recovery:hpr-a"
# Which function sends which command (the steps in functions/*/app.py).
SENT_BY = {
    "cordon_nodes": "CordonNodesFunction",
    "drain_nodes": "CordonNodesFunction",
    "resume_nodes": "ResumeNodesFunction",
    "boot_times": "ReadBootTimesFunction",
    "resubmit_job": "ResubmitJobFunction",
    "check": "CheckControllerAgentFunction",
    "jobs_on_nodes": "CordonNodesFunction",
    "capture_job_spec": "CaptureJobSpecFunction",
    "node_states": "CheckJobNodesFunction",
    "capture_hang_evidence": "CaptureHangEvidenceFunction",
}
# Pod logs may hold anything the training printed: their own group, for the hang's evidence only.
LOG_READERS = "hyperpod-recovery-log-readers"
# (core resources have the group "")
GROUP_OF = {
    "nodes": "",
    "pods": "",
    "pods/log": "",
    "events": "",
    "pytorchjobs": "kubeflow.org",
    "hyperpodpytorchjobs": "sagemaker.amazonaws.com",
    "workloads": "kueue.x-k8s.io",
}


# Non-resource URLs every authenticated identity may get: Kubernetes' default ClusterRole system:discovery
# (k8s.io/kubernetes plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go), bound to the group
# system:authenticated by the default ClusterRoleBinding of that name; an EKS access entry's identity is
# authenticated. API discovery (GET /apis/kueue.x-k8s.io) needs no rule of ours.
DISCOVERY_URLS = ("/livez", "/readyz", "/healthz", "/version", "/version/", "/openapi", "/openapi/*", "/api", "/api/*", "/apis", "/apis/*")


def _url_granted(url: str, verb: str) -> bool:
    """RBAC's match of a non-resource URL: the exact path, or a prefix ending in "*"."""
    return verb == "get" and any(url == p or (p.endswith("*") and url.startswith(p[:-1])) for p in DISCOVERY_URLS)


def _not_granted(calls: set[tuple[str, str]], granted: set[tuple[str, str, str]]) -> list[tuple[str, str]]:
    """The calls (verb, resource; a path for a non-resource URL) neither the manifest nor system:discovery grants."""
    return sorted(
        (verb, resource)
        for verb, resource in calls
        if not (_url_granted(resource, verb) if resource.startswith("/") else (GROUP_OF[resource], resource, verb) in granted)
    )


def _manifest() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((ROOT / "deploy" / "kubernetes-rbac.yaml").read_text()) if d]


def _granted(groups: list[str]) -> set[tuple[str, str, str]]:
    """(api group, resource, verb) the manifest grants to any of ``groups``."""
    documents = _manifest()
    roles = {d["metadata"]["name"]: d for d in documents if d["kind"] == "ClusterRole"}
    granted = set()
    # (a RoleBinding grants its ClusterRole in its namespace only; the drills' jobs run in "kubeflow")
    bindings = [
        d
        for d in documents
        if d["kind"] == "ClusterRoleBinding" or (d["kind"] == "RoleBinding" and d["metadata"]["namespace"] == "kubeflow")
    ]
    for binding in bindings:
        if any(s["kind"] == "Group" and s["name"] in groups for s in binding["subjects"]):
            for rule in roles[binding["roleRef"]["name"]]["rules"]:
                granted |= {(g, r, v) for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
    return granted


def _groups_of(function: str) -> list[str]:
    resources = load_template(ROOT / "template.yaml")["Resources"]
    entries = [
        r
        for r in resources.values()
        if r["Type"] == "AWS::EKS::AccessEntry" and r["Properties"]["PrincipalArn"] == {"Fn::GetAtt": [f"{function}Role", "Arn"]}
    ]
    assert len(entries) == 1, f"{function}: one access entry expected"
    return entries[0]["Properties"]["KubernetesGroups"]


def _calls_of(command_type: str) -> set[tuple[str, str]]:
    """Every Kubernetes call carrying ``command_type`` out makes, on a cluster where each path runs
    (with Kueue, HyperPod task governance, and without)."""
    return _calls_on(command_type, kueue=False) | _calls_on(command_type, kueue=True)


def _calls_on(command_type: str, *, kueue: bool) -> set[tuple[str, str]]:
    clock = Clock(AT)
    fake = FakeKube(now=clock, kueue=kueue)
    fake.add_hyperpod_node("i-0123456789abcdef0")
    labels = {KUEUE_QUEUE_LABEL: "team-a"} if kueue else None
    job = fake.add_job("PyTorchJob", "kubeflow", "llama", nodes=[A], annotations={OPT_IN_ANNOTATION: "true"}, labels=labels)
    orchestrator = EksOrchestrator(fake, None, clock)  # type: ignore[arg-type]
    commands: dict[str, list[Any]] = {
        "cordon_nodes": [CordonNodes(nodes=[A], reason=TAG), CordonNodes(nodes=["hyperpod-i-0aaaaaaaaaaaaaaaa"], reason=TAG)],
        "drain_nodes": [],
        "resume_nodes": [ResumeNodes(nodes=[A], owner_tag=TAG)],
        "boot_times": [BootTimes(nodes=[A, "hyperpod-i-0aaaaaaaaaaaaaaaa"])],
        "jobs_on_nodes": [JobsOnNodes(nodes=[A])],
        "check": [CheckAgent()],
        "capture_job_spec": [CaptureJobSpec(job_id=job["metadata"]["uid"]), CaptureJobSpec(job_id="00000000-0000-0000-0000-00000000beef")],
        "node_states": [NodeStates(nodes=[A, "hyperpod-i-0aaaaaaaaaaaaaaaa"])],
        "capture_hang_evidence": [
            CaptureHangEvidence(job_id=job["metadata"]["uid"], nodes=[A, "hyperpod-i-0aaaaaaaaaaaaaaaa"]),
            CaptureHangEvidence(job_id="00000000-0000-0000-0000-00000000beef", nodes=[A]),
        ],
        "resubmit_job": [
            ResubmitJob(
                job_id=job["metadata"]["uid"],
                checkpoint=CheckpointRef(uri="s3://ckpt-bucket/llama/step-000000100/", step=100),
                kube=KubeJobRef(kind="PyTorchJob", namespace="kubeflow", name="llama"),
                recreation_token="5" * 32,
            )
        ],
    }
    fake.set_pod_log("kubeflow", "llama-worker-0", "step 10 loss 2.1\n")
    fake.record_event(fake.pods[("kubeflow", "llama-worker-0")], "Started", "Started container pytorch")
    fake.calls.clear()
    for command in commands[command_type]:
        until_stopped(lambda command=command: orchestrator.execute(command, "hpr-a"), clock)  # (as the workflow retries it)
    return set(fake.calls)


@pytest.mark.parametrize("command_type", sorted(EKS_COMMANDS))
def test_every_kubernetes_call_of_a_command_is_granted_to_the_function_that_sends_it(command_type: str) -> None:
    groups = _groups_of(SENT_BY[command_type])
    granted = _granted(groups)
    missing = _not_granted(_calls_of(command_type), granted)
    assert missing == [], f"{SENT_BY[command_type]} (groups {groups}) makes calls deploy/kubernetes-rbac.yaml does not grant"


def test_kueues_api_is_discovered_through_a_url_kubernetes_grants_every_authenticated_identity() -> None:
    # Given the calls Resubmit Job makes (on clusters with Kueue and without)
    urls = {(v, r) for v, r in _calls_of("resubmit_job") if r.startswith("/")}
    # Then the discovery of Kueue's API is among them, granted by system:discovery, not by a rule of ours
    assert urls == {("get", "/apis/kueue.x-k8s.io")} and all(_url_granted(r, v) for v, r in urls)
    assert not any("nonResourceURLs" in rule for d in _manifest() for rule in d.get("rules", []))
    assert not _url_granted("/apis/kueue.x-k8s.io", "patch") and not _url_granted("/metrics", "get")


def test_pod_logs_are_read_only_by_the_function_in_the_log_readers_group_and_only_it_is_in_that_group() -> None:
    # Given every command's calls, and the functions whose access entry puts them in the log readers' group
    resources = load_template(ROOT / "template.yaml")["Resources"]
    in_group = {
        r["Properties"]["PrincipalArn"]["Fn::GetAtt"][0].removesuffix("Role")
        for r in resources.values()
        if r["Type"] == "AWS::EKS::AccessEntry" and LOG_READERS in r["Properties"]["KubernetesGroups"]
    }
    reading = {SENT_BY[t] for t in EKS_COMMANDS if ("get", "pods/log") in _calls_of(t)}
    # Then the hang's evidence reads pod logs, and no other command does; its function alone is in the group
    assert reading == in_group == {"CaptureHangEvidenceFunction"}
    # And the group's ClusterRole grants logs and events and nothing the readers' role already does
    assert _granted([LOG_READERS]) == {("", "pods/log", "get"), ("", "events", "list")}


def test_every_write_the_manifest_grants_is_one_a_function_makes() -> None:
    made = set().union(*(_calls_of(t) for t in EKS_COMMANDS))
    writes = {
        (r, v)
        for bound in _manifest()
        if bound["kind"] == "ClusterRole"
        for rule in bound["rules"]
        for r in rule["resources"]
        for v in rule["verbs"]
        if v not in ("get", "list", "watch")
    }
    assert {(r, v) for r, v in writes if (v, r) not in made} == set()


def test_the_manifest_is_valid_kubernetes_and_grants_no_secrets_no_wildcards_no_escalation() -> None:
    for document in _manifest():
        kubernetes_validate.validate(document, "1.33", strict=True)
        for rule in document.get("rules", []):
            assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"]
            assert not {"secrets", "clusterroles", "clusterrolebindings", "roles", "rolebindings"} & set(rule["resources"])
            assert not {"escalate", "bind", "impersonate", "delete", "deletecollection"} & set(rule["verbs"])


def test_job_writes_are_bound_per_namespace_never_cluster_wide() -> None:
    documents = _manifest()
    writers = [d for d in documents if d["kind"].endswith("Binding") and d["roleRef"]["name"] == "hyperpod-recovery-job-writers"]
    assert writers and all(
        d["kind"] == "RoleBinding" and d["metadata"]["namespace"] not in ("kube-system", "aws-hyperpod") for d in writers
    )


def _bound_in(role: str) -> list[dict[str, Any]]:
    return [d for d in _manifest() if d["kind"].endswith("Binding") and d["roleRef"]["name"] == role]


def test_pod_logs_are_read_per_namespace_in_the_namespaces_the_job_writers_are_bound_in() -> None:
    # Given the manifest's bindings of the log readers' role and of the job writers'
    readers, writers = _bound_in(LOG_READERS), _bound_in("hyperpod-recovery-job-writers")
    # Then the log readers are bound per namespace, never cluster-wide nor in the system namespaces
    assert readers and all(d["kind"] == "RoleBinding" for d in readers)
    assert not {d["metadata"]["namespace"] for d in readers} & {"kube-system", "aws-hyperpod"}
    # And in the very namespaces whose jobs the writers may re-create (the opted-in ones), no other
    assert {d["metadata"]["namespace"] for d in readers} == {d["metadata"]["namespace"] for d in writers}


def test_the_job_poller_reads_only_what_its_reader_group_may() -> None:
    # Given a failed opted-in job, polled as Find Failed Jobs polls
    from hyperpod_recovery.adapters.eks_training_jobs import EksTrainingJobs
    from hyperpod_recovery.domain.intake.normalize import GuardedCluster
    from hyperpod_recovery.steps.find_failed_jobs import find_failed_jobs
    from hyperpod_recovery.steps.import_hyperpod_hangs import Teller
    from tests.fakes import FakeLedger, FakeNotifier, FakeWorkflows

    fake = FakeKube(now=lambda: AT)
    fake.add_hyperpod_node("i-0123456789abcdef0")
    fake.add_job("PyTorchJob", "kubeflow", "llama", nodes=[A], annotations={OPT_IN_ANNOTATION: "true"})
    fake.job_fails("PyTorchJob", "kubeflow", "llama")
    fake.calls.clear()
    find_failed_jobs(
        jobs=EksTrainingJobs(fake),
        workflows=FakeWorkflows(),
        ledger=FakeLedger(),
        guarded=GuardedCluster(name="c", arn="a"),
        teller=Teller(FakeNotifier()),
        max_age_seconds=3600,
        max_skew_seconds=300,
        now=AT,
        remaining_ms=lambda: 30_000,
    )
    granted = _granted(_groups_of("FindFailedJobsFunction"))
    assert _not_granted(set(fake.calls), granted) == []
    assert {v for v, _ in fake.calls} == {"list"}  # it only reads
