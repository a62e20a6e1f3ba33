"""The Kubernetes API of an EKS-orchestrated HyperPod cluster: the few calls a recovery makes.

A thin REST adapter over urllib3 (which botocore already brings, so the layer grows by this file
only; the ``kubernetes`` client would add 16-126 MB: bench/eks_footprint.py). Every request is
explicit about its path, query and content type, which tests/contract/test_kube_api_wire.py checks on
the wire against a local TLS server:

| call                 | request                                                                 |
|----------------------|-------------------------------------------------------------------------|
| get_node             | GET   /api/v1/nodes/{name}                                               |
| list_nodes           | GET   /api/v1/nodes?labelSelector=...&limit=500[&continue=...]           |
| patch_node           | PATCH /api/v1/nodes/{name}   (application/json-patch+json)              |
| list_pods_on_node    | GET   /api/v1/pods?fieldSelector=spec.nodeName%3D{name}&limit=500        |
| list_pods            | GET   /api/v1/namespaces/{ns}/pods?labelSelector=...&limit=500           |
| get_pod_log          | GET   /api/v1/namespaces/{ns}/pods/{pod}/log?container=&tailLines=&limitBytes= (text/plain) |
| list_events          | GET   /api/v1/namespaces/{ns}/events?fieldSelector=involvedObject.kind=K,   |
|                      |       involvedObject.name=N&limit=500 (quoted)                           |
| get_job              | GET   /apis/{group}/{version}/namespaces/{ns}/{plural}/{name}            |
| create_job           | POST  /apis/{group}/{version}/namespaces/{ns}/{plural}                  |
| patch_job            | PATCH /apis/{group}/{version}/namespaces/{ns}/{plural}/{name} (json-patch) |
| list_jobs            | GET   /apis/{group}/{version}/{plural}?limit=500                         |
| list_jobs_in         | GET   /apis/{group}/{version}/namespaces/{ns}/{plural}?labelSelector=...  |
| api_group            | GET   /apis/{group}   (discovery: an APIGroup, its versions; 404: not served) |
| list_workloads       | GET   /apis/kueue.x-k8s.io/{version}/namespaces/{ns}/workloads?labelSelector=... |
| get_workload         | GET   /apis/kueue.x-k8s.io/{version}/namespaces/{ns}/workloads/{name}    |
| patch_workload       | PATCH /apis/kueue.x-k8s.io/{version}/namespaces/{ns}/workloads/{name} (json-patch) |

(The Workload calls take the version discovery found served: domain/jobs/eks_kueue.py. Discovery is a
non-resource URL every authenticated user may get: Kubernetes' default ClusterRole system:discovery,
bound to system:authenticated.)

Status codes become our named errors (errors.py): 404 KubeObjectGone (naming the object when its
Status details do: an object that is not there, not a path that is not served); 409 AlreadyExists
KubeAlreadyExists, other 409s KubeConflict; a JSON Patch whose ``test`` failed (422 with the patch
library's error as its cause today, 500 on older API servers, kubernetes/kubernetes#68202)
KubeConflict; 429 KubeThrottled; 401/403 KubeAccessDenied; a list's expired continue token (410)
reads the list again once; other 4xx (any other 422 among them) KubeRequestRejected; 5xx, no
answer, an answer that is not JSON KubeUnavailable. No answer is retried here: a conflict is the
caller's to re-read, and the workflow's Retry paces the rest; only a request that got no answer (a
connection gone stale while the Lambda was frozen) is sent once more.

Every name is validated before it is put in a path (models/kubernetes.py), and quoted besides.
"""

from __future__ import annotations

import json
import ssl
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict, Unpack
from urllib.parse import quote, urlencode

import urllib3

from hyperpod_recovery.errors import (
    KubeAccessDenied,
    KubeAlreadyExists,
    KubeConflict,
    KubeObjectGone,
    KubeRequestRejected,
    KubeThrottled,
    KubeUnavailable,
)
from hyperpod_recovery.models.kubernetes import (
    JOB_KINDS,
    KUEUE_GROUP,
    WORKLOAD_PLURAL,
    WORKLOAD_VERSIONS,
    KubeJobRef,
    is_dns1123_label,
    is_dns1123_subdomain,
)

if TYPE_CHECKING:
    from hyperpod_recovery.adapters.eks import KubeEndpoint

JSON_PATCH = "application/json-patch+json"
PAGE_LIMIT = 500
# A token is good for about 15 minutes (aws eks get-token says 14): minted again after 10.
TOKEN_REUSE_SECONDS = 600
# A list larger than this many pages is not read to its end (a runaway continue token).
MAX_PAGES = 200
# The request budget. A connection that went stale while the Lambda was frozen fails fast and is
# tried once more on a fresh one; a 401 gets a fresh token and one last send, without a retry. So one
# request takes at most 3 x (connect + read) plus two token mints: 23 s, within the calling
# functions' 45 s with margin (tests/contract/test_time_budgets.py) and the orchestrator states' 60 s
# heartbeat. Every request of ours may be sent twice: reads, patches that test the version they read
# (the second conflicts and is decided again), and a create whose second try finds the first (409,
# then checked).
CONNECT_TIMEOUT_SECONDS = 2.0
READ_TIMEOUT_SECONDS = 5.0
NO_ANSWER_RETRY = urllib3.Retry(total=1, connect=1, read=1, other=1, status=0, redirect=0, allowed_methods=None, raise_on_status=False)
SENDS_AFTER_401 = 1
_TIMEOUT = urllib3.Timeout(connect=CONNECT_TIMEOUT_SECONDS, read=READ_TIMEOUT_SECONDS)


class _Call(TypedDict):
    """What one API call is, beside its method and path: the RBAC resource and verb it needs (the
    calls log, which the RBAC contract test reads), and its JSON body and content type."""

    resource: str
    verb: str
    body: NotRequired[Any]
    content_type: NotRequired[str | None]


class KubeExpired(KubeUnavailable):
    """410 Gone: a list's continue token expired (the list is read again from its start)."""


_TEST_FAILED = "testing value"  # the message of a failed JSON-Patch test op, before 422 was used


def _checked_subdomain(kind: str, value: str) -> str:
    if not is_dns1123_subdomain(value):
        raise KubeRequestRejected(f"{kind} {value!r} is not a valid Kubernetes name (DNS-1123 subdomain)")
    return quote(value, safe="")


def _checked_label(kind: str, value: str) -> str:
    if not is_dns1123_label(value):
        raise KubeRequestRejected(f"{kind} {value!r} is not a valid Kubernetes name (DNS-1123 label)")
    return value


def _checked_namespace(value: str) -> str:
    if not is_dns1123_label(value):
        raise KubeRequestRejected(f"namespace {value!r} is not a valid Kubernetes namespace (DNS-1123 label)")
    return quote(value, safe="")


LIVE_PODS_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"


class KubernetesApi:
    """The calls, against one cluster's API server. ``endpoint``: where it is (resolved on the first
    call, so a handler that never calls Kubernetes never asks EKS); ``token``: a bearer token for a
    cluster name (adapters/eks_token.py mint_token); ``monotonic``: when to mint again."""

    def __init__(
        self,
        endpoint: Callable[[], KubeEndpoint],
        token: Callable[[str], str],
        *,
        pool: urllib3.PoolManager | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._endpoint_source = endpoint
        self._token_source = token
        self._pool = pool
        self._monotonic = monotonic
        self._endpoint: KubeEndpoint | None = None
        self._token: tuple[str, float] | None = None
        self.calls: list[tuple[str, str]] = []  # (verb, resource) of every request, for the drill report

    # --- nodes ---------------------------------------------------------------------------------------
    def get_node(self, name: str) -> dict[str, Any]:
        return self._request("GET", f"/api/v1/nodes/{_checked_subdomain('node', name)}", resource="nodes", verb="get")

    def list_nodes(self, label_selector: str | None = None) -> list[dict[str, Any]]:
        query = {"labelSelector": label_selector} if label_selector else {}
        return self._list("/api/v1/nodes", query, resource="nodes")

    def patch_node(self, name: str, operations: list[dict[str, Any]]) -> dict[str, Any]:
        """A JSON Patch (RFC 6902): its ``test`` operations make it conditional on what was read."""
        path = f"/api/v1/nodes/{_checked_subdomain('node', name)}"
        return self._request("PATCH", path, body=operations, content_type=JSON_PATCH, resource="nodes", verb="patch")

    # --- pods ------------------------------------------------------------------------------------
    def list_pods_on_node(self, node_name: str) -> list[dict[str, Any]]:
        _checked_subdomain("node", node_name)
        return self._list("/api/v1/pods", {"fieldSelector": f"spec.nodeName={node_name}"}, resource="pods")

    def list_live_pods(self) -> list[dict[str, Any]]:
        """Every namespace's pods that have not ended (what holds a node): one list, paged."""
        return self._list("/api/v1/pods", {"fieldSelector": LIVE_PODS_SELECTOR}, resource="pods")

    def list_pods(self, namespace: str, label_selector: str) -> list[dict[str, Any]]:
        """A namespace's pods by a label selector (a job's pods: its operator labels them)."""
        return self._list(f"/api/v1/namespaces/{_checked_namespace(namespace)}/pods", {"labelSelector": label_selector}, resource="pods")

    def get_pod_log(self, namespace: str, pod: str, container: str, tail_lines: int, limit_bytes: int) -> str:
        """The last ``tail_lines`` lines of a container's log, of which at most the first ``limit_bytes``
        bytes (the API server stops there, mid-line if it must): text, not JSON."""
        path = f"/api/v1/namespaces/{_checked_namespace(namespace)}/pods/{_checked_subdomain('pod', pod)}/log"
        query = {"container": _checked_label("container", container), "tailLines": str(tail_lines), "limitBytes": str(limit_bytes)}
        response = self._send("GET", f"{path}?{urlencode(query, quote_via=quote)}", resource="pods/log", verb="get", accept="text/plain")
        return response.data.decode("utf-8", errors="replace")

    # --- events ----------------------------------------------------------------------------------
    def list_events(self, namespace: str, involved_kind: str, involved_name: str) -> list[dict[str, Any]]:
        """A namespace's core/v1 events about one object (by its kind and name)."""
        if not involved_kind.isascii() or not involved_kind.isalnum():
            raise KubeRequestRejected(f"kind {involved_kind!r} is not a Kubernetes kind")
        _checked_subdomain(involved_kind.lower(), involved_name)
        selector = f"involvedObject.kind={involved_kind},involvedObject.name={involved_name}"
        return self._list(f"/api/v1/namespaces/{_checked_namespace(namespace)}/events", {"fieldSelector": selector}, resource="events")

    def list_node_events(self) -> list[dict[str, Any]]:
        """The core/v1 events about nodes (namespace default, where the kubelet and node agents write
        them): At Risk's tick reads the warning-only GPU faults among them (domain/at_risk/kubernetes.py)."""
        return self._list("/api/v1/namespaces/default/events", {"fieldSelector": "involvedObject.kind=Node"}, resource="events")

    # --- training jobs ---------------------------------------------------------------------------
    def get_job(self, ref: KubeJobRef) -> dict[str, Any]:
        info = JOB_KINDS[ref.kind]
        namespace, name = _checked_namespace(ref.namespace), _checked_subdomain("job", ref.name)
        path = f"/apis/{info.group}/{info.version}/namespaces/{namespace}/{info.plural}/{name}"
        return self._request("GET", path, resource=info.plural, verb="get")

    def create_job(self, kind: str, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        info = JOB_KINDS[kind]
        path = f"/apis/{info.group}/{info.version}/namespaces/{_checked_namespace(namespace)}/{info.plural}"
        return self._request("POST", path, body=body, content_type="application/json", resource=info.plural, verb="create")

    def patch_job(self, ref: KubeJobRef, operations: list[dict[str, Any]]) -> dict[str, Any]:
        """A JSON Patch of a job (custom resources take no strategic merge; JSON Patch is exact)."""
        info = JOB_KINDS[ref.kind]
        namespace, name = _checked_namespace(ref.namespace), _checked_subdomain("job", ref.name)
        path = f"/apis/{info.group}/{info.version}/namespaces/{namespace}/{info.plural}/{name}"
        return self._request("PATCH", path, body=operations, content_type=JSON_PATCH, resource=info.plural, verb="patch")

    def list_jobs(self, kind: str) -> list[dict[str, Any]]:
        info = JOB_KINDS[kind]
        return self._list(f"/apis/{info.group}/{info.version}/{info.plural}", {}, resource=info.plural)

    def list_jobs_in(self, kind: str, namespace: str, label_selector: str) -> list[dict[str, Any]]:
        """A namespace's jobs of a kind by a label selector (our re-creation, by the token it carries)."""
        info = JOB_KINDS[kind]
        path = f"/apis/{info.group}/{info.version}/namespaces/{_checked_namespace(namespace)}/{info.plural}"
        return self._list(path, {"labelSelector": label_selector}, resource=info.plural)

    # --- discovery -------------------------------------------------------------------------------
    def api_group(self, group: str) -> dict[str, Any]:
        """The APIGroup the API server serves under ``group`` (its versions, the preferred first);
        KubeObjectGone when it serves no such group."""
        path = f"/apis/{_checked_subdomain('API group', group)}"
        return self._request("GET", path, resource=path, verb="get")

    # --- Kueue's Workloads (HyperPod task governance) --------------------------------------------
    def list_workloads(self, version: str, namespace: str, label_selector: str | None = None) -> list[dict[str, Any]]:
        query = {"labelSelector": label_selector} if label_selector else {}
        return self._list(_workloads_path(version, namespace), query, resource=WORKLOAD_PLURAL)

    def get_workload(self, version: str, namespace: str, name: str) -> dict[str, Any]:
        path = f"{_workloads_path(version, namespace)}/{_checked_subdomain('workload', name)}"
        return self._request("GET", path, resource=WORKLOAD_PLURAL, verb="get")

    def patch_workload(self, version: str, namespace: str, name: str, operations: list[dict[str, Any]]) -> dict[str, Any]:
        path = f"{_workloads_path(version, namespace)}/{_checked_subdomain('workload', name)}"
        return self._request("PATCH", path, body=operations, content_type=JSON_PATCH, resource=WORKLOAD_PLURAL, verb="patch")

    # --- the wire --------------------------------------------------------------------------------
    def _list(self, path: str, query: dict[str, str], *, resource: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        token = ""
        restarted = False
        for _ in range(MAX_PAGES):
            page_query = {**query, "limit": str(PAGE_LIMIT)} | ({"continue": token} if token else {})
            try:
                page = self._request("GET", f"{path}?{urlencode(page_query, quote_via=quote)}", resource=resource, verb="list")
            except KubeExpired:
                if restarted or not token:
                    raise KubeUnavailable(f"listing {resource}: its continue token expired twice") from None
                items, token, restarted = [], "", True  # (410: the list changed too much to go on: read it again, once)
                continue
            items.extend(page.get("items") or [])
            token = (page.get("metadata") or {}).get("continue") or ""
            if not token:
                return items
        raise KubeUnavailable(f"listing {resource} did not end after {MAX_PAGES} pages of {PAGE_LIMIT}")

    def _connection(self) -> tuple[KubeEndpoint, urllib3.PoolManager]:
        if self._endpoint is None:
            self._endpoint = self._endpoint_source()
        if self._pool is None:
            try:
                context = ssl.create_default_context(cadata=self._endpoint.ca_pem)
            except (ssl.SSLError, ValueError) as exc:
                raise KubeUnavailable(f"the EKS cluster's certificate authority does not load: {exc}") from exc
            self._pool = urllib3.PoolManager(ssl_context=context, timeout=_TIMEOUT, retries=NO_ANSWER_RETRY, maxsize=4)
        return self._endpoint, self._pool

    def _bearer(self, endpoint: KubeEndpoint, *, fresh: bool = False) -> str:
        now = self._monotonic()
        if fresh or self._token is None or now - self._token[1] >= TOKEN_REUSE_SECONDS:
            self._token = (self._token_source(endpoint.cluster_name), now)
        return self._token[0]

    def _request(self, method: str, path: str, **call: Unpack[_Call]) -> dict[str, Any]:
        """One request whose answer is a JSON object; else KubeUnavailable."""
        response = self._send(method, path, **call)
        try:
            answer = json.loads(response.data or b"{}")
        except ValueError as exc:
            raise KubeUnavailable(f"{method} {path.split('?')[0]}: the API server's answer is not JSON") from exc
        if not isinstance(answer, dict):
            raise KubeUnavailable(f"{method} {path.split('?')[0]}: the API server answered {type(answer).__name__}, not an object")
        return answer

    def _send(self, method: str, path: str, *, accept: str = "application/json", **call: Unpack[_Call]) -> urllib3.BaseHTTPResponse:
        """One request, its answer when 2xx; else our named error."""
        endpoint, pool = self._connection()
        body, content_type = call.get("body"), call.get("content_type")
        payload = None if body is None else json.dumps(body).encode()
        self.calls.append((call["verb"], call["resource"]))
        response = None
        for attempt in range(1 + SENDS_AFTER_401):
            headers = {"Accept": accept, "Authorization": f"Bearer {self._bearer(endpoint, fresh=attempt > 0)}"}
            if content_type:
                headers["Content-Type"] = content_type
            # (after a 401 the connection answered: one send, no retry, within the request budget)
            retries = NO_ANSWER_RETRY if attempt == 0 else False
            try:
                response = pool.request(method, endpoint.url + path, body=payload, headers=headers, redirect=False, retries=retries)
            except urllib3.exceptions.HTTPError as exc:
                raise KubeUnavailable(f"{method} {path.split('?')[0]}: no answer from the API server ({type(exc).__name__})") from exc
            # A 401 may be a token minted just before a clock step or a credential rotation: once more.
            if response.status != 401:
                break
        assert response is not None
        if 200 <= response.status < 300:
            return response
        raise _error_for(method, path.split("?")[0], response.status, response.data)


def _workloads_path(version: str, namespace: str) -> str:
    if version not in WORKLOAD_VERSIONS:
        raise KubeRequestRejected(f"Workload API version {version!r}: only {', '.join(WORKLOAD_VERSIONS)} are spoken")
    return f"/apis/{KUEUE_GROUP}/{version}/namespaces/{_checked_namespace(namespace)}/{WORKLOAD_PLURAL}"


def _error_for(method: str, path: str, status: int, data: bytes) -> Exception:
    try:
        detail = json.loads(data or b"{}")
    except ValueError:
        detail = {}
    detail = detail if isinstance(detail, dict) else {}
    reason = str(detail.get("reason") or "")
    message = str(detail.get("message") or "")[:300]
    causes = [c for c in (detail.get("details") or {}).get("causes") or [] if isinstance(c, dict)]
    said = f"{method} {path}: {status} {reason} {message}".rstrip()
    if causes:
        said += " (" + "; ".join(str(c.get("message") or "")[:200] for c in causes[:3]) + ")"
    if status == 404:
        # (an object that is not there is named in the details; a path not served names nothing)
        given = detail.get("details")
        details: dict[str, Any] = given if isinstance(given, dict) else {}
        named = details.get("name") if isinstance(details.get("name"), str) and details.get("name") else None
        resource = ".".join(str(details[k]) for k in ("kind", "group") if isinstance(details.get(k), str) and details[k])
        return KubeObjectGone(said, named=named, resource=resource)
    if status == 410:
        return KubeExpired(said)
    if status == 409:
        return KubeAlreadyExists(said) if reason == "AlreadyExists" else KubeConflict(said)
    if status in (422, 500) and _patch_did_not_apply(message, causes):
        return KubeConflict(said)
    if status == 429:
        return KubeThrottled(said)
    if status in (401, 403):
        return KubeAccessDenied(said)
    if 400 <= status < 500:
        return KubeRequestRejected(said)
    return KubeUnavailable(said)


def _patch_did_not_apply(message: str, causes: list[dict[str, Any]]) -> bool:
    """A JSON Patch whose ``test`` failed: the object changed since it was read. The API server
    answers 422 with the patch library's error as a cause (apiserver handlers/patch.go applyJSPatch),
    older ones 500 with it as the message. Every patch of ours tests the resourceVersion first, so any
    other error of a patch (a path that is not there) is ours, on a node as it was read: not a conflict."""
    texts = [message.lower()] + [str(c.get("message") or "").lower() for c in causes]
    return any(_TEST_FAILED in t or "test failed" in t for t in texts)
