"""The pieces of ``hyperpod-recovery verdicts``: a verdict's id and what it names, a rule's measured
precision, and how a verdict reads in the list."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from hyperpod_recovery.domain.intake.execution_names import hang_execution_name
from hyperpod_recovery.models.hangs import HangRule, HangVerdict, ImportedDetection, RecordedVerdict, VerdictReview
from hyperpod_recovery_cli.inputs import InputRefused
from hyperpod_recovery_cli.verdicts import (
    ENFORCE_REVIEWED,
    MIN_REVIEWED,
    VerdictRef,
    action_text,
    observed_text,
    parse_verdict_id,
    review_text,
    tally,
    tally_text,
    verdict_id,
)
from tests.fakes import CLUSTER, T0


def verdict(rule: HangRule = "stall", job: str = "1001", **fields: Any) -> HangVerdict:
    values: dict[str, Any] = {
        "rule": rule,
        "mode": "observe",
        "cluster": CLUSTER,
        "job": job,
        "decided_at": T0,
        "episode_at": T0 - timedelta(seconds=90, microseconds=250_000),
        "step": 100,
        "last_progress_at": T0 - timedelta(seconds=90),
        "threshold_seconds": 60.0,
        "observed_seconds": 90.0,
        "summary": "job 1001: no progress for 90 s",
    }
    return HangVerdict.model_validate(values | fields)


def recorded(review: VerdictReview = "open", rule: HangRule = "stall", **fields: Any) -> RecordedVerdict:
    return RecordedVerdict(verdict=verdict(rule), action="observed: would cancel job 1001", review=review, **fields)


# --- the id ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("rule", "job"), [("stall", "1001"), ("slow", "1001_7"), ("stall", "team-a/llama-7b-run-2")])
def test_given_a_verdict_then_its_id_is_its_incident_name_without_hpj_and_names_it_back(rule: HangRule, job: str) -> None:
    given = verdict(rule, job)
    # When its id is made and read back
    text = verdict_id(given)
    ref = parse_verdict_id(text)
    # Then it is the hang incident's execution name without hpj-, and names the same rule, job and episode
    assert "hpj-" + text == hang_execution_name(job, given.reason, given.episode_at)
    assert ref == VerdictRef(rule, job, int(given.episode_at.timestamp()))
    assert ref.episode_at == given.episode_at.replace(microsecond=0)  # (the ledger's key counts whole seconds)


@pytest.mark.parametrize(("rule", "job"), [("stall", "1001"), ("slow", "1001_7")])
def test_given_a_slurm_jobs_verdict_then_its_incident_name_names_it_too(rule: HangRule, job: str) -> None:
    # (an EKS job's verdict starts no recovery, observed only: hpj- before it is its namespace's)
    given = verdict(rule, job)
    assert parse_verdict_id(hang_execution_name(job, given.reason, given.episode_at)) == parse_verdict_id(verdict_id(given))


def test_an_eks_job_in_a_namespace_called_hpj_is_not_mistaken_for_an_incident_name() -> None:
    assert parse_verdict_id("hpj-x/train-slow-1773478500") == VerdictRef("slow", "hpj-x/train", 1773478500)
    assert parse_verdict_id("hpj-1001_2-hung-1773478500") == VerdictRef("stall", "1001_2", 1773478500)


@pytest.mark.parametrize(
    "text",
    [
        "1001-stall-1773478500",
        "1001-hung-",
        "hung-1773478500",
        "1001-hung-17734785a0",
        "Team/Job-hung-1",
        "1001-hung-1234567890123",
        "x" * 500,
    ],
)
def test_given_what_is_not_a_verdict_id_then_it_is_refused_saying_what_one_looks_like(text: str) -> None:
    with pytest.raises(InputRefused, match="verdict"):
        parse_verdict_id(text)


# --- precision -------------------------------------------------------------------------------------
def reviews(confirmed: int, rejected: int, open_: int = 0, rule: HangRule = "slow") -> list[RecordedVerdict]:
    return (
        [recorded("confirmed", rule)] * confirmed
        + [recorded("rejected", rule)] * rejected
        + [recorded("open", rule)] * open_
        + [recorded("rejected", "stall" if rule == "slow" else "slow")] * 3  # another rule's: never counted
    )


@pytest.mark.parametrize(
    ("confirmed", "rejected", "precision", "meets"),
    [
        (MIN_REVIEWED - 1, 0, None, False),  # too few reviewed to say
        (4, 1, 0.8, False),
        (9, 1, 0.9, False),  # the precision, but not yet the reviews
        (18, 2, 0.9, True),
        (17, 3, 0.85, False),
        (ENFORCE_REVIEWED, 0, 1.0, True),
    ],
)
def test_a_rules_precision_is_confirmed_over_reviewed_and_n_a_below_the_minimum(
    confirmed: int, rejected: int, precision: float | None, meets: bool
) -> None:
    # Given a rule's verdicts, some open, and another rule's
    counted = tally("slow", reviews(confirmed, rejected, open_=4))
    # Then open verdicts count as verdicts but not in the precision, and the other rule's not at all
    assert (counted.verdicts, counted.confirmed, counted.rejected, counted.open) == (confirmed + rejected + 4, confirmed, rejected, 4)
    assert counted.precision == (pytest.approx(precision) if precision is not None else None)
    assert counted.meets_enforce_bar is meets


def test_a_rules_counts_say_n_a_and_the_enforce_bar_only_for_a_rule_in_observe() -> None:
    few = tally("slow", reviews(2, 1, open_=1))
    assert "precision n/a (3 reviewed, 5 needed)" in tally_text(few, "observe") and "enforce bar" in tally_text(few, "observe")
    many = tally("slow", reviews(18, 2))
    assert tally_text(many, "observe").endswith("precision 90 % (18/20); enforce bar (20 reviewed at >= 90 %): met")
    assert "enforce bar" not in tally_text(many, "enforce")


# --- a row ---------------------------------------------------------------------------------------
def test_a_verdict_reads_as_what_was_seen_against_its_threshold_what_was_done_and_who_reviewed_it() -> None:
    assert observed_text(verdict()) == "silent 90s > 60s"
    slow = verdict("slow", observed_seconds=2.6, threshold_seconds=2.4, baseline_step_seconds=2.0)
    assert observed_text(slow) == "step 2.60s > 2.40s, baseline 2.00s"
    assert action_text(recorded()) == "would cancel job 1001"
    started = RecordedVerdict(verdict=verdict(), action="started job recovery hpj-1001-hung-1", execution="hpj-1001-hung-1")
    assert action_text(started) == "started hpj-1001-hung-1"
    assert review_text(recorded()) == "open"
    assert review_text(recorded("rejected", reviewed_by="alice (arn:aws:sts::1:assumed-role/x/alice)")) == "rejected by alice"


# --- HyperPod's own detectors, imported --------------------------------------------------------------
def imported(rule: HangRule, job: str, taken: str, detector_rule: str = "") -> HangVerdict:
    source = "hyperpod_hang_detection" if rule == "hyperpod_hang" else "hyperpod_training_operator"
    return verdict(
        rule,
        job,
        step=0,
        threshold_seconds=0,
        observed_seconds=0,
        imported=ImportedDetection(source=source, detector_rule=detector_rule, taken=taken),
    )


@pytest.mark.parametrize(("rule", "job"), [("hyperpod_hang", "1001"), ("hpto_hang", "team-a/llama"), ("hpto_slow", "team-a/x-slow")])
def test_given_an_imported_verdict_then_its_id_names_its_rule_and_names_it_back(rule: HangRule, job: str) -> None:
    given = imported(rule, job, "restarted")
    text = verdict_id(given)
    assert text == f"{job}-{rule}-{int(given.episode_at.timestamp())}"
    assert parse_verdict_id(text) == VerdictRef(rule, job, int(given.episode_at.timestamp()))


def test_an_imported_verdict_reads_as_what_its_detector_said_and_hyperpod_did_and_earns_no_enforce() -> None:
    assert observed_text(imported("hyperpod_hang", "1001", "cancel")) == "HyperPod cancelled it"
    assert observed_text(imported("hyperpod_hang", "1001", "")) == "HyperPod did not say what it did"
    assert observed_text(imported("hpto_hang", "team-a/llama", "restarted", "JobHangingDetection")) == (
        "JobHangingDetection: the operator restarted it"
    )
    counted = tally("hpto_slow", [RecordedVerdict(verdict=imported("hpto_slow", "a/b", "restarted"), action="x", review="confirmed")] * 20)
    assert counted.meets_enforce_bar and tally_text(counted, "observe").endswith("; enforce: not offered for an imported detector")
