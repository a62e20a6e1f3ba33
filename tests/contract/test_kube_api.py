"""The Kubernetes API port: the in-memory API server (sandbox/kube/ FakeKube) and the real adapter
(adapters/kubernetes.py KubernetesApi) meet the same expectations.

The real adapter talks HTTPS to a local server that serves the same FakeKube (tests/contract/kube_api_support.py);
what only the wire shows is checked in test_kube_api_wire.py.
"""

from __future__ import annotations

import ssl

import pytest
from pytest_httpserver import HTTPServer

from hyperpod_recovery.adapters.kubernetes import KubernetesApi
from hyperpod_recovery.errors import (
    KubeAlreadyExists,
    KubeConflict,
    KubeObjectGone,
    KubeRequestRejected,
)
from hyperpod_recovery.models.kubernetes import KubeJobRef
from sandbox.kube import FakeKube, serve
from tests.contract import kube_api_support
from tests.contract.kube_api_support import NODE, Api, real_api, seeded

# The API server under test, fake and real-over-TLS, as pytest finds fixtures: by name in this module.
tls = kube_api_support.tls
_running_server = kube_api_support._running_server
server = kube_api_support.server
api = kube_api_support.api


# --- the same expectations of both ------------------------------------------------------------------
def test_a_node_is_read_and_listed_by_label(api: Api) -> None:
    seeded(api)
    assert api.port.get_node(NODE)["metadata"]["name"] == NODE
    names = [n["metadata"]["name"] for n in api.port.list_nodes("sagemaker.amazonaws.com/instance-group-name=spares")]
    assert names == ["hyperpod-i-0123456789abcdef1"]
    assert len(api.port.list_nodes()) == 2


def test_a_node_that_is_gone_is_kube_object_gone(api: Api) -> None:
    with pytest.raises(KubeObjectGone):
        api.port.get_node("hyperpod-i-00000000")
    with pytest.raises(KubeObjectGone):
        api.port.patch_node("hyperpod-i-00000000", [{"op": "add", "path": "/spec/unschedulable", "value": True}])


def test_a_patch_conditional_on_the_version_read_applies_once_and_then_conflicts(api: Api) -> None:
    # Given a node read at some resourceVersion
    seeded(api)
    version = api.port.get_node(NODE)["metadata"]["resourceVersion"]
    guarded = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": version},
        {"op": "add", "path": "/spec/unschedulable", "value": True},
    ]
    # When the patch tests that version, it applies, and the version moves on
    patched = api.port.patch_node(NODE, guarded)
    assert patched["spec"]["unschedulable"] is True and patched["metadata"]["resourceVersion"] != version
    # Then the same patch again (the node changed since that read) is a conflict, and nothing is written
    with pytest.raises(KubeConflict):
        api.port.patch_node(NODE, guarded)
    assert api.port.get_node(NODE)["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"]


def test_a_patch_below_a_missing_map_is_refused_whole_not_half_written(api: Api) -> None:
    # (every patch of ours tests the version it read first: a path missing on that version is our bug, not a race)
    seeded(api)
    before = api.port.get_node(NODE)
    with pytest.raises(KubeRequestRejected):
        api.port.patch_node(
            NODE,
            [
                {"op": "add", "path": "/spec/unschedulable", "value": True},
                {"op": "add", "path": "/metadata/annotations/a~1b", "value": "x"},
            ],
        )
    assert api.port.get_node(NODE) == before


def test_a_patch_that_would_store_an_invalid_node_is_rejected_and_nothing_is_stored(api: Api) -> None:
    seeded(api)
    before = api.port.get_node(NODE)
    with pytest.raises(KubeRequestRejected):
        api.port.patch_node(NODE, [{"op": "add", "path": "/spec/taints", "value": [{"key": "k", "effect": "NoSchedule", "bogus": 1}]}])
    assert api.port.get_node(NODE) == before


def test_pods_are_listed_by_the_node_they_run_on(api: Api) -> None:
    seeded(api)
    pods = api.port.list_pods_on_node(NODE)
    assert [p["metadata"]["name"] for p in pods] == ["llama-worker-0"]
    assert api.port.list_pods_on_node("hyperpod-i-0123456789abcdef1") == []


def test_live_pods_are_listed_across_namespaces_one_list_an_ended_pod_left_out(api: Api) -> None:
    seeded(api)
    api.fake.add_pod("other", "done", NODE, phase="Succeeded")
    pods = api.port.list_live_pods()
    assert [p["metadata"]["name"] for p in pods] == ["llama-worker-0"]


def test_a_job_is_read_created_once_and_listed(api: Api) -> None:
    seeded(api)
    job = api.port.get_job(KubeJobRef(kind="PyTorchJob", namespace="kubeflow", name="llama"))
    body = {
        "apiVersion": job["apiVersion"],
        "kind": "PyTorchJob",
        "metadata": {"name": "llama-r1", "namespace": "kubeflow"},
        "spec": job["spec"],
    }
    created = api.port.create_job("PyTorchJob", "kubeflow", body)
    assert created["metadata"]["uid"] and created["metadata"]["uid"] != job["metadata"]["uid"]
    with pytest.raises(KubeAlreadyExists):
        api.port.create_job("PyTorchJob", "kubeflow", body)
    assert sorted(j["metadata"]["name"] for j in api.port.list_jobs("PyTorchJob")) == ["llama", "llama-r1"]
    with pytest.raises(KubeObjectGone):
        api.port.get_job(KubeJobRef(kind="HyperPodPyTorchJob", namespace="kubeflow", name="llama"))


def test_a_job_the_crd_schema_refuses_is_not_created(api: Api) -> None:
    seeded(api)
    body = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "bad", "namespace": "kubeflow"},
        "spec": {
            "pytorchReplicaSpecs": {"Worker": {"replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}},
            "runPolicy": {"bogus": 1},
        },
    }
    with pytest.raises(KubeRequestRejected):
        api.port.create_job("PyTorchJob", "kubeflow", body)
    body["spec"]["runPolicy"] = {}
    body["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["bogus"] = (
        1  # a pod template field Kubernetes does not have
    )
    with pytest.raises(KubeRequestRejected):
        api.port.create_job("PyTorchJob", "kubeflow", body)
    assert [j["metadata"]["name"] for j in api.port.list_jobs("PyTorchJob")] == ["llama"]


@pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
def test_a_jobs_kueue_workload_is_found_by_its_job_uid_deactivated_and_read_back(api: Api, version: str) -> None:
    # Given Kueue (HyperPod task governance) managing a job: Kueue made its Workload
    api.fake.kueue = True
    api.fake.add_hyperpod_node("i-0123456789abcdef0")
    job = api.fake.add_job("PyTorchJob", "kubeflow", "llama", nodes=[NODE], labels={"kueue.x-k8s.io/queue-name": "team-a"})
    uid = job["metadata"]["uid"]
    # When its Workload is listed by the label Kueue puts on it, at either version Kueue v0.19.2 serves, then exactly its own is found
    (workload,) = api.port.list_workloads(version, "kubeflow", f"kueue.x-k8s.io/job-uid={uid}")
    assert workload["apiVersion"] == f"kueue.x-k8s.io/{version}" and workload["metadata"]["ownerReferences"][0]["uid"] == uid
    assert api.port.list_workloads(version, "kubeflow", "kueue.x-k8s.io/job-uid=x") == []
    # And a patch conditional on its uid deactivates it, stored valid (Kueue's CRD schema at each version), read back inactive
    name = workload["metadata"]["name"]
    patch = [
        {"op": "test", "path": "/metadata/uid", "value": workload["metadata"]["uid"]},
        {"op": "add", "path": "/spec/active", "value": False},
    ]
    api.port.patch_workload(version, "kubeflow", name, patch)
    assert api.port.get_workload(version, "kubeflow", name)["spec"]["active"] is False
    with pytest.raises(KubeRequestRejected):  # (a field Kueue's schema does not have is refused whole)
        api.port.patch_workload(version, "kubeflow", name, [{"op": "add", "path": "/spec/bogus", "value": 1}])
    with pytest.raises(KubeObjectGone):
        api.port.get_workload(version, "kubeflow", "nope")


def test_without_kueue_neither_its_group_nor_the_workload_api_is_there(api: Api) -> None:
    with pytest.raises(KubeObjectGone):
        api.port.api_group("kueue.x-k8s.io")
    with pytest.raises(KubeObjectGone):
        api.port.list_workloads("v1beta2", "kubeflow")


@pytest.mark.parametrize(
    ("served", "listed"),
    [(("v1beta1", "v1beta2"), ["v1beta2", "v1beta1"]), (("v1beta1",), ["v1beta1"]), (("v1beta2",), ["v1beta2"])],
    ids=["kueue-0.19", "v1beta1-only", "v1beta2-only"],
)
def test_discovery_lists_the_versions_kueue_serves_newest_first_and_another_version_is_404(
    api: Api, served: tuple[str, ...], listed: list[str]
) -> None:
    # Given Kueue serving its API at some versions
    api.fake.kueue, api.fake.kueue_versions = True, served
    # When its group is discovered, then the APIGroup lists them, newest (the preferred) first, as the API server orders them
    group = api.port.api_group("kueue.x-k8s.io")
    assert group["kind"] == "APIGroup" and group["name"] == "kueue.x-k8s.io"
    assert [v["version"] for v in group["versions"]] == listed and group["preferredVersion"]["version"] == listed[0]
    assert [v["groupVersion"] for v in group["versions"]] == [f"kueue.x-k8s.io/{v}" for v in listed]
    # And the Workload API at a version it does not serve is 404, at one it serves an empty list
    for version in ("v1beta1", "v1beta2"):
        if version in served:
            assert api.port.list_workloads(version, "kubeflow") == []
        else:
            with pytest.raises(KubeObjectGone):
                api.port.list_workloads(version, "kubeflow")


def test_a_404_names_the_object_that_is_not_there_and_nothing_for_a_version_not_served(api: Api) -> None:
    # Given Kueue serving its Workloads at v1beta2 only, and a PyTorchJob CRD installed
    api.fake.kueue, api.fake.kueue_versions = True, ("v1beta2",)
    seeded(api)
    # When an object of a resource the API server serves is not there, then its 404 names it (NewNotFound's details)
    for missing, resource in (
        (lambda: api.port.get_workload("v1beta2", "kubeflow", "nope"), "workloads.kueue.x-k8s.io"),
        (lambda: api.port.patch_workload("v1beta2", "kubeflow", "nope", []), "workloads.kueue.x-k8s.io"),
        (lambda: api.port.get_job(KubeJobRef(kind="PyTorchJob", namespace="kubeflow", name="nope")), "pytorchjobs.kubeflow.org"),
        (lambda: api.port.get_node("nope"), "nodes"),
    ):
        with pytest.raises(KubeObjectGone) as gone:
            missing()
        assert (gone.value.named, gone.value.resource) == ("nope", resource)
    # And a version it does not serve (or a group) is a 404 that names no object, whatever the name asked for
    for unserved in (
        lambda: api.port.get_workload("v1beta1", "kubeflow", "nope"),
        lambda: api.port.patch_workload("v1beta1", "kubeflow", "nope", []),
        lambda: api.port.list_workloads("v1beta1", "kubeflow"),
        lambda: api.port.api_group("jobset.x-k8s.io"),
    ):
        with pytest.raises(KubeObjectGone) as gone:
            unserved()
        assert gone.value.named is None


def test_the_fake_answers_both_404s_with_the_status_the_api_server_writes() -> None:
    # Given the in-memory API server with Kueue at v1beta2 only
    fake = FakeKube(kueue=True, kueue_versions=("v1beta2",))
    # Then a Workload that is not there is apimachinery's NewNotFound: reason NotFound, details naming it
    status, body = serve(fake, "GET", "/apis/kueue.x-k8s.io/v1beta2/namespaces/kubeflow/workloads/nope", {}, None)
    assert status == 404 and body["reason"] == "NotFound" and body["message"] == 'workloads.kueue.x-k8s.io "nope" not found'
    assert body["details"] == {"name": "nope", "group": "kueue.x-k8s.io", "kind": "workloads"}
    # And a version not served, or a path nothing serves, is the not-found handler's bare NotFound (no details)
    for path in ("/apis/kueue.x-k8s.io/v1beta1/namespaces/kubeflow/workloads/nope", "/apis/nothing.example.com/v1/things"):
        status, body = serve(fake, "GET", path, {}, None)
        assert (status, body["reason"], body["message"]) == (404, "NotFound", "the server could not find the requested resource")
        assert "details" not in body


def test_a_404_that_is_no_status_names_no_object(server: HTTPServer, tls: tuple[str, ssl.SSLContext]) -> None:
    # Given an answer that is not the API server's Status (Go's http.NotFound text, a proxy's page)
    api = seeded(real_api(server, tls[0], FakeKube()))
    assert api.wire is not None
    api.wire.status_override.append((404, "404 page not found\n"))  # type: ignore[arg-type]
    # Then it is a 404 that names nothing: never read as "this object was deleted"
    with pytest.raises(KubeObjectGone) as gone:
        api.port.get_workload("v1beta2", "kubeflow", "w")
    assert gone.value.named is None


def test_a_namespaces_jobs_are_listed_by_a_label(api: Api) -> None:
    seeded(api)
    api.fake.add_job("PyTorchJob", "kubeflow", "tagged", nodes=[], labels={"hyperpod-recovery.io/recreation-token": "5" * 32})
    api.fake.add_job("PyTorchJob", "other", "tagged", nodes=[], labels={"hyperpod-recovery.io/recreation-token": "5" * 32})
    found = api.port.list_jobs_in("PyTorchJob", "kubeflow", f"hyperpod-recovery.io/recreation-token={'5' * 32}")
    assert [(j["metadata"]["namespace"], j["metadata"]["name"]) for j in found] == [("kubeflow", "tagged")]


def test_a_pods_log_is_its_last_lines_of_which_the_first_bytes_as_text(api: Api) -> None:
    # Given a pod of the job whose training container printed 100 lines
    seeded(api)
    api.fake.set_pod_log("kubeflow", "llama-worker-0", "".join(f"step {n} loss 0.{n}\n" for n in range(100)))
    # When its last 3 lines are read, then they are the last 3, as text
    assert (
        api.port.get_pod_log("kubeflow", "llama-worker-0", "pytorch", 3, 1024)
        == "step 97 loss 0.97\nstep 98 loss 0.98\nstep 99 loss 0.99\n"
    )
    # And the byte bound keeps the start of those lines (the API server stops there, mid-line)
    assert api.port.get_pod_log("kubeflow", "llama-worker-0", "pytorch", 3, 10) == "step 97 lo"
    # And a container that printed nothing has an empty log
    api.fake.logs.clear()
    assert api.port.get_pod_log("kubeflow", "llama-worker-0", "pytorch", 40, 1024) == ""
    assert api.port.calls[-1] == ("get", "pods/log")


def test_the_log_of_a_pod_that_is_not_there_is_kube_object_gone(api: Api) -> None:
    seeded(api)
    with pytest.raises(KubeObjectGone):
        api.port.get_pod_log("kubeflow", "llama-worker-9", "pytorch", 40, 1024)


def test_the_log_of_a_container_the_pod_does_not_have_is_rejected_and_says_so(api: Api) -> None:
    seeded(api)
    with pytest.raises(KubeRequestRejected, match="container sidecar is not valid for pod llama-worker-0"):
        api.port.get_pod_log("kubeflow", "llama-worker-0", "sidecar", 40, 1024)


def test_the_log_of_a_pod_not_started_yet_is_rejected(api: Api) -> None:
    seeded(api)
    api.fake.add_pod("kubeflow", "waiting", None, phase="Pending")
    with pytest.raises(KubeRequestRejected, match="waiting to start"):
        api.port.get_pod_log("kubeflow", "waiting", "main", 40, 1024)


def test_events_are_listed_by_the_kind_and_name_of_the_object_they_are_about(api: Api) -> None:
    # Given events about a pod, about its job, and about a pod of another namespace of the same name
    seeded(api)
    pod = api.fake.pods[("kubeflow", "llama-worker-0")]
    api.fake.record_event(pod, "Pulled", "Container image already present on machine")
    api.fake.record_event(pod, "BackOff", "Back-off restarting failed container", type_="Warning", count=4)
    api.fake.record_event(
        api.fake.jobs[("PyTorchJob", "kubeflow", "llama")], "PyTorchJobRunning", "running", component="pytorchjob-controller"
    )
    api.fake.add_pod("other", "llama-worker-0", None)
    api.fake.record_event(api.fake.pods[("other", "llama-worker-0")], "Scheduled", "elsewhere")
    # When the pod's events are listed, then they are its own, as stored
    events = api.port.list_events("kubeflow", "Pod", "llama-worker-0")
    assert [(e["reason"], e["type"], e["count"], e["involvedObject"]["uid"]) for e in events] == [
        ("Pulled", "Normal", 1, pod["metadata"]["uid"]),
        ("BackOff", "Warning", 4, pod["metadata"]["uid"]),
    ]
    # And the job's are found by its kind
    assert [e["reason"] for e in api.port.list_events("kubeflow", "PyTorchJob", "llama")] == ["PyTorchJobRunning"]
    assert api.port.list_events("kubeflow", "Pod", "nope") == []


@pytest.mark.parametrize("bad", ["../kube-system", "Upper", "a/b", "ns?watch=1", ""])
def test_a_name_kubernetes_would_refuse_never_reaches_a_path(bad: str) -> None:
    # (the real adapter refuses before it sends; the fake has no path to protect)
    never = KubernetesApi(endpoint=lambda: pytest.fail("no request may be made"), token=lambda _: "t")  # type: ignore[arg-type,return-value]
    with pytest.raises(KubeRequestRejected):
        never.get_node(bad)
    with pytest.raises(KubeRequestRejected):
        never.get_job(KubeJobRef.model_construct(kind="PyTorchJob", namespace=bad, name="job"))
    with pytest.raises(KubeRequestRejected):
        never.list_pods_on_node(bad)
    with pytest.raises(KubeRequestRejected):
        never.patch_workload("v1beta2", bad, "w", [])
    with pytest.raises(KubeRequestRejected):
        never.get_workload("v1beta2", "kubeflow", bad)
    with pytest.raises(KubeRequestRejected):  # (a version is put in the path too: only those we speak)
        never.get_workload(bad, "kubeflow", "w")
    with pytest.raises(KubeRequestRejected):
        never.api_group(bad)
    with pytest.raises(KubeRequestRejected):
        never.list_jobs_in("PyTorchJob", bad, "a=b")
    with pytest.raises(KubeRequestRejected):
        never.get_pod_log(bad, "pod", "pytorch", 40, 1024)
    with pytest.raises(KubeRequestRejected):
        never.get_pod_log("kubeflow", bad, "pytorch", 40, 1024)
    with pytest.raises(KubeRequestRejected):
        never.get_pod_log("kubeflow", "pod", bad, 40, 1024)
    with pytest.raises(KubeRequestRejected):
        never.list_events("kubeflow", "Pod", bad)
    with pytest.raises(KubeRequestRejected):  # (a kind is put in the field selector: no comma, no "=")
        never.list_events("kubeflow", "Pod,involvedObject.name=x", "pod")
