"""``hyperpod-recovery verdicts list|confirm|reject`` against the sandbox's deployed stack: the
verdicts are Detect Hung Jobs' own (the real function, invoked as its schedule would, reading
progress written to the stack's progress table), the reviews land in the real template's ledger."""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from hyperpod_recovery.adapters.ledger import DynamoLedger
from hyperpod_recovery.adapters.progress import ProgressTable
from hyperpod_recovery.adapters.progress_memory import ProgressMemoryTable
from hyperpod_recovery.models.hangs import RecordedVerdict
from hyperpod_recovery.models.job_nodes import JobNodes
from hyperpod_recovery.models.job_nodes_item import item as job_nodes_item
from hyperpod_recovery.models.progress import ProgressReport, progress_item
from hyperpod_recovery_cli.verdicts import verdict_id
from sandbox.aws import SandboxAWS
from sandbox.report import notifications_sent
from sandbox.runner import DrillRunner
from sandbox.scenario import load_scenario
from tests.conftest import EVENTS
from tests.fakes import watched
from tests.integration.test_oncall_cli import Terminal, cli, ledger

pytestmark = pytest.mark.sandbox
DETECTOR = "DetectHungJobsFunction"


@contextmanager
def stack(tmp_path: Path, **parameters: str) -> Iterator[tuple[DrillRunner, SandboxAWS]]:
    runner = DrillRunner(load_scenario(EVENTS / "drills" / "default.json"), log_path=tmp_path / "lambda.log")
    with runner.deployed(overrides={"HangStallMode": "observe"} | parameters) as aws:
        yield runner, aws


def progress(runner: DrillRunner, job: str, nodes: int = 2, *, idle: float = 0.0, **fields: Any) -> list[ProgressReport]:
    """What the job's nodes report now: their last step ``idle`` seconds ago."""
    now = runner.virtual_now()
    values: dict[str, Any] = {
        "step": 100,
        "step_at": now - timedelta(seconds=idle),
        "heartbeat_at": now - timedelta(seconds=5),
        "started_at": now - timedelta(hours=2),
        "intervals_seen": 50,
        "step_seconds": 2.0,
    }
    return [ProgressReport(job=job, node=f"ip-10-1-0-{i}", **(values | fields)) for i in range(1, nodes + 1)]


def detect(runner: DrillRunner, *reports: ProgressReport) -> dict[str, int]:
    """The training nodes write their progress; Detect Hung Jobs runs once, as its schedule runs it."""
    aws = runner.aws
    dynamodb = aws.client("dynamodb")
    for report in reports:
        dynamodb.put_item(TableName=aws.progress_table, Item=progress_item(report))
    # The orchestrator runs every reporting job on the nodes it reports from (the controller agent's
    # snapshot), and the detector has watched them all along (its memory): what these tests are not about.
    running = ProgressTable(aws.progress_table, dynamodb=dynamodb).running_jobs()
    nodes = {job: sorted(r.node for r in rows) for job, rows in running.items()}
    snapshot = JobNodes(source="slurm", taken_at=runner.virtual_now(), jobs=nodes)
    dynamodb.put_item(TableName=aws.ledger_table, Item=job_nodes_item(snapshot, "llm-train"))
    memory = ProgressMemoryTable(aws.ledger_table, dynamodb=dynamodb)
    known = memory.recall("llm-train", sorted(running))
    memory.remember("llm-train", [watched(job, rows) for job, rows in running.items() if job not in known])
    answer: dict[str, int] = json.loads(aws.client("lambda").invoke(FunctionName=DETECTOR, Payload=b"{}")["Payload"].read())
    return answer


def hung(runner: DrillRunner, job: str = "1001") -> RecordedVerdict:
    """A stall the detector decides and keeps: the job silent for 5 minutes."""
    detect(runner, *progress(runner, job, idle=300))
    (kept,) = [v for v in ledger(runner.aws).verdicts("llm-train") if v.verdict.job == job]
    return kept


def slow(runner: DrillRunner, job: str = "2002") -> RecordedVerdict:
    """A slowdown: steps of 2.6 s against a 2.0 s baseline."""
    detect(runner, *progress(runner, job, nodes=4, step_seconds=2.6, baseline_step_seconds=2.0, wait_seconds=0.1))
    (kept,) = [v for v in ledger(runner.aws).verdicts("llm-train") if v.verdict.job == job]
    return kept


def reviewed(aws: SandboxAWS, kept: RecordedVerdict) -> RecordedVerdict:
    verdict = kept.verdict
    found = DynamoLedger(aws.ledger_table, dynamodb=aws.client("dynamodb")).verdict(
        "llm-train", verdict.rule, verdict.job, verdict.episode_at
    )
    assert found is not None
    return found


# --- list ----------------------------------------------------------------------------------------
def test_given_a_stall_and_a_slowdown_then_list_shows_each_newest_first_with_what_it_saw_and_would_do_and_json_parses(
    tmp_path: Path,
) -> None:
    with stack(tmp_path) as (runner, aws):
        # Given the detector's stall of job 1001, then a minute later its slowdown of job 2002
        stall = hung(runner)
        runner.advance(60)
        slowdown = slow(runner)
        # When on-call lists the verdicts
        code, printed, _ = cli(runner, "verdicts", "list", "--stack", "sandbox")
        # Then both are there, newest first, by id, with what was seen against the threshold and what it would have done
        assert code == 0 and "2 verdict(s)" in printed
        rows = [line for line in printed.splitlines() if line.startswith((verdict_id(stall.verdict), verdict_id(slowdown.verdict)))]
        assert [row.split()[0] for row in rows] == [verdict_id(slowdown.verdict), verdict_id(stall.verdict)]
        assert "slow" in rows[0] and "observe" in rows[0] and "step 2.60s > 2.40s, baseline 2.00s" in rows[0]
        # (45 s: the 20 s floor raised to a 30 s reporter's write interval + 15 s, domain/hangs)
        assert "silent 300s > 45s" in rows[1] and "would capture the hang's evidence, cancel job 1001" in rows[1] and "open" in rows[1]
        # And per rule: counted, none reviewed, precision n/a, the enforce bar not met
        assert "stall (mode observe): 1 verdicts, 0 confirmed, 0 rejected, 1 open; precision n/a" in printed
        assert "slow (mode observe): 1 verdicts" in printed and "enforce bar (20 reviewed at >= 90 %): not yet" in printed
        # And --json is every record with its id, and the counts, for scripts
        code, printed, _ = cli(runner, "verdicts", "list", "--stack", "sandbox", "--json", "--rule", "slow")
        document = json.loads(printed)
        assert code == 0 and [v["id"] for v in document["verdicts"]] == [verdict_id(slowdown.verdict)]
        assert RecordedVerdict.model_validate({k: v for k, v in document["verdicts"][0].items() if k != "id"}) == slowdown
        assert document["rules"] == {
            "slow": {
                "mode": "observe",
                "verdicts": 1,
                "confirmed": 0,
                "rejected": 0,
                "open": 1,
                "precision": None,
                "meets_enforce_bar": False,
            }
        }
        assert all("hung" not in name for name in aws.running_executions())  # observe started nothing


def test_given_an_enforced_stall_then_list_names_its_recovery_and_the_incident_name_confirms_it(tmp_path: Path) -> None:
    with stack(tmp_path, HangStallMode="enforce") as (runner, aws):
        stall = hung(runner)
        assert stall.execution == f"hpj-{verdict_id(stall.verdict)}"
        code, printed, _ = cli(runner, "verdicts", "list", "--stack", "sandbox", "--rule", "stall")
        assert code == 0 and f"started {stall.execution}" in printed and "stall (mode enforce)" in printed
        # When on-call confirms it by the incident's name
        code, printed, _ = cli(runner, "verdicts", "confirm", stall.execution, "--stack", "sandbox", "--reason", "NCCL hang", "--yes")
        # Then the verdict is confirmed
        assert code == 0 and reviewed(aws, stall).review == "confirmed"


def test_given_a_verdict_decided_before_the_window_then_list_leaves_it_out_and_its_counts_too(tmp_path: Path) -> None:
    with stack(tmp_path) as (runner, _):
        old = hung(runner, "1001")
        # (two hours on: the window below is one; every scheduled sweep between runs, so days would cost a minute)
        runner.advance(2 * 3600)
        new = hung(runner, "1002")
        code, printed, _ = cli(runner, "verdicts", "list", "--stack", "sandbox", "--since", "1h")
        assert code == 0 and verdict_id(new.verdict) in printed and verdict_id(old.verdict) not in printed
        assert "stall (mode observe): 1 verdicts" in printed
        code, printed, _ = cli(runner, "verdicts", "list", "--stack", "sandbox")  # (30 days)
        assert verdict_id(old.verdict) in printed and "stall (mode observe): 2 verdicts" in printed


# --- confirm / reject ----------------------------------------------------------------------------
def test_given_an_open_verdict_when_confirmed_at_the_terminal_then_it_is_reviewed_audited_and_counted(tmp_path: Path) -> None:
    with stack(tmp_path) as (runner, aws):
        stall = hung(runner)
        name = verdict_id(stall.verdict)
        # When on-call confirms it, typing yes
        code, printed, _ = cli(
            runner,
            "verdicts",
            "confirm",
            name,
            "--stack",
            "sandbox",
            "--reason",
            "py-spy: all ranks in allreduce",
            "--by",
            "alice",
            stdin=Terminal("yes\n"),
        )
        # Then the verdict is confirmed by alice (with her AWS identity), when, and why; nothing else of it changed
        assert code == 0 and f"{name}: confirmed by alice (arn:aws:sts::" in printed
        after = reviewed(aws, stall)
        assert (after.review, after.review_note, after.reviewed_at) == ("confirmed", "py-spy: all ranks in allreduce", runner.virtual_now())
        assert after.reviewed_by is not None and after.reviewed_by.startswith("alice (arn:aws:sts::")
        assert after.model_copy(update={"review": "open", "reviewed_by": None, "reviewed_at": None, "review_note": ""}) == stall
        # And the change is in the audit log
        (entry,) = ledger(aws).audit_log("llm-train")
        assert (entry.action, entry.target, entry.reason) == ("verdict confirm", name, "py-spy: all ranks in allreduce")
        assert entry.detail == "stall verdict (observe) of job 1001; was open" and entry.by.startswith("alice (arn:aws:sts")
        # And the list shows who confirmed it, and --open leaves it out while the counts keep it
        code, printed, _ = cli(runner, "verdicts", "list", "--stack", "sandbox")
        assert "confirmed by alice" in printed and "stall (mode observe): 1 verdicts, 1 confirmed, 0 rejected, 0 open" in printed
        code, printed, _ = cli(runner, "verdicts", "list", "--stack", "sandbox", "--open")
        assert "0 verdict(s)" in printed and name not in printed and "1 confirmed" in printed


def test_given_reviews_of_five_verdicts_then_the_rules_precision_is_measured(tmp_path: Path) -> None:
    with stack(tmp_path) as (runner, _):
        # Given five stalls the detector decided in one tick
        detect(runner, *[report for job in ("1001", "1002", "1003", "1004", "1005") for report in progress(runner, job, idle=300)])
        ids = sorted(verdict_id(v.verdict) for v in ledger(runner.aws).verdicts("llm-train"))
        assert len(ids) == 5
        # When on-call confirms four and rejects one (a long evaluation the script did not declare)
        for name in ids[:4]:
            assert cli(runner, "verdicts", "confirm", name, "--stack", "sandbox", "--reason", "hung", "--yes")[0] == 0
        code, printed, _ = cli(runner, "verdicts", "reject", ids[4], "--stack", "sandbox", "--reason", "undeclared eval", "--yes")
        # Then the rule's precision is 80 %, said after the review and in the list
        assert code == 0 and "precision 80 % (4/5)" in printed
        code, printed, _ = cli(runner, "verdicts", "list", "--stack", "sandbox", "--json")
        assert json.loads(printed)["rules"]["stall"] | {"mode": "-"} == {
            "mode": "-",
            "verdicts": 5,
            "confirmed": 4,
            "rejected": 1,
            "open": 0,
            "precision": 0.8,
            "meets_enforce_bar": False,
        }


def test_given_a_reviewed_verdict_then_the_same_review_changes_nothing_and_the_other_needs_force(tmp_path: Path) -> None:
    with stack(tmp_path) as (runner, aws):
        stall = hung(runner)
        name = verdict_id(stall.verdict)
        assert cli(runner, "verdicts", "confirm", name, "--stack", "sandbox", "--reason", "hung", "--yes", "--by", "bob")[0] == 0
        # When it is confirmed again: already so, nothing changed
        code, printed, _ = cli(runner, "verdicts", "confirm", name, "--stack", "sandbox", "--reason", "again", "--yes")
        assert code == 0 and "already confirmed by bob" in printed and "nothing changed" in printed
        # When it is rejected without --force: refused, the review stands
        code, _, err = cli(runner, "verdicts", "reject", name, "--stack", "sandbox", "--reason", "was an eval", "--yes")
        assert code == 1 and "already confirmed by bob" in err and "add --force" in err
        assert reviewed(aws, stall).review == "confirmed"
        # When it is rejected with --force: rejected, and the audit log keeps both reviews
        code, printed, _ = cli(runner, "verdicts", "reject", name, "--stack", "sandbox", "--reason", "was an eval", "--yes", "--force")
        assert code == 0 and reviewed(aws, stall).review == "rejected"
        # (both in the same second of the drill's clock: the audit log orders them by second only)
        assert sorted((e.action, e.detail.rsplit("; ", 1)[1][:17]) for e in ledger(aws).audit_log("llm-train")) == [
            ("verdict confirm", "was open"),
            ("verdict reject", "was confirmed by "),
        ]


class ReviewedMeanwhile(Terminal):
    """A terminal at which, while the question waits, someone else reviews the verdict."""

    def __init__(self, aws: SandboxAWS, kept: RecordedVerdict) -> None:
        super().__init__("yes\n")
        self.aws, self.kept = aws, kept

    def readline(self, size: int | None = -1) -> str:
        other = self.kept.model_copy(update={"review": "rejected", "reviewed_by": "carol", "review_note": "not hung"})
        assert ledger(self.aws).review_verdict(self.kept, other)
        return super().readline()


def test_given_a_review_made_while_the_question_waits_then_the_confirm_is_refused_and_that_review_stands(tmp_path: Path) -> None:
    with stack(tmp_path) as (runner, aws):
        stall = hung(runner)
        code, _, err = cli(
            runner,
            "verdicts",
            "confirm",
            verdict_id(stall.verdict),
            "--stack",
            "sandbox",
            "--reason",
            "r",
            stdin=ReviewedMeanwhile(aws, stall),
        )
        assert code == 1 and "changed since it was read" in err and "nothing written" in err
        after = reviewed(aws, stall)
        assert (after.review, after.reviewed_by) == ("rejected", "carol") and ledger(aws).audit_log("llm-train") == []


# --- refusals ------------------------------------------------------------------------------------
def test_given_no_terminal_and_no_yes_or_a_no_then_nothing_is_reviewed(tmp_path: Path) -> None:
    with stack(tmp_path) as (runner, aws):
        stall = hung(runner)
        name = verdict_id(stall.verdict)
        code, _, err = cli(runner, "verdicts", "reject", name, "--stack", "sandbox", "--reason", "r")
        assert code == 2 and "add --yes to confirm" in err
        code, printed, _ = cli(runner, "verdicts", "reject", name, "--stack", "sandbox", "--reason", "r", stdin=Terminal("no\n"))
        assert code == 1 and "nothing changed" in printed
        assert reviewed(aws, stall).review == "open" and ledger(aws).audit_log("llm-train") == []


def test_given_an_id_no_verdict_has_then_review_refuses_and_says_how_to_find_them(tmp_path: Path) -> None:
    with stack(tmp_path) as (runner, aws):
        stall = hung(runner)
        other_episode = f"1001-hung-{int(stall.verdict.episode_at.timestamp()) + 1}"
        code, _, err = cli(runner, "verdicts", "confirm", other_episode, "--stack", "sandbox", "--reason", "r", "--yes")
        assert code == 1 and f"no verdict {other_episode}" in err and "hyperpod-recovery verdicts list --stack sandbox" in err
        assert "Traceback" not in err and ledger(aws).audit_log("llm-train") == []


@pytest.mark.parametrize(
    ("argv", "said"), [(["1001-stall-5"], "not a verdict id"), (["1001-hung-5", "--reason", " "], "--reason is empty")]
)
def test_given_a_malformed_id_or_a_blank_reason_then_review_refuses_before_aws(tmp_path: Path, argv: list[str], said: str) -> None:
    with stack(tmp_path) as (runner, _):
        code, _, err = cli(runner, "verdicts", "confirm", *argv[:1], "--stack", "sandbox", "--yes", *(argv[1:] or ["--reason", "r"]))
    assert code == 2 and said in err


# --- HyperPod's own detectors, imported --------------------------------------------------------------
LOG_GROUP = "/aws/sagemaker/Clusters/llm-train/a1b2c3d4e5f6"
IMPORTER = "ImportHyperPodHangsFunction"


def dated(subscription: bytes, now: datetime) -> bytes:
    """The subscription's batch with its events a minute old by the stack's clock (older or later
    ones are refused like every other event: tests/unit/test_import_hyperpod_hangs.py)."""
    envelope = json.loads(subscription)
    batch = json.loads(gzip.decompress(base64.b64decode(envelope["awslogs"]["data"])))
    for n, event in enumerate(batch["logEvents"]):
        event["timestamp"] = int((now - timedelta(seconds=60 - n)).timestamp() * 1000)
    envelope["awslogs"]["data"] = base64.b64encode(gzip.compress(json.dumps(batch).encode())).decode()
    return json.dumps(envelope).encode()


def test_given_hyperpods_own_hang_events_then_list_shows_them_as_the_detector_said_and_confirm_counts_them(tmp_path: Path) -> None:
    with stack(tmp_path, HyperPodHangLogGroup=LOG_GROUP) as (runner, aws):
        # Given the stack imports HyperPod's hang events, and its subscription hands the sample batch to the importer
        sample = dated((EVENTS / "cloudwatch-logs" / "hyperpod_hang_subscription.json").read_bytes(), runner.virtual_now())
        answer = json.loads(aws.client("lambda").invoke(FunctionName=IMPORTER, Payload=sample)["Payload"].read())
        assert answer == {"hyperpod_hang_recorded": 2, "verdict_noticed": 2}
        kept = {v.verdict.job: v for v in ledger(aws).verdicts("llm-train")}
        cancelled = kept["1001"]
        name = verdict_id(cancelled.verdict)
        assert name == f"1001-hyperpod_hang-{int(cancelled.verdict.episode_at.timestamp())}"
        # And each was told once, its notice giving the very command that reviews it
        notices = notifications_sent(aws)
        assert len(notices) == 2
        (told,) = [n for n in notices if n["subject"].endswith("observed hyperpod_hang job 1001")]
        assert f"`hyperpod-recovery verdicts confirm {name} --stack sandbox --reason 'what you checked'`" in told["message"]
        # When on-call lists the verdicts
        code, printed, _ = cli(runner, "verdicts", "list", "--stack", "sandbox")
        # Then each shows the detector's rule and what HyperPod did, no step of ours, and the rule's counts without an enforce bar
        (row,) = [line for line in printed.splitlines() if line.startswith(name)]
        assert "hyperpod_hang" in row and "observe" in row and "default: HyperPod cancelled it" in row and " - " in row
        assert "hyperpod_hang (mode observe): 2 verdicts, 0 confirmed, 0 rejected, 2 open; precision n/a" in printed
        assert "enforce: not offered for an imported detector" in printed
        assert "hpto_hang" not in printed  # (a Slurm stack: the training operator's rules are not shown)
        # When on-call confirms it by its id
        code, printed, _ = cli(
            runner, "verdicts", "confirm", name, "--stack", "sandbox", "--reason", "the job was stuck in NCCL", "--by", "alice", "--yes"
        )
        # Then it is confirmed, audited, and counted in the rule's precision
        assert code == 0 and reviewed(aws, cancelled).review == "confirmed"
        (entry,) = ledger(aws).audit_log("llm-train")
        assert entry.detail == "hyperpod_hang verdict (observe) of job 1001; was open"
        assert "the hyperpod_hang rule over the last 30d: hyperpod_hang (mode observe): 2 verdicts, 1 confirmed" in printed
        assert all("1001" not in e for e in aws.running_executions())  # (observe-only: nothing started)
