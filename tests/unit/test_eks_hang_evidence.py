"""A hung EKS job's evidence (capture_hang_evidence), carried out by the EKS orchestrator against the
schema-checked API server (sandbox/kube/): the job's conditions and events, each node's pod log
tail and its signature; read-only, within the capture's time, a refused read said and never raised."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hyperpod_recovery.adapters.eks_orchestrator import (
    EKS_COMMANDS,
    EKS_EVIDENCE_SECONDS,
    EVIDENCE_TOOL,
    LOG_LIMIT_BYTES,
    LOG_TAIL_LINES,
    EksOrchestrator,
)
from hyperpod_recovery.domain.hangs import suspects
from hyperpod_recovery.domain.hangs.pod_logs import CUT_MARKER
from hyperpod_recovery.errors import KubeAccessDenied, KubeUnavailable
from hyperpod_recovery.models.commands import STACKS_TEXT_LIMIT, CaptureHangEvidence, CommandEnvelope, HangEvidenceResult
from hyperpod_recovery.models.kubernetes import OPT_IN_ANNOTATION, KubeJobRef
from sandbox.kube import FakeKube

AT = datetime(2026, 3, 14, 9, 5, tzinfo=UTC)
NODES = [f"hyperpod-i-0123456789abcdef{n}" for n in range(4)]
IDLE = "hyperpod-i-0123456789abcdefa"  # a node the job has no pod on
REF = KubeJobRef(kind="PyTorchJob", namespace="kubeflow", name="llama")


def _watchdog(rank: int) -> str:
    return (
        f"[rank{rank}]:[E0314 09:{rank:02d}:12.{rank}00 ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught collective operation "
        f"timeout: WorkNCCL(SeqNum={7000 + rank}, OpType=ALLREDUCE) ran for {600000 + rank} milliseconds before timing out.\n"
    )


class Tasks:
    def __init__(self) -> None:
        self.answers: list[tuple[str, dict[str, Any]]] = []

    def send_task_success(self, token: str, output: str) -> None:
        self.answers.append((token, json.loads(output)))


class Clock:
    """The orchestrator's time, moved by the test (never the wall clock)."""

    def __init__(self) -> None:
        self.at = AT

    def __call__(self) -> datetime:
        return self.at


def _hung_job() -> tuple[FakeKube, str]:
    """A job on four nodes: three ranks wait in the all-reduce, the fourth is stuck in its data loader."""
    fake = FakeKube(now=lambda: AT)
    for node in [*NODES, IDLE]:
        fake.add_hyperpod_node(node.removeprefix("hyperpod-"))
    job = fake.add_job("PyTorchJob", "kubeflow", "llama", nodes=NODES, annotations={OPT_IN_ANNOTATION: "true"})
    for n in range(3):
        fake.set_pod_log("kubeflow", f"llama-worker-{n}", f"step 4410 loss 2.31\n{_watchdog(n * 8)}")
    fake.set_pod_log("kubeflow", "llama-worker-3", "step 4410 loss 2.31\n[rank24]: fetching batch 4411 from /fsx/shard-17.arrow\n")
    fake.calls.clear()
    return fake, str(job["metadata"]["uid"])


def _capture(fake: FakeKube, uid: str, nodes: list[str], clock: Clock | None = None, **kwargs: Any) -> HangEvidenceResult:
    orchestrator = EksOrchestrator(fake, Tasks(), clock or Clock())  # type: ignore[arg-type]
    result = orchestrator.execute(CaptureHangEvidence(job_id=uid, nodes=nodes, kube=REF, **kwargs), "hpj-a")
    assert isinstance(result, HangEvidenceResult)
    return result


def test_eks_carries_out_the_hang_evidence_command() -> None:
    assert "capture_hang_evidence" in EKS_COMMANDS


def test_each_nodes_log_tail_is_captured_and_the_node_stuck_elsewhere_is_the_odd_signature() -> None:
    # Given a hung job, three ranks in the all-reduce and one in its data loader, and a node it has no pod on
    fake, uid = _hung_job()
    # When its evidence is captured on its four nodes and the idle one
    result = _capture(fake, uid, [*NODES, IDLE])
    by_node = {s.node: s for s in result.nodes}
    # Then each of its nodes' pods' last lines are captured, the idle node has no pod of it
    assert [by_node[n].outcome for n in NODES] == ["captured"] * 4
    assert by_node[IDLE].outcome == "no_process" and "no pod of PyTorchJob kubeflow/llama" in by_node[IDLE].text
    assert by_node[NODES[3]].text.endswith("fetching batch 4411 from /fsx/shard-17.arrow")
    assert by_node[NODES[0]].text.startswith(f"== pod llama-worker-0 container pytorch (last {LOG_TAIL_LINES} lines) ==")
    # And the three ranks in the all-reduce share a signature, the fourth does not: the classifier names it
    assert len({by_node[n].signature for n in NODES[:3]}) == 1 and by_node[NODES[3]].signature != by_node[NODES[0]].signature
    assert suspects.from_evidence(result.nodes, len(NODES))[0] == [NODES[3]]
    # And the answer says the job's state and the truth of the tool, which is always there
    assert (result.job_state, result.tool, result.tool_absent) == ("Running", EVIDENCE_TOOL, False)
    # And only pods were listed, logs read and events listed: nothing written
    assert {verb for verb, _ in fake.calls} <= {"get", "list"}
    assert fake.calls.count(("get", "pods/log")) == 4


def test_a_log_is_asked_for_its_last_lines_within_the_byte_bound_of_its_training_container(monkeypatch: pytest.MonkeyPatch) -> None:
    fake, uid = _hung_job()
    asked: list[tuple[Any, ...]] = []
    original = fake.get_pod_log

    def recorded(*args: Any) -> str:
        asked.append(args)
        return original(*args)

    monkeypatch.setattr(fake, "get_pod_log", recorded)
    _capture(fake, uid, NODES[:1])
    assert asked == [("kubeflow", "llama-worker-0", "pytorch", LOG_TAIL_LINES, LOG_LIMIT_BYTES)]
    assert LOG_LIMIT_BYTES >= LOG_TAIL_LINES * 200 and STACKS_TEXT_LIMIT < LOG_LIMIT_BYTES  # (40 long lines come whole; the end is kept)


def test_the_job_text_holds_its_conditions_and_the_events_of_it_and_its_pods_newest_first() -> None:
    # Given events about the job, about its pod, and about an earlier job of the same name (another uid)
    fake, uid = _hung_job()
    job = fake.jobs[("PyTorchJob", "kubeflow", "llama")]
    fake.record_event(job, "PyTorchJobRunning", "PyTorchJob llama is running.", component="pytorchjob-controller")
    fake.now = lambda: AT + timedelta(minutes=1)
    fake.record_event(fake.pods[("kubeflow", "llama-worker-3")], "Unhealthy", "Liveness probe failed: timeout", type_="Warning", count=3)
    earlier = dict(job, metadata=dict(job["metadata"], uid="00000000-0000-0000-0000-0000000000e1"))
    fake.record_event(earlier, "PyTorchJobFailed", "an earlier llama failed", type_="Warning")
    # When the evidence is captured
    text = _capture(fake, uid, NODES).job_text
    # Then the job's conditions come first, then its own events and its pods', the newest first, with their counts
    assert text.startswith(f"PyTorchJob kubeflow/llama (uid {uid}): Running\nconditions:\n")
    assert "Running=True" in text
    newest, older = text.index("Warning Unhealthy (x3) Pod/llama-worker-3: Liveness probe failed"), text.index("Normal PyTorchJobRunning")
    assert newest < older
    # And an earlier object's events are not this job's
    assert "an earlier llama failed" not in text


def test_a_pod_the_job_does_not_own_is_never_read_whatever_its_labels() -> None:
    # Given a pod made by hand on the idle node, labelled as the job's pods are but owned by nothing
    fake, uid = _hung_job()
    fake.add_pod("kubeflow", "llama-impostor", IDLE, labels={"training.kubeflow.org/job-name": "llama"}, containers=("pytorch",))
    fake.set_pod_log("kubeflow", "llama-impostor", _watchdog(99))
    # When the evidence is captured on that node
    (stacks,) = _capture(fake, uid, [IDLE]).nodes
    # Then the node has no pod of the job, and that pod's log was never asked for
    assert stacks.outcome == "no_process" and stacks.signature is None
    assert ("get", "pods/log") not in fake.calls


def test_a_log_the_api_refuses_is_a_failed_node_that_says_why_and_the_others_are_captured() -> None:
    # Given the API server refusing the first log read (the role is not in the log readers' group)
    fake, uid = _hung_job()
    fake.faults[("get", "pods/log")] = [KubeAccessDenied('403 Forbidden: cannot get resource "pods/log"')]
    # When the evidence is captured
    result = _capture(fake, uid, NODES)
    # Then that node failed and says why; nothing was raised, and the other nodes are captured
    first, *others = result.nodes
    assert first.outcome == "failed" and "KubeAccessDenied" in first.text and "pods/log" in first.text and first.signature is None
    assert [s.outcome for s in others] == ["captured"] * 3


def test_events_the_api_does_not_give_are_said_in_the_job_text_and_the_logs_are_still_read() -> None:
    fake, uid = _hung_job()
    fake.faults[("list", "events")] = [KubeUnavailable("503 ServiceUnavailable")]
    result = _capture(fake, uid, NODES[:1])
    assert "(the events of PyTorchJob llama were not read (KubeUnavailable): 503 ServiceUnavailable)" in result.job_text
    assert result.nodes[0].outcome == "captured"


def test_asking_stops_at_the_deadline_and_the_nodes_not_asked_by_then_are_timed_out(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given an API server whose every log read takes 6 s of the orchestrator's (injected) time
    fake, uid = _hung_job()
    clock = Clock()
    original = fake.get_pod_log

    def slow(*args: Any) -> str:
        clock.at += timedelta(seconds=6)
        return original(*args)

    monkeypatch.setattr(fake, "get_pod_log", slow)
    # When the evidence is captured on four nodes within the EKS capture's bound (the command allows 60 s)
    assert EKS_EVIDENCE_SECONDS == 15
    result = _capture(fake, uid, NODES, clock, timeout_seconds=60)
    # Then the nodes read before the deadline are captured, the rest timed out, never asked
    assert [s.outcome for s in result.nodes] == ["captured", "captured", "captured", "timed_out"]
    assert "15 s had passed" in result.nodes[3].text and fake.calls.count(("get", "pods/log")) == 3
    # And a shorter command timeout is the bound
    fake.calls.clear()
    clock.at = AT
    short = _capture(fake, uid, NODES, clock, timeout_seconds=5)
    assert [s.outcome for s in short.nodes] == ["captured", "timed_out", "timed_out", "timed_out"]
    assert "(the events of 2 pod(s) were not read: the capture's 15 s had passed)" in result.job_text
    assert "(the events of 4 pod(s) were not read: the capture's 5 s had passed)" in short.job_text


def test_a_job_kubernetes_no_longer_has_has_no_pod_on_any_node() -> None:
    fake, _ = _hung_job()
    result = _capture(fake, "00000000-0000-0000-0000-00000000beef", NODES[:2])
    assert result.job_state is None and [s.outcome for s in result.nodes] == ["no_process", "no_process"]
    assert ("get", "pods/log") not in fake.calls


def test_a_dispatched_capture_answers_the_waiting_task_itself() -> None:
    fake, uid = _hung_job()
    tasks = Tasks()
    orchestrator = EksOrchestrator(fake, tasks, lambda: AT)  # type: ignore[arg-type]
    command = CaptureHangEvidence(job_id=uid, nodes=NODES, kube=REF)
    orchestrator.dispatch(
        CommandEnvelope(
            command_id="hpj-a:hang-evidence",
            incident_id="hpj-a",
            execution_name="hpj-a",
            task_token="t-1",
            requested_at=AT,
            command=command,
        )
    )
    ((token, reply),) = tasks.answers
    assert token == "t-1" and reply["type"] == "capture_hang_evidence"
    assert [n["outcome"] for n in reply["result"]["nodes"]] == ["captured"] * 4


# --- secrets in what the job printed (issue 47: redacted before it is kept or sent) ------------------
SECRET_KEY = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
API_TOKEN = "hf_" + "Q" * 34


def test_a_secret_in_a_pod_s_log_is_redacted_as_read_before_its_tail_is_cut() -> None:
    # Given a rank whose log printed an AWS secret key and an API token, followed by enough lines that
    # the kept tail starts inside the key
    fake, uid = _hung_job()
    header = f"== pod llama-worker-3 container pytorch (last {LOG_TAIL_LINES} lines) ==\n"
    kept = STACKS_TEXT_LIMIT - len(header) - len(CUT_MARKER)  # (what node_text keeps of the log's end)
    line = "step 4410 loss 2.31 lr 3.0e-04 " * 3 + "\n"
    tail = f"HF_TOKEN={API_TOKEN}\n" + line * ((kept - 20) // len(line))
    tail = "x" * (kept - 20 - len(tail)) + tail
    fake.set_pod_log("kubeflow", "llama-worker-3", f"export AWS_SECRET_ACCESS_KEY={SECRET_KEY}{tail}")
    # When the evidence is captured
    result = _capture(fake, uid, NODES)
    # Then neither is in the answer, nor a piece of either
    answer = result.model_dump_json()
    assert SECRET_KEY[-16:] not in answer and "Q" * 16 not in answer


def test_a_secret_in_an_event_s_message_is_redacted_before_the_job_text_is_cut() -> None:
    # Given an event whose message carries credentials in a URL and an access key id, among long events
    fake, uid = _hung_job()
    job = fake.jobs[("PyTorchJob", "kubeflow", "llama")]
    fake.record_event(job, "Pulling", "pulling from https://robot:s3cr3tpassw0rd@registry.internal/llama key AKIAIOSFODNN7EXAMPLE")
    # When the evidence is captured; Then the job text says what was removed, never the secret
    text = _capture(fake, uid, NODES).job_text
    assert "s3cr3tpassw0rd" not in text and "AKIAIOSFODNN7EXAMPLE" not in text
    assert "https://[REDACTED:url-credentials]@registry.internal/llama key [REDACTED:aws-access-key-id]" in text
