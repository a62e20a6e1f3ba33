"""The progress item's size against DynamoDB's contract: an item is at most 400 KB, and a write costs
one write capacity unit per started KB (the cost in docs/progress.md assumes one per heartbeat).

DynamoDB's item size is the sum of its attribute names' and values' UTF-8 lengths (numbers: their
digits; "Item sizes and formats", DynamoDB developer guide)."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_recovery.models.progress import MAX_PAUSE_LIMIT_SECONDS, Pause, ProgressReport, progress_item

T = datetime(2026, 11, 27, tzinfo=UTC)
ITEM_LIMIT = 400 * 1024
WRITE_UNIT = 1024


def item_bytes(item: dict[str, dict[str, str]]) -> int:
    return sum(len(name.encode()) + len(next(iter(value.values())).encode()) for name, value in item.items())


def report(job: str, node: str, **fields: object) -> ProgressReport:
    return ProgressReport.model_validate(
        {"job": job, "node": node, "step": 120_000, "step_at": T, "heartbeat_at": T, "started_at": T, **fields}
    )


def test_a_real_nodes_report_is_one_write_unit_on_slurm_and_on_eks() -> None:
    # Given the reports a Slurm node and an EKS node write, every field set as a real job sets it
    full = {"ranks": 8, "intervals_seen": 5000, "step_seconds": 2.013, "baseline_step_seconds": 2.0, "wait_seconds": 0.104}
    paused = {**full, "pause": Pause(kind="checkpoint", since=T, limit_seconds=7200), "pause_ended_at": T}
    slurm = report("1001_17", "ip-10-1-0-7", **paused)
    eks = report("team-llm-pretraining/llama-70b-pretrain-r12", "hyperpod-i-0123456789abcdef0", **paused)
    # Then each is one write unit: the monthly cost in docs/progress.md holds
    assert item_bytes(progress_item(slurm)) <= WRITE_UNIT and item_bytes(progress_item(eks)) <= WRITE_UNIT


@settings(max_examples=200, deadline=None)
@given(
    namespace=st.from_regex(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", fullmatch=True),
    name=st.from_regex(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?", fullmatch=True),
    node=st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}", fullmatch=True),
    step=st.integers(min_value=0, max_value=10**18),
    seconds=st.floats(min_value=0, max_value=86_400, allow_nan=False),
)
def test_property_any_valid_report_is_far_under_the_item_limit_and_at_most_two_write_units(
    namespace: str, name: str, node: str, step: int, seconds: float
) -> None:
    # Given any report the model accepts, its names at their longest
    r = report(
        f"{namespace}/{name}",
        node,
        step=step,
        ranks=64,
        intervals_seen=step,
        step_seconds=seconds,
        baseline_step_seconds=seconds,
        wait_seconds=seconds,
        pause=Pause(kind="evaluation", since=T, limit_seconds=MAX_PAUSE_LIMIT_SECONDS),
        pause_ended_at=T,
        ended=True,
    )
    # Then its item is bounded: never near DynamoDB's limit, never more than two write units
    size = item_bytes(progress_item(r))
    assert size <= 2 * WRITE_UNIT < ITEM_LIMIT
