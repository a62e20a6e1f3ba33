"""The EKS orchestrator (adapters/eks_orchestrator/__init__.py) carries the workflow's commands out against the
schema-checked API server (sandbox/kube/) and answers the waiting task itself."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from typing import Any

import pytest

from hyperpod_recovery.adapters.dry_run import DryRunOrchestrator
from hyperpod_recovery.adapters.eks_orchestrator import EKS_COMMANDS, EksOrchestrator, incident_of
from hyperpod_recovery.errors import (
    ControllerChannelError,
    InvalidCommand,
    JobSpecUnavailable,
    KubeAccessDenied,
    KubeConflict,
    KubeUnavailable,
)
from hyperpod_recovery.models.commands import (
    COMMAND_TYPES,
    BootTimes,
    CheckAgent,
    CheckpointRef,
    CommandEnvelope,
    CordonNodes,
    RequeueJob,
    ResubmitJob,
    ResumeNodes,
)
from hyperpod_recovery.models.kubernetes import INCIDENT_ANNOTATION, OPT_IN_ANNOTATION, QUARANTINE_TAINT_KEY, KubeJobRef
from sandbox.kube import FakeKube
from tests.unit.eks_stopping import Clock, until_stopped

AT = datetime(2026, 3, 14, 9, 5, tzinfo=UTC)
A, B = "hyperpod-i-0123456789abcdef0", "hyperpod-i-0123456789abcdef1"
TAG = "hyperpod-recovery:hpr-a"


class Tasks:
    def __init__(self) -> None:
        self.answers: list[tuple[str, dict[str, Any]]] = []

    def send_task_success(self, token: str, output: str) -> None:
        self.answers.append((token, json.loads(output)))


def _cluster() -> tuple[FakeKube, Tasks, EksOrchestrator]:
    fake = FakeKube(now=Clock(AT))
    fake.add_hyperpod_node("i-0123456789abcdef0")
    fake.add_hyperpod_node("i-0123456789abcdef1", unschedulable=True)  # cordoned by someone before us
    fake.add_job("PyTorchJob", "kubeflow", "llama", nodes=[A, B], annotations={OPT_IN_ANNOTATION: "true"})
    fake.add_job("HyperPodPyTorchJob", "hyperpod-team", "hp", nodes=[A])
    fake.calls.clear()
    tasks = Tasks()
    return fake, tasks, EksOrchestrator(fake, tasks, fake.now)  # type: ignore[arg-type]


def _envelope(command: Any, command_id: str = "hpr-a:cordon") -> CommandEnvelope:
    return CommandEnvelope(
        command_id=command_id, incident_id="hpr-a", execution_name="hpr-a", task_token="token-1", requested_at=AT, command=command
    )


def test_a_cordon_marks_each_node_lists_its_jobs_and_answers_the_task() -> None:
    # Given two nodes, one cordoned by someone else, with an opt-in job on both and an HPTO job on one
    fake, tasks, orchestrator = _cluster()
    # When the workflow's Cordon Nodes command is dispatched
    orchestrator.dispatch(_envelope(CordonNodes(nodes=[A, B], reason=f"{TAG} GPU fault")))
    # Then the waiting task is answered with what was done, the jobs once each and who restarts them
    ((token, reply),) = tasks.answers
    result = reply["result"]
    assert token == "token-1" and reply["type"] == "cordon_nodes" and not reply["dry_run"]
    assert (result["drained"], result["already_drained"]) == ([A], [B])
    assert [(j["name"], j.get("restarted_by")) for j in result["jobs"]] == [("llama", None), ("hp", "hyperpod_training_operator")]
    # And both nodes are cordoned and carry our marks
    for name in (A, B):
        node = fake.nodes[name]
        assert node["spec"]["unschedulable"] is True and node["metadata"]["annotations"][INCIDENT_ANNOTATION] == "hpr-a"
        assert [t["key"] for t in node["spec"]["taints"]] == [QUARANTINE_TAINT_KEY]
    # And the calls are one read and one patch per node, one pod list per node, one read per job
    assert fake.calls.count(("patch", "nodes")) == 2 and fake.calls.count(("list", "pods")) == 2


def test_a_dry_run_cordon_writes_nothing_and_says_what_it_would_do() -> None:
    fake, tasks, orchestrator = _cluster()
    before = {n: dict(fake.nodes[n]) for n in (A, B)}
    DryRunOrchestrator(orchestrator).dispatch(_envelope(CordonNodes(nodes=[A, B], reason=f"{TAG} drill")))
    ((_, reply),) = tasks.answers
    assert reply["dry_run"] is True and reply["result"]["drained"] == [A] and len(reply["result"]["jobs"]) == 2
    assert ("patch", "nodes") not in fake.calls
    assert {n: fake.nodes[n] for n in (A, B)} == before


def test_a_node_kubernetes_does_not_have_is_said_absent_never_cordoned() -> None:
    fake, _, orchestrator = _cluster()
    fake.hyperpod_removes(A)  # HyperPod replacing it already (or a stack pointed at another cluster)
    result = orchestrator.cordon(CordonNodes(nodes=[A], reason=TAG))
    assert (result.absent, result.drained, result.already_drained, result.jobs) == ([A], [], [], [])


def test_resume_never_touches_a_node_another_incident_marked() -> None:
    # Given a replacement node another incident (which holds its lock) has cordoned and marked
    fake, _, orchestrator = _cluster()
    new = fake.add_hyperpod_node("i-0fedcba9876543210", health="UnschedulablePendingReplacement")["metadata"]["name"]
    orchestrator.cordon(CordonNodes(nodes=[new], reason="hyperpod-recovery:hpr-other"), with_jobs=False)
    before = copy.deepcopy(fake.nodes[new])
    # When this incident's Resume Nodes checks it (its gate would fail)
    result = orchestrator.resume(ResumeNodes(nodes=[new], owner_tag=TAG))
    # Then it is the other incident's: reported not ours, and nothing on it changed
    assert result.not_ours == [new] and result.unhealthy == []
    assert fake.nodes[new] == before


def test_resume_decides_on_the_node_as_it_is_when_it_writes() -> None:
    # Given a node ours to give back, which HyperPod marks for replacement between our read and our write
    fake, _, orchestrator = _cluster()
    orchestrator.cordon(CordonNodes(nodes=[A], reason=TAG), with_jobs=False)
    fake.before_patch = lambda name: fake.hyperpod_marks_unhealthy(name)
    # When Resume Nodes runs
    result = orchestrator.resume(ResumeNodes(nodes=[A], owner_tag=TAG))
    # Then the conflict makes it read again, and the node is kept out, not given back
    assert [(u.node, u.verdict) for u in result.unhealthy] == [(A, "failed")]
    assert fake.nodes[A]["spec"]["unschedulable"] is True


def test_a_node_named_otherwise_is_found_by_its_instance_in_the_provider_id() -> None:
    fake = FakeKube(now=lambda: AT)
    fake.add_node("ip-10-1-2-3.us-west-2.compute.internal", instance_id="i-0123456789abcdef0")  # an older cluster's naming
    orchestrator = EksOrchestrator(fake, Tasks(), lambda: AT)  # type: ignore[arg-type]
    assert orchestrator.cordon(CordonNodes(nodes=[A], reason=TAG), with_jobs=False).drained == [A]
    assert fake.nodes["ip-10-1-2-3.us-west-2.compute.internal"]["spec"]["unschedulable"] is True


def test_a_node_that_changes_between_read_and_write_is_read_again_and_decided_afresh() -> None:
    fake, _, orchestrator = _cluster()
    # someone cordons A between our read and our patch: our patch is refused, we re-read, and then
    # see the cordon as someone else's
    fake.before_patch = lambda name: fake._store_node({**fake.nodes[name], "spec": {**fake.nodes[name]["spec"], "unschedulable": True}})
    result = orchestrator.cordon(CordonNodes(nodes=[A], reason=TAG), with_jobs=False)
    assert result.already_drained == [A]
    assert fake.nodes[A]["metadata"]["annotations"]["hyperpod-recovery.io/cordon-pre-existing"] == "true"


def test_conflicts_past_the_retries_and_an_unavailable_api_are_the_channel_error_the_workflow_retries() -> None:
    fake, tasks, orchestrator = _cluster()
    fake.faults[("patch", "nodes")] = [KubeConflict("409")] * 3
    with pytest.raises(ControllerChannelError, match="changed under each"):
        orchestrator.dispatch(_envelope(CordonNodes(nodes=[A], reason=TAG)))
    fake.faults[("get", "nodes")] = [KubeUnavailable("503")]
    with pytest.raises(ControllerChannelError, match="503"):
        orchestrator.dispatch(_envelope(CordonNodes(nodes=[A], reason=TAG)))
    assert tasks.answers == []


def test_access_refused_leaves_under_its_own_name_and_is_never_retried_as_a_channel_error() -> None:
    fake, tasks, orchestrator = _cluster()
    fake.faults[("patch", "nodes")] = [KubeAccessDenied('nodes "x" is forbidden')]
    with pytest.raises(KubeAccessDenied):
        orchestrator.dispatch(_envelope(CordonNodes(nodes=[A], reason=TAG)))
    assert tasks.answers == []


def test_resume_gives_back_a_healthy_node_and_keeps_a_sick_one_marked() -> None:
    # Given both nodes cordoned by us, then A rebooted healthy and B marked for replacement by HyperPod
    fake, _, orchestrator = _cluster()
    orchestrator.cordon(CordonNodes(nodes=[A, B], reason=TAG), with_jobs=False)
    fake.hyperpod_reboots(A)
    fake.hyperpod_marks_unhealthy(B)
    # When Resume Nodes runs
    result = orchestrator.resume(ResumeNodes(nodes=[A, B], owner_tag=TAG))
    # Then A is in service, unmarked; B stays cordoned and marked, with HyperPod's verdict
    assert result.resumed == [A] and [(u.node, u.verdict) for u in result.unhealthy] == [(B, "failed")]
    assert not fake.nodes[A]["spec"].get("unschedulable") and "annotations" not in fake.nodes[A]["metadata"]
    assert fake.nodes[B]["spec"]["unschedulable"] is True and fake.nodes[B]["metadata"]["annotations"][INCIDENT_ANNOTATION] == "hpr-a"


def test_a_replacement_is_checked_under_its_new_name_and_cordoned_if_not_ready() -> None:
    fake, _, orchestrator = _cluster()
    new = fake.add_hyperpod_node("i-0fedcba9876543210", ready=False)["metadata"]["name"]
    result = orchestrator.resume(ResumeNodes(nodes=[new], owner_tag=TAG))
    assert [(u.node, u.verdict) for u in result.unhealthy] == [(new, "could_not_run")]
    assert fake.nodes[new]["spec"]["unschedulable"] is True  # no job lands on it before it is known healthy
    fake.hyperpod_reboots(new)  # (Ready now)
    assert orchestrator.resume(ResumeNodes(nodes=[new], owner_tag=TAG)).resumed == [new]
    assert not fake.nodes[new]["spec"]["unschedulable"]


def test_a_node_not_registered_yet_could_not_be_checked() -> None:
    _, _, orchestrator = _cluster()
    result = orchestrator.resume(ResumeNodes(nodes=["hyperpod-i-0aaaaaaaaaaaaaaaa"], owner_tag=TAG))
    assert [(u.node, u.verdict) for u in result.unhealthy] == [("hyperpod-i-0aaaaaaaaaaaaaaaa", "could_not_run")]


def test_boot_times_prove_a_reboot_by_the_boot_id_and_date_it_by_ready() -> None:
    fake, _, orchestrator = _cluster()
    orchestrator.cordon(CordonNodes(nodes=[A, B], reason=TAG), with_jobs=False)
    fake.now = lambda: datetime(2026, 3, 14, 9, 12, tzinfo=UTC)
    fake.hyperpod_reboots(A)
    fake.hyperpod_goes_not_ready(B)
    readings = {r.name: r for r in orchestrator.boot_times(BootTimes(nodes=[A, B, "hyperpod-i-0aaaaaaaaaaaaaaaa"])).nodes}
    assert readings[A].boot_time == datetime(2026, 3, 14, 9, 12, tzinfo=UTC) and readings[A].responding
    assert readings[B].boot_time is None and not readings[B].responding
    assert readings["hyperpod-i-0aaaaaaaaaaaaaaaa"].state == ""


def test_only_our_own_tag_is_ever_acted_under() -> None:
    for bad in ["", "someone-else:x", "hyperpod-recovery:", "hyperpod-recovery"]:
        with pytest.raises(InvalidCommand):
            incident_of(bad)
    assert incident_of("hyperpod-recovery:hpr-a GPU fault") == "hpr-a"


def test_a_command_eks_does_not_carry_out_is_refused_by_name() -> None:
    _, _, orchestrator = _cluster()
    with pytest.raises(InvalidCommand, match="requeue_job"):
        orchestrator.execute(RequeueJob(job_id="123"))
    assert set(EKS_COMMANDS) <= COMMAND_TYPES


def test_the_check_says_the_api_answers_and_what_it_executes() -> None:
    fake, _, orchestrator = _cluster()
    result = orchestrator.execute(CheckAgent())
    assert result.slurm_reachable and "2 node(s)" in result.slurm_detail and result.commands == list(EKS_COMMANDS)
    fake.faults[("list", "nodes")] = [KubeUnavailable("503")]
    assert not orchestrator.execute(CheckAgent()).slurm_reachable


# --- re-creating an opted-in job ------------------------------------------------------------------
CHECKPOINT = CheckpointRef(uri="s3://ckpt-bucket/llama/step-000001200/", step=1200)
LLAMA = KubeJobRef(kind="PyTorchJob", namespace="kubeflow", name="llama")


TOKEN = "5" * 32  # (what the ledger recorded for the re-creation before it is made)


def _resubmit(fake: FakeKube, orchestrator: EksOrchestrator, uid: str | None = None, token: str = TOKEN) -> Any:
    """Resubmit Job as the workflow runs it: tried again while the old copy's pods are Terminating."""
    uid = uid or fake.jobs[("PyTorchJob", "kubeflow", "llama")]["metadata"]["uid"]
    command = ResubmitJob(job_id=uid, checkpoint=CHECKPOINT, kube=LLAMA, recreation_token=token)
    assert isinstance(fake.now, Clock)
    return until_stopped(lambda: orchestrator.execute(command, "hpr-a"), fake.now)[0]


def test_an_opted_in_job_is_re_created_from_the_checkpoint_once_and_the_old_one_suspended() -> None:
    # Given the opt-in job running on two nodes
    fake, _, orchestrator = _cluster()
    old = copy.deepcopy(fake.jobs[("PyTorchJob", "kubeflow", "llama")])
    # When Resubmit Job runs, and runs again (a retried Lambda)
    first = _resubmit(fake, orchestrator)
    again = _resubmit(fake, orchestrator)
    # Then one new job exists, llama-r1, stored valid (the CRD's schema), the same one both times
    new = fake.jobs[("PyTorchJob", "kubeflow", "llama-r1")]
    assert first.new_job_id == again.new_job_id == new["metadata"]["uid"] and first.old_job_id == old["metadata"]["uid"]
    assert sorted(k[2] for k in fake.jobs if k[0] == "PyTorchJob") == ["llama", "llama-r1"]
    # And every container of every replica is told where to resume, and under which lineage name
    for replica in new["spec"]["pytorchReplicaSpecs"].values():
        for container in replica["template"]["spec"]["containers"]:
            env = {e["name"]: e["value"] for e in container["env"]}
            assert env == {
                "HYPERPOD_RECOVERY_RESUME_FROM": CHECKPOINT.uri,
                "HYPERPOD_RECOVERY_RESUME_STEP": "1200",
                "HYPERPOD_RECOVERY_JOB_NAME": "llama",
            }
    # And the spec is the owner's otherwise: same replicas, image, command, restart policy, opt-in
    assert new["spec"]["runPolicy"] == old["spec"]["runPolicy"] and new["metadata"]["annotations"][OPT_IN_ANNOTATION] == "true"
    worker, old_worker = new["spec"]["pytorchReplicaSpecs"]["Worker"], old["spec"]["pytorchReplicaSpecs"]["Worker"]
    assert (worker["replicas"], worker["restartPolicy"]) == (old_worker["replicas"], old_worker["restartPolicy"])
    assert {k: v for k, v in worker["template"]["spec"]["containers"][0].items() if k != "env"} == {
        k: v for k, v in old_worker["template"]["spec"]["containers"][0].items() if k != "env"
    }
    # And the old job, still running, is suspended (its pods gone), not deleted
    assert first.cancelled_old and fake.jobs[("PyTorchJob", "kubeflow", "llama")]["spec"]["runPolicy"]["suspend"] is True
    assert not [p for p in fake.pods.values() if p["metadata"]["labels"].get("training.kubeflow.org/job-name") == "llama"]


def test_a_second_generation_is_named_after_the_lineage() -> None:
    fake, _, orchestrator = _cluster()
    first = _resubmit(fake, orchestrator)
    command = ResubmitJob(
        job_id=first.new_job_id,
        checkpoint=CHECKPOINT,
        kube=KubeJobRef(kind="PyTorchJob", namespace="kubeflow", name="llama-r1"),
        recreation_token="6" * 32,
    )
    assert isinstance(fake.now, Clock)
    second, _ = until_stopped(lambda: orchestrator.execute(command, "hpr-b"), fake.now)
    r2 = fake.jobs[("PyTorchJob", "kubeflow", "llama-r2")]
    assert second.new_job_id == r2["metadata"]["uid"] and r2["metadata"]["annotations"]["hyperpod-recovery.io/job-name"] == "llama"


def test_a_job_that_is_another_job_now_or_gone_is_never_re_created_in_its_stead() -> None:
    fake, _, orchestrator = _cluster()
    with pytest.raises(JobSpecUnavailable, match="another job now"):
        _resubmit(fake, orchestrator, uid="00000000-0000-0000-0000-00000000beef")
    del fake.jobs[("PyTorchJob", "kubeflow", "llama")]
    with pytest.raises(JobSpecUnavailable, match="no longer exists"):
        _resubmit(fake, orchestrator, uid="00000000-0000-0000-0000-00000000beef")
    assert ("PyTorchJob", "kubeflow", "llama-r1") not in fake.jobs


def test_a_name_taken_by_someone_elses_job_is_not_taken_for_our_resubmission() -> None:
    fake, _, orchestrator = _cluster()
    fake.add_job("PyTorchJob", "kubeflow", "llama-r1", nodes=[])  # a user's job that happens to have the name
    with pytest.raises(JobSpecUnavailable, match="not our re-creation"):
        _resubmit(fake, orchestrator)
    assert "suspend" not in fake.jobs[("PyTorchJob", "kubeflow", "llama")]["spec"]["runPolicy"]  # the old job left running


def test_a_job_already_failed_is_re_created_and_not_patched() -> None:
    fake, _, orchestrator = _cluster()
    fake.job_fails("PyTorchJob", "kubeflow", "llama")  # (its pods ended with it)
    fake.calls.clear()
    result = _resubmit(fake, orchestrator)
    assert not result.cancelled_old and ("patch", "pytorchjobs") not in fake.calls


def test_a_failed_job_whose_pods_still_run_is_not_re_created_beside_them() -> None:
    # Given a job its operator marked Failed while two of its pods still run (cleanPodPolicy None keeps them)
    fake, _, orchestrator = _cluster()
    fake.jobs[("PyTorchJob", "kubeflow", "llama")]["status"]["conditions"].append({"type": "Failed", "status": "True"})
    # When Resubmit Job runs, then nothing is created: the pods are a copy its operator no longer stops
    with pytest.raises(JobSpecUnavailable, match="2 pod\\(s\\) of it still run"):
        _resubmit(fake, orchestrator)
    assert ("PyTorchJob", "kubeflow", "llama-r1") not in fake.jobs
