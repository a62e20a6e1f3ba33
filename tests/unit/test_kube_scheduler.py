"""The sandbox's kube-scheduler (sandbox/kube/controllers.py _schedule, scheduling.py): a pending pod is
bound only to a node that takes it (Ready, uncordoned, its NoSchedule/NoExecute taints tolerated, its
nodeSelector and required affinity met, its GPUs free) and runs POD_START_SECONDS later; a job trains
only once every pod of it runs."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox.kube import HYPERPOD_TAINT_KEY, FakeKube
from sandbox.kube.scheduling import POD_START_SECONDS, gpu_request, placement_fits
from tests.fakes import T0
from tests.unit.eks_stopping import Clock

GROUP_LABEL = "sagemaker.amazonaws.com/instance-group-name"
HYPERPOD_TAINT = {"key": HYPERPOD_TAINT_KEY, "value": "Unschedulable", "effect": "NoSchedule"}


def _fake(clock: Clock, *, scheduler: bool = True) -> FakeKube:
    return FakeKube(now=clock, epoch=T0, scheduler=scheduler)


def _job_pods(fake: FakeKube, name: str) -> list[dict[str, Any]]:
    return [p for (_, n), p in sorted(fake.pods.items()) if n.startswith(f"{name}-worker-")]


def _submit(fake: FakeKube, name: str, replicas: int, *, gpus: int = 8) -> None:
    """A PyTorchJob of ``replicas`` Workers submitted now: its operator makes the pods, nothing binds them yet."""
    fake.add_job("PyTorchJob", "kubeflow", name, nodes=[], replicas=replicas, gpus=gpus)


def test_a_pending_pod_is_bound_to_a_free_node_and_runs_after_the_start_delay_not_before() -> None:
    # Given two free 8-GPU nodes
    clock = Clock(T0)
    fake = _fake(clock)
    fake.add_node("node-a")
    fake.add_node("node-b")
    # When a 2-pod job asking 8 GPUs a pod is submitted
    _submit(fake, "llama", 2)
    # Then each pod is bound to a node of its own at once, and still Pending (its containers starting)
    pods = _job_pods(fake, "llama")
    assert sorted(p["spec"]["nodeName"] for p in pods) == ["node-a", "node-b"]
    assert {p["status"]["phase"] for p in pods} == {"Pending"} and fake.runs() == {}
    # And they run once the start delay has passed, the job training from then
    clock.advance(POD_START_SECONDS)
    fake.tick()
    assert {p["status"]["phase"] for p in _job_pods(fake, "llama")} == {"Running"}
    (spans,) = fake.runs().values()
    assert spans == [[float(POD_START_SECONDS), None]]


def test_a_pod_is_never_bound_to_a_cordoned_not_ready_or_tainted_node_nor_one_whose_gpus_are_taken() -> None:
    # Given four nodes that cannot take a training pod, and one that can
    clock = Clock(T0)
    fake = _fake(clock)
    fake.add_node("a-cordoned", unschedulable=True)
    fake.add_node("b-not-ready", ready=False)
    fake.add_node("c-pending-replacement", health="UnschedulablePendingReplacement")
    fake.add_node("d-busy")
    fake.add_job("PyTorchJob", "kubeflow", "other", nodes=["d-busy"])  # (its pod holds d's 8 GPUs)
    fake.add_node("e-free")
    # When a 2-pod job is submitted
    _submit(fake, "llama", 2)
    # Then one pod goes to the free node and the other waits, on no node
    placed = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in _job_pods(fake, "llama")}
    assert placed == {"llama-worker-0": "e-free", "llama-worker-1": None}
    # And the job does not train while a pod of it waits
    clock.advance(60)
    fake.tick()
    assert fake.runs().get(fake.jobs[("PyTorchJob", "kubeflow", "llama")]["metadata"]["uid"]) is None


def test_the_waiting_pod_is_bound_when_a_node_is_uncordoned_and_the_job_trains_from_its_start() -> None:
    # Given a 2-pod job with one pod waiting: its other node cordoned
    clock = Clock(T0)
    fake = _fake(clock)
    fake.add_node("node-a")
    fake.add_node("node-b", unschedulable=True)
    _submit(fake, "llama", 2)
    # When the node is uncordoned 100 s later
    clock.advance(100)
    fake.patch_node("node-b", [{"op": "remove", "path": "/spec/unschedulable"}])
    clock.advance(30)
    fake.tick()
    # Then the waiting pod is bound there then, and the job trains from when it started (105 s), not when looked at
    assert {p["spec"]["nodeName"] for p in _job_pods(fake, "llama")} == {"node-a", "node-b"}
    (spans,) = fake.runs().values()
    assert spans == [[100.0 + POD_START_SECONDS, None]]


def test_a_taint_the_pod_tolerates_and_its_node_selector_and_affinity_decide_where_it_goes() -> None:
    # Given a pod that tolerates HyperPod's taint, selects Schedulable health, and requires instance group "gpu"
    pod: dict[str, Any] = {
        "metadata": {"name": "p"},
        "spec": {
            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "8"}}}],
            "tolerations": [{"key": HYPERPOD_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}],
            "nodeSelector": {"sagemaker.amazonaws.com/node-health-status": "Schedulable"},
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [{"key": GROUP_LABEL, "operator": "In", "values": ["gpu"]}]}]
                    }
                }
            },
        },
    }
    fake = _fake(Clock(T0))
    tainted = fake.add_node("tainted", group="gpu")
    tainted = {**tainted, "spec": {**tainted["spec"], "taints": [HYPERPOD_TAINT]}}
    other_group = fake.add_node("cpu-node", group="cpu")
    # Then its GPU request is read from the limit, the tolerated taint does not keep it off, the other group does
    assert gpu_request(pod) == 8
    assert placement_fits(pod, tainted) and not placement_fits(pod, other_group)
    # And without the toleration the taint keeps it off
    assert not placement_fits({**pod, "spec": {**pod["spec"], "tolerations": []}}, tainted)


def test_with_the_scheduler_stuck_the_operators_pods_stay_pending_on_no_node() -> None:
    # Given a cluster whose scheduler binds nothing, and a free node
    clock = Clock(T0)
    fake = _fake(clock, scheduler=False)
    fake.add_node("node-a")
    # When a job is submitted and time passes
    _submit(fake, "llama", 1)
    clock.advance(600)
    fake.tick()
    # Then its pod waits, on no node, and the job never trains
    assert [(p["spec"].get("nodeName"), p["status"]["phase"]) for p in _job_pods(fake, "llama")] == [(None, "Pending")]
    assert fake.runs() == {}


node_states = st.fixed_dictionaries(
    {
        "ready": st.booleans(),
        "unschedulable": st.booleans(),
        "health": st.sampled_from(["Schedulable", "UnschedulablePendingReplacement", "UnschedulablePendingReboot"]),
        "gpus": st.sampled_from([0, 4, 8]),
    }
)


@settings(max_examples=40, deadline=None)
@given(nodes=st.lists(node_states, min_size=1, max_size=6), replicas=st.integers(1, 6), gpus=st.sampled_from([0, 4, 8]))
def test_every_binding_is_to_a_node_that_takes_the_pod_within_its_gpus_and_a_pod_waits_only_when_none_can(
    nodes: list[dict[str, Any]], replicas: int, gpus: int
) -> None:
    # Given any mix of Ready or not, cordoned or not, HyperPod-tainted or not nodes of 0, 4 or 8 GPUs
    fake = _fake(Clock(T0))
    for index, state in enumerate(nodes):
        fake.add_node(f"node-{index}", **state)
    # When a job of any size asking any GPUs a pod is submitted
    _submit(fake, "llama", replicas, gpus=gpus)
    pods = _job_pods(fake, "llama")
    # Then every pod bound is on a node that takes it (by what the node was made as: Ready, uncordoned, no
    # HyperPod taint), and no node's GPUs are over-committed
    takes = {f"node-{i}": s["ready"] and not s["unschedulable"] and s["health"] == "Schedulable" for i, s in enumerate(nodes)}
    free = {f"node-{i}": s["gpus"] for i, s in enumerate(nodes)}
    for pod in pods:
        if (name := pod["spec"].get("nodeName")) is not None:
            assert takes[name], name
            free[name] -= gpus
    assert all(left >= 0 for left in free.values()), free
    # And a pod waits only when no node could take it
    if any(pod["spec"].get("nodeName") is None for pod in pods):
        assert not any(takes[name] and free[name] >= gpus for name in free), free
