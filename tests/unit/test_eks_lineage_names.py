"""Every copy of a job is named for the size it is made at (domain/jobs/eks_jobs.py recreated_name): over a
whole lineage (shrunk, grown back, re-created, again and again) every name the copy and its operator
derive from it (the job, each pod and headless Service ``<name>-<replica type>-<index>``, each label
value) is at most 63 characters; a copy no name fits is refused before anything is stopped."""

from __future__ import annotations

import copy
import re
import uuid
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_recovery.adapters.eks_orchestrator import EksOrchestrator
from hyperpod_recovery.domain.jobs.eks_jobs import (
    _MIN_STEM,
    STOPPED_FOR_ANNOTATION,
    derived_suffix_room,
    recreated_job,
    recreated_name,
)
from hyperpod_recovery.errors import JobSpecUnavailable
from hyperpod_recovery.models.commands import CheckpointRef, CordonNodes, ResubmitJob
from hyperpod_recovery.models.kubernetes import DNS1123_LABEL_MAX, OPT_IN_ANNOTATION, KubeJobRef
from sandbox.kube import DNS1035_LABEL, FakeKube
from sandbox.kube.scheduling import POD_START_SECONDS
from tests.fakes import T0
from tests.unit.eks_stopping import Clock, until_stopped

CHECKPOINT = CheckpointRef(uri="s3://ckpt-bucket/llama/step-000003000/", step=3000)
LATER = CheckpointRef(uri="s3://ckpt-bucket/llama/step-000003100/", step=3100)
_LABEL = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
# Any DNS-1123 name of at most 63, and long ones more often (a name near the bound is where a digit more matters).
lineage_names = st.one_of(
    st.from_regex(rf"\A{_LABEL}(?:\.{_LABEL})*\Z", fullmatch=True).filter(lambda n: len(n) <= 63),
    st.from_regex(r"\A[a-z][-a-z0-9.]{43,61}[a-z0-9]\Z", fullmatch=True).filter(
        lambda n: ".." not in n and "-." not in n and ".-" not in n
    ),
)
# Any size, and sizes a shrink of a few takes below a power of ten more often (its pods' indexes a digit shorter).
worker_counts = st.one_of(st.integers(2, 1200), st.sampled_from([10, 11, 12, 13, 100, 101, 102, 1000, 1001, 1003]))


def _job(name: str, workers: int, master: bool, extra: tuple[str, int] | None) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "pytorch", "image": "train:1"}]}}
    replicas: dict[str, Any] = {"Worker": {"replicas": workers, "template": copy.deepcopy(template)}}
    if master:
        replicas["Master"] = {"replicas": 1, "template": copy.deepcopy(template)}
    if extra is not None:
        replicas[extra[0]] = {"replicas": extra[1], "template": copy.deepcopy(template)}
    metadata = {"name": name, "namespace": "kubeflow", "uid": str(uuid.uuid4()), "labels": {"team": "a"}}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": metadata, "spec": {"pytorchReplicaSpecs": replicas}}


def _derived(job: dict[str, Any]) -> list[str]:
    """What its operator names after it: each pod and its Service, <name>-<replica type>-<index>."""
    name = job["metadata"]["name"]
    return [
        f"{name}-{kind.lower()}-{index}"
        for kind, replica in job["spec"]["pytorchReplicaSpecs"].items()
        for index in range(max(int(replica.get("replicas") or 1), 1))
    ]


steps = st.lists(st.one_of(st.tuples(st.just("shrink"), st.integers(1, 8)), st.just(("grow", 0)), st.just(("again", 0))), max_size=8)


@settings(max_examples=300, deadline=None)
@given(
    name=lineage_names,
    workers=worker_counts,
    master=st.booleans(),
    extra=st.one_of(st.none(), st.tuples(st.from_regex(r"\A[A-Z][a-zA-Z]{0,54}\Z", fullmatch=True), st.integers(1, 3))),
    operations=steps,
)
def test_every_name_a_lineage_derives_fits_at_the_size_each_copy_is_made_at(
    name: str, workers: int, master: bool, extra: tuple[str, int] | None, operations: list[tuple[str, int]]
) -> None:
    # Given a job and a lineage of copies made from it: shrunk, grown back to full size, re-created at its size
    job = _job(name, workers, master, extra)
    full = workers + (1 if master else 0) + (extra[1] if extra else 0)
    fixed = full - workers
    size = full
    for generation, (operation, lost) in enumerate(operations, start=1):
        nodes = {"shrink": max(size - lost, fixed + 1), "grow": full, "again": None}[operation]
        # When each copy is named for the size it is made at
        made = recreated_name(job, "PyTorchJob", nodes)
        if made is None:
            # Then a refusal means no name could fit: the stem's room is below its shortest form
            room = DNS1123_LABEL_MAX - derived_suffix_room(job, "PyTorchJob", nodes) - len(f"-r{generation}")
            assert room < _MIN_STEM
            return
        body = recreated_job(
            job, "PyTorchJob", name=made, resume_from=CHECKPOINT.uri, step=3000, incident="hpr-a", token="5" * 32, nodes=nodes
        )
        # Then the copy's name, every pod and Service name derived from it, and every label value fit
        assert len(made) <= DNS1123_LABEL_MAX and re.fullmatch(_LABEL, made)
        for derived in _derived(body):
            assert len(derived) <= DNS1123_LABEL_MAX and DNS1035_LABEL.match(derived), derived
        assert all(len(value) <= DNS1123_LABEL_MAX for value in body["metadata"]["labels"].values())
        # (and the copy is made at the size it was named for)
        size = nodes if nodes is not None else size
        assert sum(max(int(r.get("replicas") or 1), 1) for r in body["spec"]["pytorchReplicaSpecs"].values()) == size
        job = body | {"metadata": {**body["metadata"], "uid": str(uuid.uuid4())}}


# --- the grow-back of a long lineage (the case) ----------------------------------------------------
LONG = "pretrain-llama-3-70b-multilingual-code-and-math-v2-x"  # 52 characters
assert len(LONG) == 52


def _node(i: int) -> str:
    return f"hyperpod-i-0123456789abcd{i:03x}"


def _cluster(clock: Clock, workers: int = 12) -> tuple[FakeKube, EksOrchestrator]:
    fake = FakeKube(now=clock, epoch=T0, scheduler=True)
    for i in range(workers):
        fake.add_hyperpod_node(f"i-0123456789abcd{i:03x}")
    fake.add_job(
        "PyTorchJob",
        "kubeflow",
        LONG,
        nodes=[_node(i) for i in range(workers)],
        annotations={OPT_IN_ANNOTATION: "true"},
        elastic_policy={"minReplicas": 10, "maxReplicas": workers},
    )
    return fake, EksOrchestrator(fake, tasks=None, now=clock)  # type: ignore[arg-type]


def _uid(fake: FakeKube, name: str) -> str:
    return str(fake.jobs[("PyTorchJob", "kubeflow", name)]["metadata"]["uid"])


def _shrink_to_ten(fake: FakeKube, orchestrator: EksOrchestrator, clock: Clock) -> dict[str, Any]:
    """Nodes 3 and 7 cordoned (the incident's), the job re-created on the 10 others."""
    orchestrator.execute(CordonNodes(nodes=[_node(3), _node(7)], reason="hyperpod-recovery:hpr-a"), "hpr-a")
    ref = KubeJobRef(kind="PyTorchJob", namespace="kubeflow", name=LONG)
    command = ResubmitJob(job_id=_uid(fake, LONG), checkpoint=CHECKPOINT, kube=ref, recreation_token="5" * 32, nodes=10, data_parallel=10)
    until_stopped(lambda: orchestrator.execute(command, "hpr-a"), clock)
    (shrunk,) = [j for (_, _, n), j in fake.jobs.items() if n != LONG]
    return shrunk


def _grow(fake: FakeKube, orchestrator: EksOrchestrator, shrunk: dict[str, Any]) -> ResubmitJob:
    ref = KubeJobRef(kind="PyTorchJob", namespace="kubeflow", name=LONG)
    return ResubmitJob(
        job_id=shrunk["metadata"]["uid"],
        checkpoint=LATER,
        kube=ref,
        recreation_token="6" * 32,
        copy_token="5" * 32,
        nodes=12,
        data_parallel=12,
        require_free_nodes=12,
    )


def _free(fake: FakeKube, *nodes: str) -> None:
    """The nodes back in service (Resume Nodes gave them back): uncordoned, our marks gone."""
    remove = [{"op": "remove", "path": p} for p in ("/spec/unschedulable", "/spec/taints", "/metadata/annotations")]
    for node in nodes:
        fake.patch_node(node, remove)


def test_a_long_lineage_grown_back_from_ten_to_twelve_workers_is_named_for_twelve_and_its_pods_are_made() -> None:
    # Given a 52-character lineage of 12 Workers shrunk to 10 (its copy named for 10: "-worker-9"), its two nodes back
    clock = Clock(T0)
    fake, orchestrator = _cluster(clock)
    shrunk = _shrink_to_ten(fake, orchestrator, clock)
    _free(fake, _node(3), _node(7))
    # When it grows back to 12 (the pods "-worker-10" and "-worker-11" one character longer)
    result, _ = until_stopped(lambda: orchestrator.execute(_grow(fake, orchestrator, shrunk), "hpr-a"), clock)
    clock.advance(POD_START_SECONDS)  # (the pods the scheduler bound start)
    fake.tick()
    # Then the full-size copy's name leaves room for them: the operator made every pod and Service, all 12 run
    grown = fake.jobs[("PyTorchJob", "kubeflow", result.new_job_name.split("/", 1)[1])]
    assert fake.operator_errors == [] and all(len(n) <= DNS1123_LABEL_MAX for n in _derived(grown))
    pods = [p for p in fake.pods.values() if p["metadata"]["ownerReferences"][0]["uid"] == result.new_job_id]
    assert len(pods) == 12 and {p["status"]["phase"] for p in pods} == {"Running"} and fake.second_copies() == []


def test_a_grow_back_no_name_fits_is_refused_before_the_shrunk_copy_is_marked_or_stopped() -> None:
    # Given the shrunk copy running, and (a tenant's edit) a replica type so long that no copy's name leaves room for its pods
    clock = Clock(T0)
    fake, orchestrator = _cluster(clock)
    shrunk = _shrink_to_ten(fake, orchestrator, clock)
    _free(fake, _node(3), _node(7))
    copy_ref = KubeJobRef(kind="PyTorchJob", namespace="kubeflow", name=shrunk["metadata"]["name"])
    long_type = "Coordinator" + "x" * 44
    template = shrunk["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]
    added = {"replicas": 1, "template": template}
    fake.patch_job(copy_ref, [{"op": "add", "path": f"/spec/pytorchReplicaSpecs/{long_type}", "value": added}])
    fake.calls.clear()
    # When its grow-back comes, then it is refused, saying why
    try:
        orchestrator.execute(_grow(fake, orchestrator, shrunk), "hpr-a")
        raise AssertionError("a grow-back no name fits was not refused")
    except JobSpecUnavailable as refused:
        assert "no name leaves room at 12 node(s)" in str(refused) and "nothing stopped" in str(refused)
    # And the shrunk copy was neither marked nor stopped: it runs on, the only copy
    running = fake.jobs[("PyTorchJob", "kubeflow", copy_ref.name)]
    assert STOPPED_FOR_ANNOTATION not in running["metadata"].get("annotations", {})
    assert not running["spec"].get("runPolicy", {}).get("suspend")
    assert not [c for c in fake.calls if c[0] in ("patch", "create")] and fake._live(running)
