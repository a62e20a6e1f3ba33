"""The fake's API on the wire: each request path to its call, each named error to the status the API
server answers."""

from __future__ import annotations

import re
from typing import Any

from hyperpod_recovery import errors
from hyperpod_recovery.adapters.kubernetes import LIVE_PODS_SELECTOR
from hyperpod_recovery.models.kubernetes import (
    JOB_KINDS,
    KUEUE_GROUP,
    WORKLOAD_PLURAL,
    KubeJobRef,
)
from sandbox.kube.api import FakeKube
from sandbox.kube.objects import (
    Invalid,
    PatchDidNotApply,
    PatchPathMissing,
)

# --- the same object on the wire, for the real adapter (tests/contract/kube_api_support.py) ---------
_PATHS = [
    (re.compile(r"^/api/v1/nodes/(?P<name>[^/]+)$"), "node"),
    (re.compile(r"^/api/v1/nodes$"), "nodes"),
    (re.compile(r"^/api/v1/pods$"), "pods"),
    (re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/pods$"), "ns-pods"),
    (re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/pods/(?P<name>[^/]+)/log$"), "pod-log"),
    (re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/events$"), "events"),
    (re.compile(r"^/apis/(?P<group>[^/]+)/(?P<version>[^/]+)/namespaces/(?P<ns>[^/]+)/(?P<plural>[^/]+)/(?P<name>[^/]+)$"), "job"),
    (re.compile(r"^/apis/(?P<group>[^/]+)/(?P<version>[^/]+)/namespaces/(?P<ns>[^/]+)/(?P<plural>[^/]+)$"), "jobs-ns"),
    (re.compile(r"^/apis/(?P<group>[^/]+)/(?P<version>[^/]+)/(?P<plural>[^/]+)$"), "jobs"),
    (re.compile(r"^/apis/(?P<group>[^/]+)$"), "group"),
]
_STATUS_OF: list[tuple[type[Exception], int, str]] = [
    (errors.KubeObjectGone, 404, "NotFound"),
    (errors.KubeAlreadyExists, 409, "AlreadyExists"),
    (PatchDidNotApply, 422, "Invalid"),
    (PatchPathMissing, 422, "Invalid"),
    (Invalid, 422, "Invalid"),
    (errors.KubeConflict, 409, "Conflict"),
    (errors.KubeThrottled, 429, "TooManyRequests"),
    (errors.KubeAccessDenied, 403, "Forbidden"),
    (errors.KubeRequestRejected, 400, "BadRequest"),
    (errors.KubeUnavailable, 503, "ServiceUnavailable"),
]


# What the API server answers a path it serves nothing at (a group, version or resource not served: the
# CRD handler hands it to its delegate, and the chain ends in apiserver's util/notfoundhandler).
NOT_SERVED_MESSAGE = "the server could not find the requested resource"


def not_served() -> dict[str, Any]:
    """notfoundhandler's answer: a bare NotFound, no details (it names no object)."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": NOT_SERVED_MESSAGE,
        "reason": "NotFound",
        "code": 404,
    }


def status_body(exc: Exception) -> tuple[int, dict[str, Any]]:
    """The Status object the API server answers an error with (the cause of a patch that did not
    apply is the patch library's message, as apiserver's applyJSPatch reports it). A 404 for an object
    of a resource it serves names it, as apimachinery's errors.NewNotFound does (details: name, group,
    kind = the resource's plural; message '<plural>.<group> "<name>" not found'); one for a path it
    does not serve names nothing (not_served)."""
    code, reason = next(((c, r) for t, c, r in _STATUS_OF if isinstance(exc, t)), (500, "InternalError"))
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": str(exc), "reason": reason, "code": code}
    if isinstance(exc, errors.KubeObjectGone) and exc.named is None:
        return 404, not_served()
    if isinstance(exc, errors.KubeObjectGone):
        plural, _, group = exc.resource.partition(".")
        body["message"] = f'{exc.resource} "{exc.named}" not found'
        body["details"] = {"name": exc.named, "group": group, "kind": plural}
    elif isinstance(exc, PatchDidNotApply | PatchPathMissing):
        body["message"] = "the server rejected our request due to an error in our request"
        said = str(exc).split("(", 1)[-1].rstrip(")")
        body["details"] = {"causes": [{"reason": "UnexpectedServerResponse", "type": "UnexpectedServerResponse", "message": said}]}
    elif isinstance(exc, Invalid):
        body["details"] = {"causes": [{"type": "FieldValueInvalid", "message": str(exc)}]}
    return code, body


def kind_of_plural(group: str, version: str, plural: str) -> str | None:
    return next((k for k, i in JOB_KINDS.items() if (i.group, i.version, i.plural) == (group, version, plural)), None)


def serve(fake: FakeKube, method: str, path: str, query: dict[str, str], body: Any) -> tuple[int, Any]:
    """One HTTP request against ``fake``: (status, JSON body; a log's text as a str, served text/plain).
    Lists are paged by ``limit`` (with a ``continue`` token), as the API server pages them."""
    try:
        for pattern, what in _PATHS:
            m = pattern.match(path)
            if m is None:
                continue
            g = m.groupdict()
            if what == "node" and method == "GET":
                return 200, fake.get_node(g["name"])
            if what == "node" and method == "PATCH":
                return 200, fake.patch_node(g["name"], body)
            if what == "nodes" and method == "GET":
                return 200, _page(fake.list_nodes(query.get("labelSelector")), query, "NodeList")
            if what == "pods" and method == "GET":
                selector = query.get("fieldSelector", "")
                if selector == LIVE_PODS_SELECTOR:
                    return 200, _page(fake.list_live_pods(), query, "PodList")
                if not selector.startswith("spec.nodeName="):
                    return 400, {
                        "kind": "Status",
                        "reason": "BadRequest",
                        "message": f"unsupported fieldSelector {selector!r}",
                        "code": 400,
                    }
                return 200, _page(fake.list_pods_on_node(selector.removeprefix("spec.nodeName=")), query, "PodList")
            if what == "ns-pods" and method == "GET":
                return 200, _page(fake.list_pods(g["ns"], query.get("labelSelector", "")), query, "PodList")
            if what == "pod-log" and method == "GET":
                # (text/plain, as the API server answers a log; no container named: the pod's only one)
                pod = fake.pods.get((g["ns"], g["name"]))
                container = query.get("container") or (pod["spec"]["containers"][0]["name"] if pod else "")
                tail = int(query["tailLines"]) if "tailLines" in query else 1 << 30
                limit = int(query["limitBytes"]) if "limitBytes" in query else 1 << 30
                return 200, fake.get_pod_log(g["ns"], g["name"], container, tail, limit)
            if what == "events" and method == "GET":
                wanted = dict(part.partition("=")[::2] for part in query.get("fieldSelector", "").split(",") if part)
                if wanted == {"involvedObject.kind": "Node"} and g["ns"] == "default":  # (At Risk's tick: every node's)
                    return 200, _page(fake.list_node_events(), query, "EventList")
                if set(wanted) != {"involvedObject.kind", "involvedObject.name"}:
                    return 400, {"kind": "Status", "reason": "BadRequest", "message": f"unsupported fieldSelector {wanted!r}", "code": 400}
                events = fake.list_events(g["ns"], wanted["involvedObject.kind"], wanted["involvedObject.name"])
                return 200, _page(events, query, "EventList")
            if what == "group" and method == "GET":
                return 200, fake.api_group(g["group"])
            if (g.get("group"), g.get("plural")) == (KUEUE_GROUP, WORKLOAD_PLURAL):
                version = g["version"]
                if what == "jobs-ns" and method == "GET":
                    listed = fake.list_workloads(version, g["ns"], query.get("labelSelector"))
                    return 200, _page(listed, query, "WorkloadList", f"{KUEUE_GROUP}/{version}")
                if what == "job" and method == "GET":
                    return 200, fake.get_workload(version, g["ns"], g["name"])
                if what == "job" and method == "PATCH":
                    return 200, fake.patch_workload(version, g["ns"], g["name"], body)
                break
            kind = kind_of_plural(g.get("group", ""), g.get("version", ""), g.get("plural", ""))
            if kind is None:
                break
            if what == "job" and method == "GET":
                return 200, fake.get_job(KubeJobRef(kind=kind, namespace=g["ns"], name=g["name"]))  # type: ignore[arg-type]
            if what == "job" and method == "PATCH":
                return 200, fake.patch_job(KubeJobRef(kind=kind, namespace=g["ns"], name=g["name"]), body)  # type: ignore[arg-type]
            if what == "jobs-ns" and method == "POST":
                return 201, fake.create_job(kind, g["ns"], body)
            if what == "jobs-ns" and method == "GET":
                return 200, _page(fake.list_jobs_in(kind, g["ns"], query.get("labelSelector", "")), query, f"{kind}List")
            if what == "jobs" and method == "GET":
                return 200, _page(fake.list_jobs(kind), query, f"{kind}List")
        return 404, not_served()
    except Exception as exc:
        return status_body(exc)


def _page(items: list[dict[str, Any]], query: dict[str, str], kind: str, api_version: str = "v1") -> dict[str, Any]:
    limit = int(query.get("limit") or 0) or len(items) or 1
    start = int(query.get("continue") or 0)
    chunk = items[start : start + limit]
    more = start + limit < len(items)
    return {"kind": kind, "apiVersion": api_version, "metadata": {"continue": str(start + limit)} if more else {}, "items": chunk}
