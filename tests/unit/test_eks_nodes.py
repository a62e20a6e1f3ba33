"""A Kubernetes node through a recovery (domain/nodes/eks_nodes.py), applied to a schema-checked API server
(sandbox/kube/): every patch the rules write must store a valid Node, and give the node back as
it was before us, whatever it looked like.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hyperpod_recovery.domain.nodes.eks_nodes import NodeView, cordon_plan, give_back_plan, health_gate, pointer, rebooted_since_cordon
from hyperpod_recovery.models.kubernetes import (
    CORDON_PRE_EXISTING_ANNOTATION,
    DEEP_HEALTH_LABEL,
    HEALTH_STATUS_LABEL,
    INCIDENT_ANNOTATION,
    OUR_ANNOTATIONS,
    QUARANTINE_TAINT_KEY,
)
from sandbox.kube import FakeKube

AT = datetime(2026, 3, 14, 9, 5, tzinfo=UTC)
NAME = "hyperpod-i-0123456789abcdef0"

other_taints = st.lists(
    st.fixed_dictionaries(
        {
            "key": st.sampled_from(["gpu", "example.com/maintenance", "sagemaker.amazonaws.com/node-health-status"]),
            "effect": st.sampled_from(["NoSchedule", "NoExecute"]),
        }
    ),
    max_size=2,
    unique_by=lambda t: t["key"],
)
other_annotations = st.dictionaries(
    st.sampled_from(["team", "example.com/owner", "node.alpha.kubernetes.io/ttl"]), st.text("abc", max_size=3), max_size=2
)


def _node(fake: FakeKube, *, unschedulable: bool, taints: list[dict[str, Any]], annotations: dict[str, str]) -> dict[str, Any]:
    node = copy.deepcopy(fake.add_hyperpod_node("i-0123456789abcdef0", unschedulable=unschedulable))
    node["spec"].pop("taints", None)
    if taints:
        node["spec"]["taints"] = taints
    if annotations:
        node["metadata"]["annotations"] = annotations
    fake._store_node(node)
    return fake.get_node(NAME)


def _apply(fake: FakeKube, operations: list[dict[str, Any]]) -> dict[str, Any]:
    return fake.patch_node(NAME, operations) if operations else fake.get_node(NAME)


def _essence(node: dict[str, Any]) -> tuple[bool, list[Any], dict[str, str]]:
    return bool(node["spec"].get("unschedulable")), node["spec"].get("taints") or [], node["metadata"].get("annotations") or {}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(unschedulable=st.booleans(), taints=other_taints, annotations=other_annotations, human_uncordons=st.booleans())
def test_a_node_is_given_back_as_it_was_and_a_cordon_we_did_not_make_is_never_undone(
    unschedulable: bool, taints: list[dict[str, Any]], annotations: dict[str, str], human_uncordons: bool
) -> None:
    # Given any node (cordoned or not, with taints and annotations of others)
    fake = FakeKube()
    before = _node(fake, unschedulable=unschedulable, taints=taints, annotations=annotations)
    # When we cordon and mark it (a valid Node is stored: the fake checks the schema strictly)
    cordon = cordon_plan(before, "hpr-a", AT)
    cordoned = _apply(fake, cordon.operations)
    assert cordoned["spec"]["unschedulable"] is True and NodeView.of(cordoned).marked_by == "hpr-a"
    assert cordon.outcome == ("already_drained" if unschedulable else "drained")
    # ... and a retry of the same cordon writes nothing
    assert cordon_plan(cordoned, "hpr-a", AT).operations == []
    if human_uncordons:
        cordoned = fake.patch_node(NAME, [{"op": "replace", "path": "/spec/unschedulable", "value": False}])
    # Then giving it back removes our marks, and only our cordon
    back = give_back_plan(cordoned, "hpr-a")
    after = _apply(fake, back.operations)
    assert not set(after["metadata"].get("annotations") or {}) & set(OUR_ANNOTATIONS)
    assert all(t["key"] != QUARANTINE_TAINT_KEY for t in after["spec"].get("taints") or [])
    assert _essence(after)[1:] == _essence(before)[1:]
    assert bool(after["spec"].get("unschedulable")) == (unschedulable and not human_uncordons)
    assert back.outcome == ("not_ours" if unschedulable else "resumed")
    assert back.uncordoned == (not unschedulable and not human_uncordons)


@settings(max_examples=30, deadline=None)
@given(unschedulable=st.booleans(), taints=other_taints, annotations=other_annotations)
def test_another_incidents_marks_are_never_given_back_and_a_stale_mark_keeps_its_origin(
    unschedulable: bool, taints: list[dict[str, Any]], annotations: dict[str, str]
) -> None:
    fake = FakeKube()
    node = _node(fake, unschedulable=unschedulable, taints=taints, annotations=annotations)
    marked = _apply(fake, cordon_plan(node, "hpr-old", AT).operations)
    # Another incident's marks: ours to leave alone
    assert give_back_plan(marked, "hpr-new").operations == []
    assert give_back_plan(marked, "hpr-new").outcome == "not_ours"
    # A stale mark taken over (the lock is ours) keeps what the first incident knew of the cordon
    taken = _apply(fake, cordon_plan(marked, "hpr-new", AT).operations)
    assert taken["metadata"]["annotations"][INCIDENT_ANNOTATION] == "hpr-new"
    assert taken["metadata"]["annotations"][CORDON_PRE_EXISTING_ANNOTATION] == ("true" if unschedulable else "false")
    assert sum(t["key"] == QUARANTINE_TAINT_KEY for t in taken["spec"]["taints"]) == 1
    after = _apply(fake, give_back_plan(taken, "hpr-new").operations)
    assert bool(after["spec"].get("unschedulable")) == unschedulable


def test_a_node_that_changed_since_it_was_read_refuses_the_patch() -> None:
    fake = FakeKube()
    read = _node(fake, unschedulable=False, taints=[], annotations={})
    fake.patch_node(NAME, [{"op": "add", "path": "/metadata/labels/x", "value": "y"}])  # someone else wrote meanwhile
    from hyperpod_recovery.errors import KubeConflict

    with pytest.raises(KubeConflict):
        fake.patch_node(NAME, cordon_plan(read, "hpr-a", AT).operations)
    assert "unschedulable" not in fake.get_node(NAME)["spec"]


def test_a_node_we_never_marked_is_not_drained_or_not_ours() -> None:
    fake = FakeKube()
    assert give_back_plan(_node(fake, unschedulable=False, taints=[], annotations={}), "hpr-a").outcome == "not_drained"
    fake = FakeKube()
    assert give_back_plan(_node(fake, unschedulable=True, taints=[], annotations={}), "hpr-a").outcome == "not_ours"


@pytest.mark.parametrize(
    ("ready", "health", "deep", "verdict"),
    [
        (True, "Schedulable", None, "passed"),
        (True, "Schedulable", "Passed", "passed"),
        (True, "Schedulable", "InProgress", "not_ready"),
        (True, "Schedulable", "Failed", "failed"),
        (True, "Unschedulable", None, "not_ready"),  # deep health checks running
        (True, "UnschedulablePendingReplacement", None, "failed"),
        (True, "UnschedulablePendingReboot", None, "failed"),
        (False, "Schedulable", None, "not_ready"),
        (True, None, None, "not_ready"),  # HyperPod has not labelled it yet
    ],
)
def test_the_health_gate_reads_readiness_and_hyperpods_labels(ready: bool, health: str | None, deep: str | None, verdict: str) -> None:
    node = FakeKube().add_node(NAME, ready=ready, health=health, deep_health=deep)
    got, said = health_gate(node)
    assert got == verdict
    if verdict == "failed":
        assert HEALTH_STATUS_LABEL in said or DEEP_HEALTH_LABEL in said


def test_a_reboot_is_proved_by_a_new_boot_id_only() -> None:
    fake = FakeKube()
    node = _node(fake, unschedulable=False, taints=[], annotations={})
    assert rebooted_since_cordon(node) is None  # nothing of ours to compare with
    _apply(fake, cordon_plan(node, "hpr-a", AT).operations)
    assert rebooted_since_cordon(fake.get_node(NAME)) is False
    fake.hyperpod_goes_not_ready(NAME)
    assert rebooted_since_cordon(fake.get_node(NAME)) is False  # NotReady is no reboot
    fake.hyperpod_reboots(NAME)
    assert rebooted_since_cordon(fake.get_node(NAME)) is True


def test_json_pointers_escape_slashes_and_tildes() -> None:
    assert pointer("metadata", "annotations", "hyperpod-recovery.io/incident") == "/metadata/annotations/hyperpod-recovery.io~1incident"
    assert pointer("a~b") == "/a~0b"


@pytest.mark.parametrize(
    "holder", ["aws-node-termination-handler/scheduled-maintenance", "medik8s.io/drain", "node.kubernetes.io/out-of-service"]
)
def test_a_node_another_party_holds_now_is_not_uncordoned(holder: str) -> None:
    # Given a node we cordoned, which a termination handler or a remediation operator then took too
    fake = FakeKube()
    node = _node(fake, unschedulable=False, taints=[], annotations={})
    marked = _apply(fake, cordon_plan(node, "hpr-a", AT).operations)
    held = fake.patch_node(NAME, [{"op": "add", "path": "/spec/taints/-", "value": {"key": holder, "effect": "NoSchedule"}}])
    # When we give it back: our marks go, the cordon stays theirs
    back = give_back_plan(held, "hpr-a")
    after = _apply(fake, back.operations)
    assert back.outcome == "not_ours" and not back.uncordoned and after["spec"]["unschedulable"] is True
    assert _ours_on_node(after) == [] and marked["spec"]["unschedulable"] is True


def _ours_on_node(node: dict[str, Any]) -> list[str]:
    annotations = node["metadata"].get("annotations") or {}
    return [k for k in OUR_ANNOTATIONS if k in annotations] + [
        t["key"] for t in node["spec"].get("taints", []) if t["key"] == QUARANTINE_TAINT_KEY
    ]
