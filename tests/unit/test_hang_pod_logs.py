"""A hung EKS job's evidence, shaped from its pods' logs and its events (domain/hangs/pod_logs.py):
bounded texts, and a signature that groups the nodes stuck at the same place."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_recovery.domain.hangs import suspects
from hyperpod_recovery.domain.hangs.pod_logs import (
    SILENT_SIGNATURE,
    PodLog,
    clean,
    comparable,
    job_text,
    keep_end,
    last_line,
    log_signature,
    node_signature,
    node_text,
    normalized,
    training_container,
)
from hyperpod_recovery.models.commands import JOB_TEXT_LIMIT, STACKS_TEXT_LIMIT, NodeStacks

# What two ranks of one job print when both wait in the same all-reduce (NCCL's watchdog), and what
# a rank stuck in its data loader printed last.
WATCHDOG = (
    "[rank{rank}]:[E1127 03:{minute}:12.{micro} ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran for 600{extra} milliseconds"
)
LOADER = "[rank{rank}]: step {step}: fetching batch from /fsx/data/shard-{shard}.arrow"


def _watchdog(rank: int, seq: int = 7741, minute: int = 12) -> str:
    return WATCHDOG.format(rank=rank, minute=minute, micro=100 + rank, seq=seq, extra=rank * 7)


# --- the bounds -------------------------------------------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(logs=st.lists(st.text(max_size=6000), min_size=1, max_size=8), cut=st.lists(st.booleans(), min_size=8, max_size=8))
def test_given_any_logs_of_any_length_then_a_nodes_text_never_exceeds_its_bound(logs: list[str], cut: list[bool]) -> None:
    # Given any pods' logs (any characters, any length, some cut at the byte bound)
    pods = [PodLog(pod=f"llama-worker-{i}", container="pytorch", text=text, cut=cut[i]) for i, text in enumerate(logs)]
    # When a node's evidence text is made of them
    text = node_text(pods, STACKS_TEXT_LIMIT, 40)
    # Then it fits the answer's bound, and the model takes it
    assert len(text) <= STACKS_TEXT_LIMIT
    NodeStacks(node="hyperpod-i-0123456789abcdef0", outcome="captured", text=text, signature=node_signature(pods))


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=20000), limit=st.integers(min_value=0, max_value=5000))
def test_given_any_text_then_keep_end_keeps_its_end_within_the_limit(text: str, limit: int) -> None:
    kept = keep_end(text, limit)
    assert len(kept) <= limit
    assert kept == text if len(text) <= limit else text.endswith(kept.removeprefix("[...cut...]\n"))


@settings(max_examples=100, deadline=None)
@given(
    message=st.text(max_size=3000),
    count=st.integers(min_value=0, max_value=200),
    notes=st.lists(st.text(max_size=300), max_size=5),
)
def test_given_any_events_and_notes_then_the_jobs_text_never_exceeds_its_bound(message: str, count: int, notes: list[str]) -> None:
    job = {"status": {"conditions": [{"type": "Running", "status": "True", "message": message}]}}
    events = [
        {"type": "Warning", "reason": "BackOff", "message": message, "count": n, "involvedObject": {"kind": "Pod", "name": f"p-{n}"}}
        for n in range(count)
    ]
    assert len(job_text("PyTorchJob kubeflow/llama", job, events, notes, JOB_TEXT_LIMIT)) <= JOB_TEXT_LIMIT


def test_a_long_log_keeps_its_newest_lines_under_its_pods_header() -> None:
    # Given a node's pod whose last 40 lines are longer than the node's bound
    text = "".join(f"step {n:05d} loss {n / 7:.6f} lr 3e-4 tokens/s 123456\n" for n in range(40))
    # When its text is made
    shown = node_text([PodLog(pod="llama-worker-3", container="pytorch", text=text)], 600, 40)
    # Then the header says whose log it is, and the newest line is there, the oldest cut
    assert shown.startswith("== pod llama-worker-3 container pytorch (last 40 lines) ==\n[...cut...]\n")
    assert shown.endswith("step 00039 loss 5.571429 lr 3e-4 tokens/s 123456") and "step 00000" not in shown


def test_a_log_cut_at_the_byte_bound_says_so_and_has_no_signature() -> None:
    # (the API server stops at limitBytes from the start of the tail: the newest line is not known)
    cut = PodLog(pod="p", container="pytorch", text="step 1\nstep 2\nst", cut=True)
    assert "the newest are not shown" in node_text([cut], STACKS_TEXT_LIMIT, 40)
    assert node_signature([cut]) is None


# --- what a log line is reduced to ------------------------------------------------------------------
def test_escapes_and_a_progress_bar_rewritten_in_place_leave_what_a_terminal_showed() -> None:
    bar = "\x1b[32mEpoch 1\x1b[0m:  10%|#  | 10/100\r Epoch 1:  11%|#  | 11/100\r Epoch 1:  12%|#  | 12/100\n"
    assert clean(bar) == " Epoch 1:  12%|#  | 12/100\n"
    assert last_line("first\n\x00second\x07\n\n   \n") == "second"
    assert last_line("") is None and last_line("\n \n\t\n") is None


def test_numbers_hex_ids_and_timestamps_are_what_a_line_is_normalized_of() -> None:
    assert normalized("2026-11-27T03:12:44.123Z rank 12 step 4410 loss 2.3e-01 comm 0x7f3a2c000b20") == "# rank # step # loss # comm #"
    assert normalized("[E1127 03:12:12.101 ProcessGroupNCCL.cpp:616]") == normalized("[E1127 04:00:59.999 ProcessGroupNCCL.cpp:616]")
    # (a time or date in a format of its own, a version: numbers joined by separators are one value)
    assert normalized("at 9:5:1 on 27/11/2026 torch 2.5.1") == normalized("at 10:15:31 on 1/1/2027 torch 2.6.0") == "at # on # torch #"


# --- the signature ------------------------------------------------------------------------------------
@settings(max_examples=100, deadline=None)
@given(
    ranks=st.tuples(st.integers(0, 4095), st.integers(0, 4095)),
    seqs=st.tuples(st.integers(1, 10**6), st.integers(1, 10**6)),
    minutes=st.tuples(st.integers(10, 59), st.integers(10, 59)),
    before=st.lists(st.text(alphabet="abcdefgh =:0123456789", max_size=60), max_size=5),
)
def test_two_ranks_stuck_at_the_same_place_share_a_signature(
    ranks: tuple[int, int], seqs: tuple[int, int], minutes: tuple[int, int], before: list[str]
) -> None:
    # Given two ranks' logs whose last line is the same watchdog timeout (other ranks, sequence numbers, times)
    a = "\n".join([*before, _watchdog(ranks[0], seqs[0], minutes[0])]) + "\n"
    b = _watchdog(ranks[1], seqs[1], minutes[1]) + "\n"
    # Then their signatures are the same, whatever came before the last line
    assert log_signature([a]) == log_signature([b])


@settings(max_examples=100, deadline=None)
@given(rank=st.integers(0, 4095), step=st.integers(0, 10**6), shard=st.integers(0, 999))
def test_a_rank_stuck_elsewhere_has_another_signature(rank: int, step: int, shard: int) -> None:
    assert log_signature([LOADER.format(rank=rank, step=step, shard=shard)]) != log_signature([_watchdog(rank)])


def test_a_silent_log_has_the_silent_signature_and_the_order_of_a_nodes_pods_does_not_count() -> None:
    assert log_signature([""]) == log_signature(["\n\n"]) == log_signature([]) == SILENT_SIGNATURE
    assert log_signature([_watchdog(1), LOADER.format(rank=2, step=3, shard=4)]) == log_signature(
        [LOADER.format(rank=9, step=9, shard=9), _watchdog(8)]
    )


def test_silence_is_compared_only_where_most_nodes_print() -> None:
    stuck, silent = log_signature([_watchdog(0)]), SILENT_SIGNATURE
    # Given most nodes printing the watchdog and one silent (the rank that never reached the collective)
    assert comparable({"a": stuck, "b": stuck, "c": stuck, "d": silent}) == {"a": stuck, "b": stuck, "c": stuck, "d": silent}
    # Given most nodes silent and one printing (the job logs on rank 0 only): the silent are not compared
    assert comparable({"a": stuck, "b": silent, "c": silent, "d": silent}) == {"a": stuck, "b": None, "c": None, "d": None}


def _stacks(signatures: dict[str, str | None]) -> list[NodeStacks]:
    return [NodeStacks(node=n, outcome="captured", signature=s) for n, s in signatures.items()]


def test_the_classifier_names_the_node_whose_log_stopped_elsewhere() -> None:
    # Given four nodes' logs: three wait in the all-reduce, one is stuck in its data loader
    logs = {f"hyperpod-i-0{n}": _watchdog(n * 8, seq=5000 + n) for n in range(3)}
    logs["hyperpod-i-03"] = LOADER.format(rank=24, step=4410, shard=17)
    signed = comparable({node: log_signature([text]) for node, text in logs.items()})
    # Then the odd one out is that node
    blamed, why = suspects.from_evidence(_stacks(signed), len(logs))
    assert blamed == ["hyperpod-i-03"], why


def test_the_classifier_names_nobody_when_only_rank_zero_logs() -> None:
    # Given a job that logs on rank 0 only: its node printed a step, the three others nothing
    logs = {"hyperpod-i-00": "step 4410 loss 2.31\n", "hyperpod-i-01": "", "hyperpod-i-02": "", "hyperpod-i-03": ""}
    signed = comparable({node: log_signature([text]) for node, text in logs.items()})
    # Then no node is blamed: rank 0's node logs, it is not stuck elsewhere
    assert suspects.from_evidence(_stacks(signed), len(logs))[0] == []


# --- which container ------------------------------------------------------------------------------------
def test_the_training_container_is_pytorch_else_the_pods_default_else_its_first() -> None:
    def pod(names: list[str], default: str | None = None) -> dict[str, object]:
        annotations = {"kubectl.kubernetes.io/default-container": default} if default else {}
        return {"metadata": {"annotations": annotations}, "spec": {"containers": [{"name": n} for n in names]}}

    assert training_container(pod(["istio-proxy", "pytorch"])) == "pytorch"
    assert training_container(pod(["sidecar", "trainer"], default="trainer")) == "trainer"
    assert training_container(pod(["trainer", "sidecar"], default="gone")) == "trainer"
    assert training_container(pod([])) is None


def test_a_secret_the_job_text_s_bound_would_cut_in_two_is_redacted_before_the_cut() -> None:
    # Given an event whose message ends the job text with an access key id the bound falls inside
    key = "AKIAIOSFODNN7EXAMPLE"
    title = "PyTorchJob kubeflow/llama (uid u): Running"
    head = job_text(title, {"status": {"conditions": []}}, [], [], JOB_TEXT_LIMIT)
    event = {"type": "Warning", "reason": "Pull", "message": f"key {key} denied", "involvedObject": {"kind": "Pod", "name": "p"}}
    shown = "\n".join([*head.split("\n")[:-1], "events (newest first):", f"  - Warning Pull Pod/p: key {key} denied"])
    limit = shown.index(key) + 14  # (the cut keeps 14 of its 20 characters: no longer its shape)
    # When the job text is cut to that bound
    text = job_text(title, {"status": {"conditions": []}}, [event], [], limit)
    # Then no piece of it is left
    assert key[:12] not in text
