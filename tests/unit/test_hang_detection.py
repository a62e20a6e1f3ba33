"""Hangs and slowdowns, seen in the progress training scripts report (domain/hangs): a stall is no
progress past a threshold that adapts to the job, outside a declared pause; a slowdown is the job's
step time over its own baseline; blame goes to the nodes that stopped first, never to most of them."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_recovery.domain.hangs.detect import job_verdicts, live_reports, slow_verdict, stall_threshold, stall_verdict
from hyperpod_recovery.domain.hangs.rules import WRITE_GAP_HEADROOM_SECONDS, HangRules
from hyperpod_recovery.domain.hangs.suspects import from_evidence
from hyperpod_recovery.models.commands import NodeStacks
from hyperpod_recovery.models.hangs import MAX_SUSPECTS
from hyperpod_recovery.models.progress import HEARTBEAT_SECONDS, Pause, ProgressReport
from tests.fakes import CLUSTER, T0

RULES = HangRules()


def report(
    node: str,
    *,
    step: int = 100,
    idle: float = 0.0,
    heartbeat_age: float = 5.0,
    step_seconds: float | None = 2.0,
    intervals: int = 50,
    baseline: float | None = None,
    wait: float | None = None,
    pause: Pause | None = None,
    pause_ended_ago: float | None = None,
    ended: bool = False,
    job: str = "1001",
) -> ProgressReport:
    """One node's report as seen at T0: its last step ``idle`` seconds ago."""
    return ProgressReport(
        job=job,
        node=node,
        step=step,
        step_at=T0 - timedelta(seconds=idle),
        heartbeat_at=T0 - timedelta(seconds=heartbeat_age),
        started_at=T0 - timedelta(hours=2),
        intervals_seen=intervals,
        step_seconds=step_seconds,
        baseline_step_seconds=baseline,
        wait_seconds=wait,
        pause=pause,
        pause_ended_at=T0 - timedelta(seconds=pause_ended_ago) if pause_ended_ago is not None else None,
        ended=ended,
    )


def nodes(count: int, **kwargs: object) -> list[ProgressReport]:
    return [report(f"ip-10-1-0-{i}", **kwargs) for i in range(1, count + 1)]  # type: ignore[arg-type]


# --- stall -------------------------------------------------------------------------------------
def test_given_a_2s_step_job_whose_reporters_write_every_30s_then_its_threshold_is_their_gap_and_a_headroom() -> None:
    # Given four nodes of 2 s steps, silent 44 s and then 46 s, whose reporters (an earlier version) write every 30 s
    # Then 44 s is no stall (a healthy job looks that idle between two writes), and 46 s is one, its threshold said
    assert job_verdicts(CLUSTER, "1001", nodes(4, idle=44), RULES, T0, write_gap=30.0) == []
    (verdict,) = job_verdicts(CLUSTER, "1001", nodes(4, idle=46), RULES, T0, write_gap=30.0)
    assert verdict.threshold_seconds == 45.0 and "its reporters write every 30 s" in verdict.summary


def test_given_no_write_gap_known_then_the_threshold_assumes_the_heartbeats() -> None:
    # Given a caller that has not watched the reporters write (no memory), Then their heartbeat's gap is assumed
    assert stall_threshold(nodes(4), RULES) == HEARTBEAT_SECONDS + WRITE_GAP_HEADROOM_SECONDS


def test_given_a_2s_step_job_silent_for_21s_whose_reporters_write_every_5s_then_it_is_hung_at_the_20s_floor() -> None:
    # Given four nodes whose last step was 21 s ago, at 2 s a step, their reporters writing every 5 s
    reports = nodes(4, idle=21)
    # When the detector looks
    (verdict,) = job_verdicts(CLUSTER, "1001", reports, RULES, T0, write_gap=5.0)
    # Then it is a stall past the floor (5 x 2 s and 5 s + 15 s are not above it), in enforce mode, blaming no node
    assert (verdict.rule, verdict.mode, verdict.threshold_seconds, verdict.suspects) == ("stall", "enforce", 20.0, [])
    assert verdict.episode_at == T0 - timedelta(seconds=21)
    assert "every node stopped at step 100" in verdict.suspects_why


def test_given_a_40s_step_job_the_threshold_is_its_own_pace_not_the_floor() -> None:
    # Given a job at 40 s a step, silent for 150 s: slow steps, not a hang (threshold 5 x 40 = 200 s)
    assert stall_threshold(nodes(2, step_seconds=40.0), RULES) == 200.0
    assert stall_verdict(CLUSTER, "1001", nodes(2, idle=150, step_seconds=40.0), RULES, T0) is None
    # When it has been silent for 201 s
    verdict = stall_verdict(CLUSTER, "1001", nodes(2, idle=201, step_seconds=40.0), RULES, T0)
    # Then it is hung, and the summary says why the threshold is what it is
    assert verdict is not None and "5 × its 40.0 s step" in verdict.summary


def test_given_a_job_whose_pace_is_not_known_yet_the_startup_allowance_holds() -> None:
    # Given a job that has timed only 2 steps (compiling, loading), silent for 5 minutes
    reports = nodes(2, idle=300, intervals=2)
    # Then it is not hung (600 s allowance), and is at 601 s
    assert stall_verdict(CLUSTER, "1001", reports, RULES, T0) is None
    assert stall_verdict(CLUSTER, "1001", nodes(2, idle=601, intervals=2), RULES, T0) is not None


def test_given_a_declared_checkpoint_save_of_20_minutes_then_no_stall() -> None:
    # Given rank 0's node saving a checkpoint for 20 minutes (declared, limit 1 h), the others waiting
    saving = Pause(kind="checkpoint", since=T0 - timedelta(minutes=20), limit_seconds=3600)
    reports = [report("ip-10-1-0-1", idle=1200, pause=saving), *nodes(3, idle=1200)[1:]]
    # Then there is no verdict
    assert job_verdicts(CLUSTER, "1001", reports, RULES, T0) == []


def test_given_a_pause_past_its_declared_limit_then_it_is_a_stall_anyway() -> None:
    # Given a save declared for at most 10 minutes, 20 minutes ago (a save stuck on S3 is a hang too)
    stuck = Pause(kind="checkpoint", since=T0 - timedelta(minutes=20), limit_seconds=600)
    reports = [report("ip-10-1-0-1", idle=1200, pause=stuck), report("ip-10-1-0-2", idle=1200)]
    # Then it is hung
    assert stall_verdict(CLUSTER, "1001", reports, RULES, T0) is not None


def test_given_a_pause_declared_by_a_reporter_that_died_then_the_pause_does_not_hold() -> None:
    # Given the pausing node's reporter silent for 5 minutes (its process gone), the others alive
    saving = Pause(kind="checkpoint", since=T0 - timedelta(minutes=10), limit_seconds=3600)
    reports = [report("ip-10-1-0-1", idle=600, pause=saving, heartbeat_age=300), *nodes(3, idle=600)[1:]]
    # Then it is a stall, and the silent node is the suspect
    verdict = stall_verdict(CLUSTER, "1001", reports, RULES, T0)
    assert verdict is not None and verdict.suspects == ["ip-10-1-0-1"]
    assert "stopped reporting" in verdict.suspects_why


def test_given_a_job_back_from_a_long_pause_its_step_clock_restarts_there() -> None:
    # Given the last step 20 minutes ago, but the save it declared ended 30 s ago
    reports = nodes(2, idle=1200, pause_ended_ago=30)
    # Then it is not hung; 61 s after the pause's end it is
    assert stall_verdict(CLUSTER, "1001", reports, RULES, T0) is None
    assert stall_verdict(CLUSTER, "1001", nodes(2, idle=1200, pause_ended_ago=61), RULES, T0) is not None


def test_given_a_job_that_ended_cleanly_or_whose_reporters_are_all_gone_then_no_verdict() -> None:
    assert job_verdicts(CLUSTER, "1001", nodes(2, idle=3000, ended=True), RULES, T0) == []
    # (every reporter silent for over 15 minutes: the job ended; its end is the job-failed path's)
    assert job_verdicts(CLUSTER, "1001", nodes(2, idle=3000, heartbeat_age=1000), RULES, T0) == []


def test_given_one_node_behind_the_others_then_it_is_the_suspect() -> None:
    # Given 7 nodes at step 101 and one stuck at step 100: it stopped first
    reports = [*nodes(7, step=101, idle=90), report("ip-10-1-0-9", step=100, idle=92)]
    verdict = stall_verdict(CLUSTER, "1001", reports, RULES, T0)
    assert verdict is not None and verdict.suspects == ["ip-10-1-0-9"]
    assert verdict.nodes[0].node == "ip-10-1-0-9"  # (the suspects first in the verdict's nodes)
    assert "ip-10-1-0-9 at step 100 while the others reached step 101" in verdict.suspects_why


def test_given_most_nodes_behind_then_no_node_is_blamed() -> None:
    # Given 3 of 4 nodes behind: not a node's fault (a file system, the code)
    reports = [report("ip-10-1-0-1", step=101, idle=90), *[report(f"ip-10-1-0-{i}", step=100, idle=95) for i in (2, 3, 4)]]
    verdict = stall_verdict(CLUSTER, "1001", reports, RULES, T0)
    assert verdict is not None and verdict.suspects == [] and "too many" in verdict.suspects_why


def test_given_the_stall_rule_off_then_no_stall_verdict() -> None:
    assert stall_verdict(CLUSTER, "1001", nodes(2, idle=5000), HangRules(stall_mode="off"), T0) is None


# --- evidence ------------------------------------------------------------------------------------
def test_given_stacks_from_every_node_the_odd_signature_out_is_the_suspect() -> None:
    stacks = [NodeStacks(node=f"ip-10-1-0-{i}", outcome="captured", signature="allreduce") for i in range(1, 8)]
    stacks.append(NodeStacks(node="ip-10-1-0-8", outcome="captured", signature="dataloader"))
    assert from_evidence(stacks, 8)[0] == ["ip-10-1-0-8"]
    # (py-spy absent everywhere: the evidence names none, and says so)
    absent = [NodeStacks(node=f"ip-10-1-0-{i}", outcome="tool_absent") for i in range(1, 5)]
    assert from_evidence(absent, 4) == ([], "stacks from 0 node(s): too few to tell the odd one out")


# --- slowdown ------------------------------------------------------------------------------------
def test_given_a_job_30_percent_slower_than_its_baseline_then_slow_names_the_last_to_arrive() -> None:
    # Given 8 nodes stepping in 2.6 s against a 2.0 s baseline; 7 wait 0.6 s a step for the 8th
    reports = [*nodes(7, step_seconds=2.6, baseline=2.0, wait=0.6), report("ip-10-1-0-9", step_seconds=2.6, baseline=2.0, wait=0.02)]
    (verdict,) = job_verdicts(CLUSTER, "1001", reports, RULES, T0)
    # Then a slow verdict, observed by default, naming that node
    assert (verdict.rule, verdict.mode, verdict.suspects) == ("slow", "observe", ["ip-10-1-0-9"])
    assert "30 % over its baseline of 2.0 s" in verdict.summary
    assert verdict.episode_at == T0 - timedelta(hours=2)  # (one slow verdict per run of the job)


def test_given_a_slowdown_within_the_ratio_or_no_waits_reported_then_no_node_is_named() -> None:
    assert slow_verdict(CLUSTER, "1001", nodes(4, step_seconds=2.3, baseline=2.0), RULES, T0) is None
    verdict = slow_verdict(CLUSTER, "1001", nodes(4, step_seconds=3.0, baseline=2.0), RULES, T0)
    assert verdict is not None and verdict.suspects == [] and "fewer than 3 nodes" in verdict.suspects_why


# --- properties ------------------------------------------------------------------------------------
node_reports = st.lists(
    st.tuples(
        st.integers(0, 500),  # step
        st.floats(0, 4000),  # idle
        st.floats(0, 1200),  # heartbeat age
        st.one_of(st.none(), st.floats(0.1, 120)),  # step seconds
        st.integers(0, 100),  # intervals
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(node_reports)
def test_property_a_verdict_never_blames_more_than_half_the_nodes_and_only_comes_past_its_threshold(raw: list[tuple]) -> None:
    reports = [
        report(f"ip-10-2-0-{i}", step=s, idle=idle, heartbeat_age=hb, step_seconds=sec, intervals=n)
        for i, (s, idle, hb, sec, n) in enumerate(raw)
    ]
    for verdict in job_verdicts(CLUSTER, "1001", reports, RULES, T0):
        assert len(verdict.suspects) <= max(1, len(reports) // 2) and len(verdict.suspects) <= MAX_SUSPECTS
        assert set(verdict.suspects) <= {r.node for r in reports}
        if verdict.rule == "stall":
            assert verdict.observed_seconds > verdict.threshold_seconds - 0.1
            newest = max(r.step_at for r in reports if not r.ended)
            assert (T0 - newest).total_seconds() > stall_threshold([r for r in reports if not r.ended], RULES) - 0.1


@settings(max_examples=200, deadline=None)
@given(st.floats(0.5, 120), st.floats(0, 0.99), st.integers(2, 64))  # (at the threshold itself: a microsecond's rounding decides)
def test_property_a_job_that_stepped_within_its_threshold_is_never_hung(step_seconds: float, share: float, count: int) -> None:
    threshold = max(RULES.stall_floor_seconds, RULES.stall_factor * step_seconds)
    reports = nodes(count, idle=share * threshold, step_seconds=step_seconds)
    assert stall_verdict(CLUSTER, "1001", reports, RULES, T0) is None


# --- what the review found: never a hang of ours when nobody is heard --------------------------------
def test_given_every_reporter_silent_but_not_yet_gone_then_no_stall() -> None:
    # Given a job restarting under the same job id (torchrun --max-restarts, a requeue): its old ranks'
    # items stay, silent for two minutes, and the new ranks have not stepped yet
    reports = nodes(4, idle=400, heartbeat_age=120)
    # Then no verdict: a hung job's reporters go on heartbeating
    assert job_verdicts(CLUSTER, "1001", reports, RULES, T0) == []


def test_given_an_earlier_runs_silent_rows_under_the_same_key_then_the_new_run_keeps_its_startup_allowance() -> None:
    # Given a run killed 10 minutes ago (its row silent since, a 2 s pace), and the job run again under
    # the same key (a requeue, or an EKS job applied again) loading its checkpoint for 3 minutes
    old = report("ip-10-1-0-9", step=500, idle=600, heartbeat_age=600).model_copy(update={"started_at": T0 - timedelta(hours=2)})
    new = [
        report(f"ip-10-1-0-{i}", step=0, idle=180, heartbeat_age=5, step_seconds=None, intervals=0).model_copy(
            update={"started_at": T0 - timedelta(seconds=180)}
        )
        for i in (1, 2, 3)
    ]
    # When the detector decides
    verdicts = job_verdicts(CLUSTER, "1001", [old, *new], HangRules(), T0)
    # Then the old row lends no pace: 180 s into its start-up allowance (600 s), the new run is no stall
    assert verdicts == []
    # And a silent node of the current run still counts (its reporter stopped with it: the suspect)
    silent = new[0].model_copy(update={"heartbeat_at": T0 - timedelta(seconds=400)})
    assert silent in live_reports([old, silent, *new[1:]], HangRules(), T0)
