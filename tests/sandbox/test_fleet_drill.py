"""The fleet drill's machinery (not its figures): a trace runs through the real pipeline in the sandbox,
and the report accounts for every failure, every incident and the pipeline's own limits; on Slurm and
on EKS alike (each test runs on both: the jobs' copies are Slurm jobs, or PyTorchJob objects)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from itertools import takewhile
from pathlib import Path
from typing import Any, Literal

import pytest

from hyperpod_recovery.models.job_events import STATE_REST_BUDGET
from hyperpod_recovery_cli.main import main
from hyperpod_recovery_cli.planner.model import GoodputPlan
from sandbox.fleet.runner import FleetPlan, FleetRunner, JobMix
from sandbox.fleet.trace import NCCL_TIMEOUT_SECONDS, Failure, Trace, TraceSpec, generate
from tests.conftest import ROOT

pytestmark = pytest.mark.sandbox

GOODPUT_PHASES = {"detect", "cordon", "replace", "rejoin", "health_gate", "restart"}
ORCHESTRATORS = ("slurm", "eks")


def original_copy(runner: FleetRunner, job: str) -> str:
    """The copy id (a Slurm job id; an EKS job object's uid) of the job as it was first submitted."""
    assert runner.fleet_training is not None
    return next(c.copy for c in runner.fleet_training.copies.values() if c.root == job and c.original)


@pytest.fixture(scope="module", params=ORCHESTRATORS)
def bench_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str]:
    """``python bench/fleet.py --nodes 256 --days 3 [--orchestrator eks]``, as a user runs it from a clone."""
    out = tmp_path_factory.mktemp("fleet")
    command = [sys.executable, "bench/fleet.py", "--nodes", "256", "--days", "3", "--seed", "0", "--out", str(out)]
    command += ["--orchestrator", request.param]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    (path,) = out.glob("fleet-256n-3d-seed0.json")
    return json.loads(path.read_text()), done.stdout


def test_given_3_days_of_256_nodes_then_every_failure_is_handled_by_an_execution(bench_run: tuple[dict[str, Any], str]) -> None:
    report, _ = bench_run
    assert report["trace"]["failures"] >= 1
    trace = report["trace"]
    delivered = trace["failures"] - trace["job_faults_on_a_job_not_running"] - trace["job_faults_not_sent"]
    # (a hang's incident may start a nested node check of its suspect: an incident more)
    assert delivered <= report["incidents"]["total"] <= delivered + report["hangs"]["recoveries_started"]
    assert report["hangs"]["silent_hangs_found"] == trace["by_remedy"].get("hang", 0) - report["hangs"]["silent_hangs_on_a_job_not_running"]
    assert "unrecorded" not in " ".join(report["incidents"]["by_outcome"])
    assert report["drill"]["ledger_at_end"] == {"nodes_reserved": [], "open_claims": [], "incidents_holding": [], "locks_held": []}
    # (never two copies of one job, by the orchestrator's own record of when each copy ran)
    assert report["plan"]["orchestrator"] in ORCHESTRATORS and report["safety"]["second_copies"] == []
    assert report["safety"]["orchestrator_second_copies"] == []


def test_given_3_days_of_256_nodes_then_every_hit_job_runs_again_and_its_downtime_is_decomposed(
    bench_run: tuple[dict[str, Any], str],
) -> None:
    report, _ = bench_run
    assert report["hits"] and all(hit["restarted_at"] is not None for hit in report["hits"])
    for hit in report["hits"]:
        parts = hit["detection"] + hit["provisioning_wait"] + hit["pipeline"]
        assert parts == pytest.approx(hit["downtime"], abs=0.01)
        assert 0 <= hit["lost_work"] <= report["plan"]["checkpoint_interval_seconds"]
    (job,) = report["jobs"]
    assert 0 < job["ettr"] < 1 and not job["not_running_at_end"]


def test_given_a_fleet_report_when_the_goodput_planner_reads_it_then_it_plans_from_the_runs_figures(
    bench_run: tuple[dict[str, Any], str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the report of a fleet run, as bench/fleet.py wrote it
    report = tmp_path / "fleet.json"
    report.write_text(json.dumps(bench_run[0]))
    # When `hyperpod-recovery goodput --from` reads it
    assert main(["goodput", "--from", str(report), "--json"]) == 0
    plan = GoodputPlan.model_validate_json(capsys.readouterr().out)
    # Then the cluster, the failures and the measured phases are the run's, each saying so
    inputs = plan.inputs
    assert inputs.nodes.value == 256 and inputs.nodes.provenance == "measured"
    assert inputs.failure_rate.node_days == 768 and inputs.failure_rate.failures == bench_run[0]["trace"]["failures"]
    assert set(inputs.phases_seconds) == GOODPUT_PHASES
    assert inputs.phases_seconds["rejoin"].provenance == "measured" and inputs.phases_seconds["restart"].provenance == "given"
    assert 0 < plan.ettr.ettr < 1


def test_the_fleet_report_and_the_planner_on_its_inputs_print_the_same_ettr(
    bench_run: tuple[dict[str, Any], str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a fleet run as bench/fleet.py printed it, and its report
    report, printed = bench_run
    path = tmp_path / "fleet.json"
    path.write_text(json.dumps(report))
    # When `hyperpod-recovery goodput --from` plans from the report's inputs
    assert main(["goodput", "--from", str(path)]) == 0
    planner = capsys.readouterr().out
    # Then both print the same ETTR line, to the printed precision, and the same changes with what each buys
    (fleet_ettr,) = re.findall(r"ETTR [0-9.]+ % \(Daly\).*?recovery [0-9.]+ %", printed)
    (planner_ettr,) = re.findall(r"ETTR [0-9.]+ % \(Daly\).*?recovery [0-9.]+ %", planner)
    assert fleet_ettr == planner_ettr
    assert changes_said(printed) == changes_said(planner)
    # And the report ends with what to change, not a raw dict
    assert "{'" not in printed.split("the goodput planner", 1)[1]


def changes_said(printed: str) -> list[str]:
    """The "what to change" block's lines, as printed: its heading, then its indented lines."""
    heading, *rest = ("what to change" + printed.split("what to change", 1)[1]).splitlines()
    return [heading, *takewhile(lambda line: line.startswith("  "), rest)]


def test_given_a_fleet_run_then_the_limits_and_costs_are_measured(bench_run: tuple[dict[str, Any], str]) -> None:
    report, printed = bench_run
    limits = report["limits"]
    assert 0 < limits["largest_dynamodb_item_bytes"] < limits["dynamodb_item_limit_bytes"]
    assert 0 < limits["largest_state_payload_bytes"] < limits["state_payload_limit_bytes"]
    assert report["cost_per_day"]["state_transitions"] > 0 and report["cost_per_day"]["lambda_invocations"] > 0
    assert report["executions"]["peak_concurrent"] >= 1
    sections = ("ETTR per job", "job downtime per hit", "pages to a human", "largest DynamoDB item", "the goodput planner")
    sections += ("what to change",)
    for section in sections:
        assert section in printed
    if report["plan"]["orchestrator"] == "eks":
        # (Find Failed Jobs lists the jobs every minute: run where a job failed, the others counted)
        cost = report["cost_per_day"]
        assert cost["quiet_job_polls_counted_not_run"] > 0.9 * 3 * 1440 and cost["kubernetes_calls"] >= 1440
        assert "Kubernetes API calls" in printed and "quiet polls of Find Failed Jobs" in printed


@pytest.mark.parametrize("orchestrator", ORCHESTRATORS)
def test_given_racks_reboots_failed_gates_and_job_faults_then_each_path_runs_through_the_pipeline(
    tmp_path: Path, orchestrator: Literal["slurm", "eks"]
) -> None:
    # Given a dense trace on 64 nodes: every kind of failure the generator draws
    spec = TraceSpec(
        nodes=64,
        days=2,
        seed=22,
        rate_per_1000_node_days=60,
        correlated_share=0.15,
        rack_size=8,
        gate_fail_share=0.3,
        reboot_fail_share=0.5,
    )
    trace = generate(spec)
    remedies = {f.remedy for f in trace.failures}
    assert {"reboot", "replace", "job"} <= remedies and any(f.correlated for f in trace.failures)
    assert any(f.gate_fails for f in trace.failures)
    plan = FleetPlan(nodes=64, days=2, mix=JobMix.parse("4x16", 64), spares=8, orchestrator=orchestrator)
    # When it runs
    report = FleetRunner(plan, trace, tmp_path / "fleet.log").run_fleet()
    # Then every failure reached the pipeline or was a job fault on a job already down
    delivered = report["trace"]["failures"] - report["trace"]["job_faults_on_a_job_not_running"]
    assert report["incidents"]["total"] >= delivered
    assert any(key.startswith("job:") for key in report["incidents"]["by_outcome"])
    assert report["drill"]["api_calls"].get("sagemaker.BatchRebootClusterNodes", 0) >= 1
    assert len(report["jobs"]) == 4 and all(0 < job["ettr"] <= 1 for job in report["jobs"])
    assert report["safety"]["second_copies"] == []
    assert report["safety"]["orchestrator_second_copies"] == []


@pytest.mark.parametrize("orchestrator", ORCHESTRATORS)
def test_given_one_job_on_more_than_1000_nodes_then_node_and_job_faults_are_recovered_without_a_page(
    tmp_path: Path, orchestrator: Literal["slurm", "eks"]
) -> None:
    """Found by the 2,048-node, one-job run: every cordon failed in the agent (the job's 2,048 names
    passed a bound of 1,000), then Check Job Nodes did, and a job incident's record was 67 KB."""
    # Given one job on all 1,100 nodes (2 spares), with node faults and job faults on it
    # (no silent hang here: the next test has one)
    trace = generate(TraceSpec(nodes=1100, days=2, seed=0, hang_share=0.0))
    assert {"replace", "job"} <= {f.remedy for f in trace.failures}
    plan = FleetPlan(nodes=1100, days=2, mix=JobMix.parse("1", 1100), spares=2, orchestrator=orchestrator)
    # When the trace runs through the pipeline
    runner = FleetRunner(plan, trace, tmp_path / "fleet.log")
    report = runner.run_fleet()
    # Then every incident recovered, nobody was paged, and the job runs again after every hit
    outcomes = report["incidents"]["by_outcome"]
    assert set(outcomes) == {"node:recovered", "job:recovered"}, outcomes
    # And a node's fault, which stalls the job's other ranks until the node's incident ends it, is left
    # to that incident by every tick that sees the stall: no second recovery told the chat it did nothing.
    # (Whether a tick falls inside that stall depends on seconds: on Slurm this trace has such ticks; on
    # EKS the re-created copy's pods start 5 s after binding and no tick does. tests/unit/test_detect_hung_jobs.py
    # holds the rule itself for both.)
    hangs = report["hangs"]
    assert hangs["recoveries_started"] == 0 and hangs["left_to_another_incident"] == hangs["stall_verdicts"], hangs
    assert hangs["left_to_another_incident"] >= (1 if orchestrator == "slurm" else 0), hangs
    assert report["pages"]["total"] == 0 and report["safety"]["second_copies"] == []
    assert report["safety"]["orchestrator_second_copies"] == []
    assert report["hits"] and all(hit["restarted_at"] is not None for hit in report["hits"])
    # And a job incident's record names a few of the job's nodes, not all 1,100
    assert report["limits"]["largest_dynamodb_item_bytes"] < 16 * 1024, report["limits"]
    # And the largest state, less the job failure's 1,100 names it carries, fits what a 10,000-node job's
    # failure leaves a state (models/job_events.py; tests/contract/test_large_job_event.py)
    assert runner.fleet_copies is not None
    names = len(json.dumps(runner.fleet_copies.jobs[original_copy(runner, "1001")].nodes, separators=(",", ":")).encode())
    assert report["limits"]["largest_state_payload_bytes"] - names <= STATE_REST_BUDGET, (report["limits"], names)


@pytest.mark.parametrize("orchestrator", ORCHESTRATORS)
def test_given_silent_hangs_then_only_the_hang_detector_finds_them_and_each_is_recovered_without_a_page(
    tmp_path: Path, orchestrator: Literal["slurm", "eks"]
) -> None:
    # Given a trace dense in silent hangs (no event is sent for one) on four jobs that report progress
    trace = generate(TraceSpec(nodes=64, days=1, seed=3, rate_per_1000_node_days=40, hang_share=1.0, correlated_share=0.0))
    hangs = [f for f in trace.failures if f.remedy == "hang"]
    assert len(hangs) >= 2
    plan = FleetPlan(nodes=64, days=1, mix=JobMix.parse("4x16", 64), spares=4, orchestrator=orchestrator)
    # When it runs through the pipeline, Detect Hung Jobs ticking every minute
    report = FleetRunner(plan, trace, tmp_path / "fleet.log").run_fleet()
    found = report["hangs"]
    # Then every hang on a running job was found by a tick, within the stall threshold and a tick or two:
    # the threshold is 5 x the job's learned pace, which a checkpoint's blocking save can raise by at most its cost
    assert found["silent_hangs_found"] == len(hangs) - found["silent_hangs_on_a_job_not_running"] >= 1
    assert found["detection_seconds"]["max"] <= 5 * (plan.step_seconds + plan.checkpoint_cost_seconds) + 2 * 60 + plan.step_seconds
    # And each was recovered (the job runs again), nobody paged, no tick failed
    assert report["pages"]["total"] == 0 and found["tick_errors"] == 0 and report["safety"]["second_copies"] == []
    assert report["safety"]["orchestrator_second_copies"] == []
    assert all(hit["restarted_at"] is not None for hit in report["hits"])
    assert report["incidents"]["by_outcome"].get("job:recovered", 0) >= found["silent_hangs_found"]
    # And the quiet ticks were counted, not run: a day's 1,440 ticks, a few of them run
    assert found["ticks"] == 1440 and found["ticks_run"] < 40 and found["ticks_counted_quiet"] == found["ticks"] - found["ticks_run"]
    assert report["cost_per_day"]["aws_calls_by_call"]["lambda.Invoke"] >= 1440


@pytest.mark.parametrize("orchestrator", ORCHESTRATORS)
def test_given_a_collective_that_never_completes_then_the_detector_ends_it_before_its_nccl_watchdog(
    tmp_path: Path, orchestrator: Literal["slurm", "eks"]
) -> None:
    # Given one NCCL watchdog fault: the job's ranks wait in a collective, its watchdog ends it 10 minutes later
    spec = TraceSpec(nodes=32, days=0.25, seed=0, rate_per_1000_node_days=0)
    nccl = Failure(at=3000.0, nodes=(5,), fault="nccl_watchdog", remedy="job", hmm_fault="", detect_seconds=NCCL_TIMEOUT_SECONDS)
    plan = FleetPlan(nodes=32, days=0.25, mix=JobMix.parse("2x16", 32), spares=2, orchestrator=orchestrator)
    # When it runs
    report = FleetRunner(plan, Trace(spec, (nccl,)), tmp_path / "fleet.log").run_fleet()
    # Then the hang detector found it first (a stall, a few minutes in), recovered the job, and the watchdog's
    # end never came: the job it would have ended had been cancelled and resubmitted already
    assert report["hangs"]["failures_found_first_by_the_detector"] == {"nccl_watchdog": 1}
    assert report["trace"]["job_faults_not_sent"] == 1
    (hit,) = report["hits"]
    assert hit["detection"] < NCCL_TIMEOUT_SECONDS / 2 and hit["restarted_at"] is not None
    # (and its suspect, the node whose rank stopped first, was checked: the nested node recovery)
    assert report["incidents"]["by_outcome"] == {"job:recovered": 1, "node:recovered": 1} and report["pages"]["total"] == 0


@pytest.mark.parametrize("orchestrator", ORCHESTRATORS)
def test_given_a_silent_hang_of_a_job_on_more_than_1000_nodes_then_it_is_found_and_recovered_without_a_page(
    tmp_path: Path, orchestrator: Literal["slurm", "eks"]
) -> None:
    """Found by the fleet run with one 2,048-node job: a hang's recovery keeps to the reports of the
    job's own nodes, whose names a workflow carries only up to 1,000, so a larger job's hang paged
    (JobNodesNotCarried). Capture Job Spec now asks the agent which of the nodes the verdict names the
    job runs on, and the hang is judged on those."""
    # Given one job on 1,100 nodes that hangs, silently, an hour in, its rank on worker 7 stopped first
    spec = TraceSpec(nodes=1100, days=0.1, seed=0, rate_per_1000_node_days=0)
    hang = Failure(at=3600.0, nodes=(7,), fault="hang", remedy="hang", hmm_fault="")
    plan = FleetPlan(nodes=1100, days=0.1, mix=JobMix.parse("1", 1100), spares=2, orchestrator=orchestrator)
    # When it runs
    report = FleetRunner(plan, Trace(spec, (hang,)), tmp_path / "fleet.log").run_fleet()
    # Then the detector found it, the job runs again, its suspect was checked, and nobody was paged
    assert report["hangs"]["silent_hangs_found"] == 1
    assert report["incidents"]["by_outcome"] == {"job:recovered": 1, "node:recovered": 1}, report["incidents"]
    assert report["pages"]["total"] == 0
    (hit,) = report["hits"]
    assert hit["restarted_at"] is not None
