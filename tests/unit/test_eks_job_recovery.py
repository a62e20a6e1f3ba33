"""JobRecovery on EKS: the poller that finds failed jobs (EKS sends no event for them), and the
orchestrator's answers to Capture Job Spec and Check Job Nodes."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from hyperpod_recovery.adapters.eks_orchestrator import EksOrchestrator
from hyperpod_recovery.adapters.eks_training_jobs import EksTrainingJobs
from hyperpod_recovery.domain.intake.normalize import GuardedCluster
from hyperpod_recovery.domain.jobs.eks_jobs import job_spec_of
from hyperpod_recovery.domain.jobs.job_failure import faulty_nodes
from hyperpod_recovery.errors import StartExecutionFailed
from hyperpod_recovery.models.cluster import ClusterNode
from hyperpod_recovery.models.commands import CaptureJobSpec, CordonNodes, NodeStates, plainly_healthy
from hyperpod_recovery.models.kubernetes import AUTO_RESUME_ANNOTATION, OPT_IN_ANNOTATION, KubeJobRef
from hyperpod_recovery.models.requests import JobRecoveryRequest
from hyperpod_recovery.steps.find_failed_jobs import find_failed_jobs
from hyperpod_recovery.steps.import_hyperpod_hangs import Teller
from sandbox.kube import FakeKube
from tests.fakes import FakeLedger, FakeNotifier, FakeWorkflows

AT = datetime(2026, 3, 14, 9, 0, tzinfo=UTC)
A, B = "hyperpod-i-0123456789abcdef0", "hyperpod-i-0123456789abcdef1"
GUARDED = GuardedCluster(name="llm-train", arn="arn:aws:sagemaker:us-west-2:123456789012:cluster/a1b2c3d4e5f6", orchestrator="eks")


def _cluster(**job: object) -> FakeKube:
    fake = FakeKube(now=lambda: AT)
    fake.add_hyperpod_node("i-0123456789abcdef0")
    fake.add_hyperpod_node("i-0123456789abcdef1")
    fake.add_job("PyTorchJob", "kubeflow", "llama", nodes=[A, B], **job)  # type: ignore[arg-type]
    return fake


def _poll(
    fake: FakeKube,
    workflows: FakeWorkflows | None = None,
    at: datetime = AT,
    ledger: FakeLedger | None = None,
    remaining_ms: Callable[[], int] = lambda: 30_000,
) -> tuple[dict[str, int], FakeWorkflows]:
    workflows = workflows or FakeWorkflows()
    counts = find_failed_jobs(
        jobs=EksTrainingJobs(fake),
        workflows=workflows,
        ledger=ledger or FakeLedger(),
        guarded=GUARDED,
        teller=Teller(FakeNotifier()),
        max_age_seconds=3600,
        max_skew_seconds=300,
        now=at,
        remaining_ms=remaining_ms,
    )
    return counts, workflows


def test_a_failed_opted_in_job_starts_one_job_recovery_however_often_it_is_polled() -> None:
    # Given an opted-in job that failed, and a poller ticking three times
    fake = _cluster(annotations={OPT_IN_ANNOTATION: "true", "hyperpod-recovery.io/checkpoint": "s3://ckpt/llama/"})
    fake.job_fails("PyTorchJob", "kubeflow", "llama")
    workflows = FakeWorkflows()
    counts = [_poll(fake, workflows)[0] for _ in range(3)]
    # Then one execution, named by the job's uid and failure time, carrying where it ran
    assert counts == [{"started": 1}, {"already_started": 1}, {"already_started": 1}]
    ((name, payload),) = workflows.started.items()
    uid = fake.jobs[("PyTorchJob", "kubeflow", "llama")]["metadata"]["uid"]
    assert name == f"hpj-{uid}-{int(AT.timestamp())}" and workflows.workflow_of[name] == "job"
    request = JobRecoveryRequest.model_validate(json.loads(payload))
    assert request.failure is not None and (request.job_id, request.source, sorted(request.failure.nodes)) == (uid, "job_failed", [A, B])
    assert request.failure.checkpoint_uri == "s3://ckpt/llama/" and request.failure.name == "kubeflow/llama"


@pytest.mark.parametrize(
    ("kind_annotations", "started"),
    [
        ({}, False),  # nobody asked us: its owner's
        ({OPT_IN_ANNOTATION: "true"}, True),
        ({AUTO_RESUME_ANNOTATION: "true"}, True),  # HyperPod's auto-resume gave up: a human hears of it
    ],
)
def test_which_failed_jobs_are_ours_to_look_at(kind_annotations: dict[str, str], started: bool) -> None:
    fake = _cluster(annotations=kind_annotations)
    fake.job_fails("PyTorchJob", "kubeflow", "llama")
    assert bool(_poll(fake)[1].started) is started


def test_a_running_job_and_a_failure_older_than_the_event_age_start_nothing() -> None:
    fake = _cluster(annotations={OPT_IN_ANNOTATION: "true"})
    assert _poll(fake)[1].started == {}
    fake.job_fails("PyTorchJob", "kubeflow", "llama")
    counts, workflows = _poll(fake, at=AT + timedelta(hours=2))
    assert counts == {"stale": 1} and workflows.started == {}


def test_a_start_that_fails_is_counted_and_tried_again_at_the_next_poll() -> None:
    fake = _cluster(annotations={OPT_IN_ANNOTATION: "true"})
    fake.job_fails("PyTorchJob", "kubeflow", "llama")
    workflows = FakeWorkflows(fail_with=StartExecutionFailed("throttled"))
    assert _poll(fake, workflows)[0] == {"start_failed": 1}
    workflows.fail_with = None
    assert _poll(fake, workflows)[0] == {"started": 1}


def test_a_job_that_failed_past_its_restarter_is_nobodys_to_restart_and_ours_only_if_it_opted_in() -> None:
    fake = _cluster(annotations={OPT_IN_ANNOTATION: "true"}, restart_policy="OnFailure")
    ref = KubeJobRef(kind="PyTorchJob", namespace="kubeflow", name="llama")
    assert job_spec_of(fake.jobs[("PyTorchJob", "kubeflow", "llama")], ref).restarted_by == "kubeflow"  # type: ignore[union-attr]
    fake.job_fails("PyTorchJob", "kubeflow", "llama")
    failed = job_spec_of(fake.jobs[("PyTorchJob", "kubeflow", "llama")], ref)
    assert failed is not None and (failed.restarted_by, failed.auto_resume, failed.unresumable, failed.state) == (
        None,
        False,
        None,
        "Failed",
    )
    hp = FakeKube(now=lambda: AT)
    hp.add_hyperpod_node("i-0123456789abcdef0")
    hp.add_job("HyperPodPyTorchJob", "team-a", "hp", nodes=[A])
    hp.job_fails("HyperPodPyTorchJob", "team-a", "hp")
    spec = job_spec_of(
        hp.jobs[("HyperPodPyTorchJob", "team-a", "hp")], KubeJobRef(kind="HyperPodPyTorchJob", namespace="team-a", name="hp")
    )
    assert spec is not None and "never re-created by us" in (spec.unresumable or "")


def test_capture_finds_the_job_by_its_uid_with_the_nodes_its_pods_ran_on() -> None:
    fake = _cluster(annotations={OPT_IN_ANNOTATION: "true"})
    uid = fake.jobs[("PyTorchJob", "kubeflow", "llama")]["metadata"]["uid"]
    orchestrator = EksOrchestrator(fake, None, lambda: AT)  # type: ignore[arg-type]
    job = orchestrator.execute(CaptureJobSpec(job_id=uid)).job
    assert job is not None and job.kube == KubeJobRef(kind="PyTorchJob", namespace="kubeflow", name="llama") and job.nodes == [A, B]
    assert orchestrator.execute(CaptureJobSpec(job_id="00000000-0000-0000-0000-00000000beef")).job is None


def test_node_states_read_as_the_job_failure_classifier_reads_slurms() -> None:
    # Given a healthy node, one HyperPod marked for replacement, one we cordoned, one someone else did, one not Ready, one gone
    fake = _cluster()
    for n in range(2, 6):
        fake.add_hyperpod_node(f"i-012345678{n}abcdef{n}")
    names = [f"hyperpod-i-012345678{n}abcdef{n}" for n in range(2, 6)]
    orchestrator = EksOrchestrator(fake, None, lambda: AT)  # type: ignore[arg-type]
    fake.hyperpod_marks_unhealthy(names[0])
    orchestrator.cordon(CordonNodes(nodes=[names[1]], reason="hyperpod-recovery:hpr-a"), with_jobs=False)
    fake.patch_node(names[2], [{"op": "add", "path": "/spec/unschedulable", "value": True}])
    fake.hyperpod_goes_not_ready(names[3])
    gone = "hyperpod-i-0aaaaaaaaaaaaaaaa"
    states = orchestrator.execute(NodeStates(nodes=[A, *names, gone])).nodes
    cluster = [ClusterNode(node_id=name.removeprefix("hyperpod-"), instance_group="workers", status="Running") for name in [A, *names]]
    # Then the classifier finds the faults, ours to repair or not, exactly as on Slurm
    found = {f.slurm_node: f.ours_to_repair for f in faulty_nodes([A, *names, gone], states, cluster, "eks")}
    assert found == {names[0]: True, names[1]: True, names[2]: False, names[3]: True, gone: True}
    assert next(f for f in faulty_nodes([names[0]], states, cluster, "eks")).node_id == names[0].removeprefix("hyperpod-")


def test_a_node_a_jobs_pod_runs_on_is_allocated_and_only_one_no_workload_pod_runs_on_is_idle() -> None:
    # Given the job's two nodes, and a third that runs only a DaemonSet's pod (HyperPod's health agent)
    fake = _cluster()
    fake.add_hyperpod_node("i-0123456789abcdef2")
    free = "hyperpod-i-0123456789abcdef2"
    fake.add_pod("aws-hyperpod", "health-monitoring-agent-x7k2p", free)
    agent = fake.pods[("aws-hyperpod", "health-monitoring-agent-x7k2p")]
    agent["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "hma", "uid": "d5", "controller": True}]
    # When Check Job Nodes reads their states
    states = EksOrchestrator(fake, None, lambda: AT).execute(NodeStates(nodes=[A, B, free])).nodes  # type: ignore[arg-type]
    # Then the job's own nodes are allocated, never idle; the one with no workload's pod is idle; all plainly healthy
    assert [(s.name, s.state) for s in states] == [(A, "allocated"), (B, "allocated"), (free, "idle")]
    assert all(plainly_healthy(s.state, s.flags, s.reason) for s in states)


def test_a_kind_whose_crd_is_not_installed_lists_nothing_and_the_other_kind_is_still_polled() -> None:
    # Given a cluster without the HyperPod training operator (no HyperPodPyTorchJob CRD)
    fake = FakeKube(now=lambda: AT, kinds=("PyTorchJob",))
    fake.add_hyperpod_node("i-0123456789abcdef0")
    fake.add_job("PyTorchJob", "kubeflow", "llama", nodes=[A], annotations={OPT_IN_ANNOTATION: "true"})
    fake.job_fails("PyTorchJob", "kubeflow", "llama")
    # Then the failed PyTorchJob starts its recovery all the same
    assert _poll(fake)[0] == {"started": 1}


def test_a_stale_failure_is_never_read_further() -> None:
    fake = _cluster(annotations={OPT_IN_ANNOTATION: "true"})
    fake.job_fails("PyTorchJob", "kubeflow", "llama")
    fake.calls.clear()
    assert _poll(fake, at=AT + timedelta(hours=2))[0] == {"stale": 1}
    assert ("list", "pods") not in fake.calls  # no pod list for a failure it will not start


def test_the_failed_jobs_nodes_are_its_own_pods_not_another_kinds_of_the_same_name() -> None:
    # Given a failed PyTorchJob "llama", and a TFJob's pod labelled with the same job name on node B
    fake = FakeKube(now=lambda: AT)
    fake.add_hyperpod_node("i-0123456789abcdef0")
    fake.add_hyperpod_node("i-0123456789abcdef1")
    fake.add_job("PyTorchJob", "kubeflow", "llama", nodes=[A], annotations={OPT_IN_ANNOTATION: "true"})
    fake.add_pod("kubeflow", "tf-llama-0", B, labels={"training.kubeflow.org/job-name": "llama"})
    fake.pods[("kubeflow", "tf-llama-0")]["metadata"]["ownerReferences"] = [
        {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "name": "llama", "uid": "u", "controller": True}
    ]
    fake.job_fails("PyTorchJob", "kubeflow", "llama")
    _, workflows = _poll(fake)
    (payload,) = workflows.started.values()
    assert JobRecoveryRequest.model_validate(json.loads(payload)).failure.nodes == [A]  # type: ignore[union-attr]


def test_a_job_asking_for_auto_resume_and_our_recovery_is_never_re_created_once_failed() -> None:
    fake = _cluster(annotations={OPT_IN_ANNOTATION: "true", AUTO_RESUME_ANNOTATION: "true"})
    ref = KubeJobRef(kind="PyTorchJob", namespace="kubeflow", name="llama")
    assert job_spec_of(fake.jobs[("PyTorchJob", "kubeflow", "llama")], ref).restarted_by == "hyperpod_auto_resume"  # type: ignore[union-attr]
    fake.job_fails("PyTorchJob", "kubeflow", "llama")
    failed = job_spec_of(fake.jobs[("PyTorchJob", "kubeflow", "llama")], ref)
    assert failed is not None and "both" in (failed.unresumable or "")


def test_a_node_recovery_never_takes_a_job_that_already_failed_nor_a_pod_of_an_earlier_object() -> None:
    # Given a failed job with its failed pods still on node A, and a job deleted and applied again under
    # its name while the old object's pod remains on node B
    fake = _cluster(annotations={OPT_IN_ANNOTATION: "true"})
    fake.job_fails("PyTorchJob", "kubeflow", "llama")
    fake.add_job("PyTorchJob", "team", "again", nodes=[B], annotations={OPT_IN_ANNOTATION: "true"})
    old_pod = fake.pods[("team", "again-worker-0")]
    del fake.jobs[("PyTorchJob", "team", "again")]
    fake.add_job("PyTorchJob", "team", "again", nodes=[], annotations={OPT_IN_ANNOTATION: "true"})
    assert old_pod["metadata"]["ownerReferences"][0]["uid"] != fake.jobs[("PyTorchJob", "team", "again")]["metadata"]["uid"]
    # Then a node recovery of A and B finds no job to restart: the failed one is JobRecovery's, the other is not on B
    result = EksOrchestrator(fake, None, lambda: AT).cordon(CordonNodes(nodes=[A, B], reason="hyperpod-recovery:hpr-a"))  # type: ignore[arg-type]
    assert result.jobs == []


def test_a_job_failed_on_nodes_named_otherwise_names_them_as_the_workflow_knows_them_and_their_repair_is_found() -> None:
    # Given a cluster whose nodes are named ip-... (found by the instance in their providerID), a job on
    # two of them, and HyperPod marking one for replacement as the job fails
    fake = FakeKube(now=lambda: AT)
    for n, instance in ((1, "i-0123456789abcdef0"), (2, "i-0123456789abcdef1")):
        fake.add_node(f"ip-10-1-0-{n}.us-west-2.compute.internal", instance_id=instance)
    nodes = ["ip-10-1-0-1.us-west-2.compute.internal", "ip-10-1-0-2.us-west-2.compute.internal"]
    fake.add_job("PyTorchJob", "kubeflow", "llama", nodes=nodes, annotations={OPT_IN_ANNOTATION: "true"})
    fake.hyperpod_marks_unhealthy(nodes[1])
    fake.job_fails("PyTorchJob", "kubeflow", "llama")
    # When the poller finds the failure
    (payload,) = _poll(fake)[1].started.values()
    failure = JobRecoveryRequest.model_validate(json.loads(payload)).failure
    # Then the job's nodes are named hyperpod-<instance>, as ListClusterNodes' instances map to them
    assert failure is not None and failure.nodes == [A, B]
    # And Check Job Nodes and the classifier find the node HyperPod marked, with its instance: ours to repair
    states = EksOrchestrator(fake, None, lambda: AT).execute(NodeStates(nodes=failure.nodes)).nodes  # type: ignore[arg-type]
    cluster = [ClusterNode(node_id=name.removeprefix("hyperpod-"), instance_group="workers", status="Running") for name in (A, B)]
    (found,) = faulty_nodes(failure.nodes, states, cluster, "eks")
    assert (found.slurm_node, found.node_id, found.ours_to_repair) == (B, "i-0123456789abcdef1", True)


# --- the poller at scale ---------------------------------------------------------------------------
CALL_MS = 90  # what each call costs the poll's time in these tests (a pod list, a start, a note: ~3 per failure)


def _storm(count: int) -> FakeKube:
    """``count`` opted-in jobs failed one second apart (a shared file system failing under them)."""
    fake = FakeKube(now=lambda: AT)
    fake.add_hyperpod_node("i-0123456789abcdef0")
    for n in range(count):
        fake.now = lambda n=n: AT + timedelta(seconds=n)  # type: ignore[misc]
        fake.add_job("PyTorchJob", "kubeflow", f"job-{n:03d}", nodes=[A], annotations={OPT_IN_ANNOTATION: "true"})
        fake.job_fails("PyTorchJob", "kubeflow", f"job-{n:03d}")
    return fake


def test_a_storm_of_failures_is_started_over_several_ticks_each_once_oldest_first_never_past_the_functions_time() -> None:
    # Given 500 opted-in jobs failed at once, and a poll whose every call costs it 90 ms of its 30 s
    fake, ledger, workflows = _storm(500), FakeLedger(), FakeWorkflows()
    ticks: list[tuple[dict[str, int], int]] = []
    while len(workflows.started) < 500 and len(ticks) < 10:
        fake.calls.clear()
        made_before = len(workflows.started)

        def remaining(made_before: int = made_before) -> int:
            return 30_000 - CALL_MS * (len(fake.calls) + 2 * (len(workflows.started) - made_before))

        counts, _ = _poll(fake, workflows, at=AT + timedelta(minutes=10 + len(ticks)), ledger=ledger, remaining_ms=remaining)
        ticks.append((counts, remaining()))
    # Then each tick stops with time to spare, leaves the rest for the next, which goes on where it stopped
    assert all(left >= 0 for _, left in ticks) and len(ticks) >= 2
    assert ticks[0][0]["deferred"] == 500 - ticks[0][0]["started"] and ticks[1][0]["already_started"] == ticks[0][0]["started"]
    # And every failure is started once, the oldest first
    assert sum(c.get("started", 0) for c, _ in ticks) == 500 and len(workflows.started) == 500
    first = ticks[0][0]["started"]
    oldest = [fake.jobs[("PyTorchJob", "kubeflow", f"job-{n:03d}")]["metadata"]["uid"] for n in range(first)]
    assert [name.removeprefix("hpj-").rsplit("-", 1)[0] for name in list(workflows.started)[:first]] == oldest
    # And a failure started once costs no Kubernetes call at the next tick (remembered, not asked again)
    fake.calls.clear()
    counts, _ = _poll(fake, workflows, at=AT + timedelta(minutes=30), ledger=ledger)
    assert counts == {"already_started": 500} and set(fake.calls) == {("list", "pytorchjobs"), ("list", "hyperpodpytorchjobs")}


@pytest.mark.parametrize(
    "stamp", ["2026-03-14T09:00:00", "yesterday", "", None, 1773478800], ids=["zone-less", "garbage", "empty", "none", "a number"]
)
def test_a_job_whose_failure_time_cannot_be_read_is_that_jobs_problem_never_the_polls(stamp: object) -> None:
    # Given two opted-in failed jobs, one with a Failed condition whose time cannot be read
    fake = _storm(2)
    fake.jobs[("PyTorchJob", "kubeflow", "job-000")]["status"]["conditions"][-1]["lastTransitionTime"] = stamp
    # When the poller polls, then that job is counted unreadable (and logged), and the other is started
    counts, workflows = _poll(fake, at=AT + timedelta(minutes=1))
    assert counts == {"invalid": 1, "started": 1} and len(workflows.started) == 1


def test_a_job_nobody_asked_us_about_is_never_read_further_whatever_its_failure_time() -> None:
    fake = _storm(1)
    job = fake.jobs[("PyTorchJob", "kubeflow", "job-000")]
    del job["metadata"]["annotations"][OPT_IN_ANNOTATION]
    job["status"]["conditions"][-1]["lastTransitionTime"] = "garbage"
    assert _poll(fake)[0] == {}


def test_a_poll_whose_memory_cannot_be_read_still_starts_each_failure_once_by_its_name() -> None:
    from hyperpod_recovery.errors import LedgerUnavailable

    class Forgetful(FakeLedger):
        def failures_started(self, cluster: str, now: datetime) -> set[str]:
            raise LedgerUnavailable("ProvisionedThroughputExceededException")

    fake, workflows = _storm(2), FakeWorkflows()
    assert _poll(fake, workflows, at=AT + timedelta(minutes=1), ledger=Forgetful())[0] == {"started": 2}
    assert _poll(fake, workflows, at=AT + timedelta(minutes=2), ledger=Forgetful())[0] == {"already_started": 2}
