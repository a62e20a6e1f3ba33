"""The EKS orchestrator (adapters/eks_orchestrator.py) carries the workflow's commands out against the
schema-checked API server (sandbox/kube.py) and answers the waiting task itself."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from hyperpod_recovery.adapters.dry_run import DryRunOrchestrator
from hyperpod_recovery.adapters.eks_orchestrator import EKS_COMMANDS, EksOrchestrator, incident_of
from hyperpod_recovery.errors import ControllerChannelError, InvalidCommand, KubeAccessDenied, KubeConflict, KubeUnavailable
from hyperpod_recovery.models.commands import (
    COMMAND_TYPES,
    BootTimes,
    CheckAgent,
    CommandEnvelope,
    CordonNodes,
    RequeueJob,
    ResumeNodes,
)
from hyperpod_recovery.models.kubernetes import INCIDENT_ANNOTATION, OPT_IN_ANNOTATION, QUARANTINE_TAINT_KEY
from sandbox.kube import FakeKube

AT = datetime(2026, 3, 14, 9, 5, tzinfo=UTC)
A, B = "hyperpod-i-0123456789abcdef0", "hyperpod-i-0123456789abcdef1"
TAG = "hyperpod-recovery:hpr-a"


class Tasks:
    def __init__(self) -> None:
        self.answers: list[tuple[str, dict[str, Any]]] = []

    def send_task_success(self, token: str, output: str) -> None:
        self.answers.append((token, json.loads(output)))


def _cluster() -> tuple[FakeKube, Tasks, EksOrchestrator]:
    fake = FakeKube(now=lambda: AT)
    fake.add_hyperpod_node("i-0123456789abcdef0")
    fake.add_hyperpod_node("i-0123456789abcdef1", unschedulable=True)  # cordoned by someone before us
    fake.add_job("PyTorchJob", "kubeflow", "llama", nodes=[A, B], annotations={OPT_IN_ANNOTATION: "true"})
    fake.add_job("HyperPodPyTorchJob", "hyperpod-team", "hp", nodes=[A])
    fake.calls.clear()
    tasks = Tasks()
    return fake, tasks, EksOrchestrator(fake, tasks, lambda: AT)  # type: ignore[arg-type]


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


def test_a_node_kubernetes_no_longer_has_is_out_of_service_and_has_no_jobs() -> None:
    fake, _, orchestrator = _cluster()
    fake.hyperpod_removes(A)  # HyperPod replacing it already
    result = orchestrator.cordon(CordonNodes(nodes=[A], reason=TAG))
    assert result.already_drained == [A] and result.jobs == []


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
