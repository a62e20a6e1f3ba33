"""The real Kubernetes adapter (adapters/kubernetes.py KubernetesApi) on the wire: what only the wire
shows, against a local HTTPS server serving FakeKube (tests/contract/kube_api_support.py): paths, query
strings, content types, the bearer token and its renewal, paging, status codes to our errors, the
cluster CA, a request without an answer."""

from __future__ import annotations

import json
import ssl
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlparse

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from hyperpod_recovery.adapters.eks import KubeEndpoint
from hyperpod_recovery.adapters.kubernetes import JSON_PATCH, PAGE_LIMIT, TOKEN_REUSE_SECONDS, KubernetesApi
from hyperpod_recovery.errors import (
    KubeAccessDenied,
    KubeAlreadyExists,
    KubeConflict,
    KubeObjectGone,
    KubeRequestRejected,
    KubeThrottled,
    KubeUnavailable,
)
from hyperpod_recovery.models.kubernetes import KubeJobRef
from sandbox.eks import tls_material
from sandbox.kube import FakeKube
from tests.contract import kube_api_support
from tests.contract.kube_api_support import NODE, real_api, seeded

# The API server under test, fake and real-over-TLS, as pytest finds fixtures: by name in this module.
tls = kube_api_support.tls
_running_server = kube_api_support._running_server
server = kube_api_support.server


# --- what only the wire shows -----------------------------------------------------------------------
def test_requests_carry_the_token_the_content_types_and_exact_paths(server: HTTPServer, tls: tuple[str, ssl.SSLContext]) -> None:
    # Given the real adapter against the local API server
    api = seeded(real_api(server, tls[0], FakeKube()))
    assert api.wire is not None
    # When it reads, patches, lists pods and creates a job
    node = api.port.get_node(NODE)
    api.port.patch_node(NODE, [{"op": "test", "path": "/metadata/resourceVersion", "value": node["metadata"]["resourceVersion"]}])
    api.port.list_pods_on_node(NODE)
    job = api.port.get_job(KubeJobRef(kind="PyTorchJob", namespace="kubeflow", name="llama"))
    api.port.create_job(
        "PyTorchJob", "kubeflow", {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "r1"}, "spec": job["spec"]}
    )
    seen = [(r["method"], r["path"], r["query"], r["headers"].get("Content-Type")) for r in api.wire.requests]
    # Then each request is the one the Kubernetes API documents
    assert seen == [
        ("GET", f"/api/v1/nodes/{NODE}", {}, None),
        ("PATCH", f"/api/v1/nodes/{NODE}", {}, JSON_PATCH),
        ("GET", "/api/v1/pods", {"fieldSelector": f"spec.nodeName={NODE}", "limit": str(PAGE_LIMIT)}, None),
        ("GET", "/apis/kubeflow.org/v1/namespaces/kubeflow/pytorchjobs/llama", {}, None),
        ("POST", "/apis/kubeflow.org/v1/namespaces/kubeflow/pytorchjobs", {}, "application/json"),
    ]
    # And Kueue's Workloads and a namespace's jobs are where Kueue's and the training operator's APIs put them
    api.wire.requests.clear()
    api.fake.kueue = True
    api.port.api_group("kueue.x-k8s.io")
    api.port.list_workloads("v1beta2", "kubeflow", "kueue.x-k8s.io/job-uid=u")
    with pytest.raises(KubeObjectGone):
        api.port.patch_workload("v1beta1", "kubeflow", "w", [{"op": "add", "path": "/spec/active", "value": False}])
    api.port.list_jobs_in("PyTorchJob", "kubeflow", "a=b")
    assert [(r["method"], r["path"], r["query"], r["headers"].get("Content-Type")) for r in api.wire.requests] == [
        ("GET", "/apis/kueue.x-k8s.io", {}, None),
        (
            "GET",
            "/apis/kueue.x-k8s.io/v1beta2/namespaces/kubeflow/workloads",
            {"labelSelector": "kueue.x-k8s.io/job-uid=u", "limit": "500"},
            None,
        ),
        ("PATCH", "/apis/kueue.x-k8s.io/v1beta1/namespaces/kubeflow/workloads/w", {}, JSON_PATCH),
        ("GET", "/apis/kubeflow.org/v1/namespaces/kubeflow/pytorchjobs", {"labelSelector": "a=b", "limit": "500"}, None),
    ]
    # And every one carries the bearer token of the cluster, minted once for all of them
    assert {r["headers"]["Authorization"] for r in api.wire.requests} == {"Bearer k8s-aws-v1.token-1"}
    assert api.port.calls == [
        ("get", "nodes"),
        ("patch", "nodes"),
        ("list", "pods"),
        ("get", "pytorchjobs"),
        ("create", "pytorchjobs"),
        ("get", "/apis/kueue.x-k8s.io"),
        ("list", "workloads"),
        ("patch", "workloads"),
        ("list", "pytorchjobs"),
    ]


def test_a_log_and_events_are_read_where_the_core_api_serves_them(server: HTTPServer, tls: tuple[str, ssl.SSLContext]) -> None:
    # Given the real adapter against the local API server, and a pod that printed two lines
    api = seeded(real_api(server, tls[0], FakeKube()))
    assert api.wire is not None
    api.fake.set_pod_log("kubeflow", "llama-worker-0", "one\ntwo\n")
    # When it reads the pod's log tail and the pod's events
    assert api.port.get_pod_log("kubeflow", "llama-worker-0", "pytorch", 40, 16384) == "one\ntwo\n"
    api.port.list_events("kubeflow", "Pod", "llama-worker-0")
    # Then the requests are the ones the Kubernetes API documents (the log's answer is text/plain)
    assert [(r["method"], r["path"], r["query"], r["headers"].get("Accept")) for r in api.wire.requests] == [
        (
            "GET",
            "/api/v1/namespaces/kubeflow/pods/llama-worker-0/log",
            {"container": "pytorch", "tailLines": "40", "limitBytes": "16384"},
            "text/plain",
        ),
        (
            "GET",
            "/api/v1/namespaces/kubeflow/events",
            {"fieldSelector": "involvedObject.kind=Pod,involvedObject.name=llama-worker-0", "limit": str(PAGE_LIMIT)},
            "application/json",
        ),
    ]
    assert api.port.calls == [("get", "pods/log"), ("list", "events")]


def test_a_log_refused_by_the_api_server_is_our_named_error(server: HTTPServer, tls: tuple[str, ssl.SSLContext]) -> None:
    # (403: the function's role is not in the log readers' group; the Status body is JSON even for a log)
    api = seeded(real_api(server, tls[0], FakeKube()))
    assert api.wire is not None
    api.wire.status_override.append(
        (403, {"kind": "Status", "reason": "Forbidden", "message": 'pods "llama-worker-0" is forbidden: cannot get resource "pods/log"'})
    )
    with pytest.raises(KubeAccessDenied, match="pods/log"):
        api.port.get_pod_log("kubeflow", "llama-worker-0", "pytorch", 40, 1024)


def test_a_long_list_is_read_to_its_end_page_by_page(
    server: HTTPServer, tls: tuple[str, ssl.SSLContext], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("hyperpod_recovery.adapters.kubernetes.PAGE_LIMIT", 3)
    fake = FakeKube()
    for n in range(7):
        fake.add_node(f"node-{n:04d}")
    api = real_api(server, tls[0], fake)
    assert [n["metadata"]["name"] for n in api.port.list_nodes()] == [f"node-{n:04d}" for n in range(7)]
    assert api.wire is not None and [(r["query"]["limit"], r["query"].get("continue")) for r in api.wire.requests] == [
        ("3", None),
        ("3", "3"),
        ("3", "6"),
    ]


@pytest.mark.parametrize(
    ("status", "body", "method", "error"),
    [
        (404, {"kind": "Status", "reason": "NotFound"}, "get", KubeObjectGone),
        (409, {"kind": "Status", "reason": "Conflict"}, "patch", KubeConflict),
        (409, {"kind": "Status", "reason": "AlreadyExists"}, "create", KubeAlreadyExists),
        # a failed JSON-Patch test as the API server reports it today, and as older ones did
        (
            422,
            {
                "kind": "Status",
                "reason": "Invalid",
                "details": {
                    "causes": [
                        {"type": "UnexpectedServerResponse", "message": "testing value /metadata/resourceVersion failed: test failed"}
                    ]
                },
            },
            "patch",
            KubeConflict,
        ),
        (
            500,
            {"kind": "Status", "reason": "InternalError", "message": "Testing value /metadata/resourceVersion failed"},
            "patch",
            KubeConflict,
        ),
        (
            422,
            {
                "kind": "Status",
                "reason": "Invalid",
                "details": {"causes": [{"type": "FieldValueInvalid", "field": "spec.taints[0].effect"}]},
            },
            "patch",
            KubeRequestRejected,
        ),
        (429, {"kind": "Status", "reason": "TooManyRequests"}, "get", KubeThrottled),
        (
            403,
            {"kind": "Status", "reason": "Forbidden", "message": 'nodes is forbidden: User "x" cannot patch resource "nodes"'},
            "patch",
            KubeAccessDenied,
        ),
        (400, {"kind": "Status", "reason": "BadRequest"}, "get", KubeRequestRejected),
        (500, {"kind": "Status", "reason": "InternalError"}, "get", KubeUnavailable),
        (503, {}, "get", KubeUnavailable),
    ],
)
def test_status_codes_become_our_named_errors(
    server: HTTPServer, tls: tuple[str, ssl.SSLContext], status: int, body: dict[str, Any], method: str, error: type[Exception]
) -> None:
    api = seeded(real_api(server, tls[0], FakeKube()))
    assert api.wire is not None
    api.wire.status_override.append((status, body))
    calls = {
        "get": lambda: api.port.get_node(NODE),
        "patch": lambda: api.port.patch_node(NODE, []),
        "create": lambda: api.port.create_job(
            "PyTorchJob", "kubeflow", {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "x"}}
        ),
    }
    with pytest.raises(error):
        calls[method]()


def test_a_401_mints_a_fresh_token_once_and_a_second_401_is_access_denied(server: HTTPServer, tls: tuple[str, ssl.SSLContext]) -> None:
    tokens: list[str] = []
    api = seeded(real_api(server, tls[0], FakeKube(), tokens=tokens))
    assert api.wire is not None
    api.wire.status_override.append((401, {"kind": "Status", "reason": "Unauthorized"}))
    assert api.port.get_node(NODE)["metadata"]["name"] == NODE
    assert [r["headers"]["Authorization"] for r in api.wire.requests] == ["Bearer k8s-aws-v1.token-1", "Bearer k8s-aws-v1.token-2"]
    api.wire.status_override += [(401, {"kind": "Status", "reason": "Unauthorized"})] * 2
    with pytest.raises(KubeAccessDenied):
        api.port.get_node(NODE)
    assert tokens == ["llm-eks"] * 3  # the first, the fresh one after the 401, and one more after the next 401


def test_a_token_is_minted_again_before_it_expires(server: HTTPServer, tls: tuple[str, ssl.SSLContext]) -> None:
    clock = [0.0]
    api = seeded(real_api(server, tls[0], FakeKube(), clock=clock))
    assert api.wire is not None
    api.port.get_node(NODE)
    clock[0] = TOKEN_REUSE_SECONDS - 1
    api.port.get_node(NODE)
    clock[0] = TOKEN_REUSE_SECONDS + 1
    api.port.get_node(NODE)
    assert [r["headers"]["Authorization"][-1] for r in api.wire.requests] == ["1", "1", "2"]


def test_a_server_whose_certificate_the_cluster_ca_did_not_sign_is_never_talked_to(server: HTTPServer, tmp_path: Path) -> None:
    other_ca, _ = tls_material(tmp_path)  # a CA that did not sign the server's certificate
    api = real_api(server, other_ca, FakeKube())
    with pytest.raises(KubeUnavailable, match="no answer"):
        api.port.get_node(NODE)
    assert api.wire is not None and api.wire.requests == []


def test_an_api_server_that_does_not_answer_is_kube_unavailable() -> None:
    endpoint = KubeEndpoint(cluster_name="llm-eks", url="https://127.0.0.1:9", ca_pem=_tls_material_ca_only())
    with pytest.raises(KubeUnavailable):
        KubernetesApi(endpoint=lambda: endpoint, token=lambda _: "t").get_node(NODE)


def _tls_material_ca_only() -> str:
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        return tls_material(Path(directory))[0]


def test_a_list_whose_continue_token_expired_is_read_again_from_its_start_once(
    server: HTTPServer, tls: tuple[str, ssl.SSLContext], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("hyperpod_recovery.adapters.kubernetes.PAGE_LIMIT", 3)
    fake = FakeKube()
    for n in range(5):
        fake.add_node(f"node-{n:04d}")
    api = real_api(server, tls[0], fake)
    assert api.wire is not None
    # the second page's token expired (410): the list is read again, whole, and nothing is counted twice
    expired = (410, {"kind": "Status", "reason": "Expired", "message": "The provided continue parameter is too old"})
    original = api.wire.handler(fake)
    pages = iter([None, expired])

    def handle(request: Request) -> Response:
        answer = next(pages, None)
        if answer is None:
            return original(request)
        api.wire.requests.append({"query": dict(parse_qsl(urlparse(request.url).query))})
        return Response(json.dumps(answer[1]), status=answer[0], content_type="application/json")

    server.clear()
    server.expect_request(__import__("re").compile(".*")).respond_with_handler(handle)
    assert [n["metadata"]["name"] for n in api.port.list_nodes()] == [f"node-{n:04d}" for n in range(5)]
    assert [r["query"].get("continue") for r in api.wire.requests] == [None, "3", None, "3"]


def test_a_request_that_got_no_answer_is_sent_once_more_on_a_fresh_connection(tmp_path: Path) -> None:
    # Given the API server dropping the connection of the next request without an answer (a stale one)
    from sandbox.eks import KubeApiServer

    fake = FakeKube()
    fake.add_hyperpod_node("i-0123456789abcdef0")
    server = KubeApiServer(fake, tmp_path)
    try:
        endpoint = KubeEndpoint(cluster_name="llm-eks", url=server.url, ca_pem=server.ca_pem)
        api = KubernetesApi(endpoint=lambda: endpoint, token=lambda _: "k8s-aws-v1.t")
        server.drop_next = 1
        # Then the read succeeds on the second try; two dropped in a row are KubeUnavailable
        assert api.get_node(NODE)["metadata"]["name"] == NODE
        server.drop_next = 2
        with pytest.raises(KubeUnavailable):
            api.get_node(NODE)
    finally:
        server.close()
