"""The fleet's progress model counts a tick as quiet on its own reckoning (sandbox/fleet/progress.py):
it must reach the verdicts the detector reaches on every row the table would hold, for any moment and
any stop, or a counted tick would hide a hang the real one acts on."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, cast

from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_recovery.domain.hangs.detect import job_verdicts
from hyperpod_recovery.domain.hangs.rules import HangRules
from sandbox.fleet.copies import SlurmCopies
from sandbox.fleet.progress import FleetProgress, Stop
from sandbox.fleet.training import CopyTraining, FleetTraining
from sandbox.slurm import SimulatedSlurm, SlurmJob

EPOCH = datetime(2026, 3, 15, tzinfo=UTC)
NODES = [f"ip-10-1-0-{i}" for i in range(12)]
PACE = 18.0


def model(restarted_at: float | None, stop: Stop | None) -> tuple[FleetProgress, CopyTraining]:
    slurm = SimulatedSlurm()
    for node in NODES:
        slurm.add_node(node)
    slurm.add_job(SlurmJob(job_id="1001", name="pretrain-0", nodes=list(NODES), state="RUNNING", checkpoint_uri="s3://ckpt/pretrain-0"))
    training = FleetTraining(
        [],
        SlurmCopies(slurm, double=cast(Any, None)),
        s3=None,
        epoch=EPOCH,
        interval=1800.0,
        steps_per_checkpoint=100,
        restart_seconds=300.0,
        initial_step=100,
    )
    if restarted_at is None:
        copy = CopyTraining("1001", "1001", 0.0, 100, original=True)
    else:
        job = slurm.jobs["1001"]
        job.started_at = EPOCH + timedelta(seconds=restarted_at)
        copy = CopyTraining("1001", "0999", restarted_at + 300.0, 1700)
    training.copies[copy.copy] = copy
    progress = FleetProgress(training, EPOCH, PACE, HangRules(), "llm-train")
    if stop is not None:
        progress.stopped(copy, stop)
    return progress, copy


@settings(max_examples=300, deadline=None)
@given(
    restarted_at=st.one_of(st.none(), st.floats(min_value=0, max_value=20_000)),
    after=st.floats(min_value=0, max_value=5_000),
    stop_after=st.one_of(st.none(), st.floats(min_value=0, max_value=5_000)),
    dead=st.sets(st.sampled_from(NODES), max_size=3),
    behind=st.one_of(st.none(), st.sampled_from(NODES)),
)
def test_the_quiet_reckoning_reaches_the_detectors_verdicts_on_every_row(
    restarted_at: float | None, after: float, stop_after: float | None, dead: set[str], behind: str | None
) -> None:
    start = restarted_at or 0.0
    stop = None if stop_after is None else Stop(start + stop_after, frozenset(dead), behind)
    progress, copy = model(restarted_at, stop)
    moment = start + after
    # The detector's verdicts on every node's row, as a tick run reads them
    every_row = job_verdicts("llm-train", "1001", progress.reports(copy, moment), progress.rules, EPOCH + timedelta(seconds=moment))
    assert [v.model_dump() for v in progress.verdicts_at(moment)] == [v.model_dump() for v in every_row]


def test_a_copy_that_trains_undisturbed_gives_no_verdict_and_a_hung_one_a_stall_naming_the_node_that_stopped_first() -> None:
    # Given a copy restarted at 1,000 s, hung at 2,000 s with its rank on node 3 a step behind
    progress, _ = model(1000.0, Stop(2000.0, behind=NODES[3]))
    # Then before the hang no verdict; three minutes after it, a stall suspecting node 3
    assert progress.verdicts_at(1990.0) == []
    (verdict,) = progress.verdicts_at(2180.0)
    assert verdict.rule == "stall" and verdict.suspects == [NODES[3]]
