"""Run a failure trace through the real pipeline in the sandbox: the drill runner (sandbox/runner/),
its moto stack, state machines, handlers, HyperPod double and simulated Slurm, fed a whole fleet's
trace instead of a scenario's few faults.

What the fleet adds to a drill:
* the scenario is built from the plan (a controller, ``nodes`` + ``spares`` workers, the job mix)
  and the trace (a health event per failed node, HyperPod's health agent naming a fault that a
  reboot fixes or one that needs a replacement; a job-only fault as the agent's job-failed event);
* each failure is seen ``detect_seconds`` after it happens (the trace's), and the job stops
  training when it happens: what it did since its last checkpoint is lost (sandbox/fleet/training.py);
* the double takes each repair's figures from the trace: how long this replacement takes, whether
  the new node is sick, whether this reboot fails;
* a job-only fault on a job that is not running (down after an earlier fault) cannot happen: it
  is skipped, and counted;
* the jobs report their progress (sandbox/fleet/progress.py) and Detect Hung Jobs ticks every
  minute: a silent hang of the trace is found only by it, and a fault's stopped job is seen by it
  too until the orchestrator ends the job (the other workflows race it, as they would). A tick that
  can find nothing is counted at a quiet tick's measured calls, not run.

A failure acts on the training at its moment (its onset: the job stops, its reporters say so), and
on the stack when it is seen (its delivery, ``detect_seconds`` later).

Issue 50: with planned swaps, each precursor of the trace is an at-risk signal delivered by its real
path at its moment (the scenario's ``at_risk`` fault, sandbox/at_risk.py), the copies on its node
commit each checkpoint when due from then (a planned swap waits for one), and a failure whose node
was replaced or rebooted after its precursor and before it does not happen (``averted``: the faulty
hardware left, or the reset the signal asked for came; ASSUMPTION) and sends nothing. A job-only fault whose job
no longer runs when its event would be sent (the hang detector's recovery ended it first: an NCCL
watchdog's 10 minutes outlast its 2) sends nothing: the job is not there to fail.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any
from unittest import mock

from moto.dynamodb.models import DynamoDBBackend, dynamodb_backends

from hyperpod_recovery.models.progress import progress_item
from sandbox.aws import REGION
from sandbox.clock import DRIVER
from sandbox.fleet.copies import FleetCopies, KubeCopies, SlurmCopies
from sandbox.fleet.plan import WORKERS, FleetPlan, Hit
from sandbox.fleet.plan import JobMix as JobMix  # (where the fleet's callers have always found it)
from sandbox.fleet.progress import FleetProgress, Stop, rules_of
from sandbox.fleet.report import fleet_report
from sandbox.fleet.trace import Failure, Precursor, Trace
from sandbox.fleet.training import FleetTraining
from sandbox.hyperpod import ACCOUNT
from sandbox.hyperpod_nodes import SimNode
from sandbox.report import build_report
from sandbox.runner import HANG_DETECTOR_FUNCTION, POLLER_FUNCTION, Delivery, DrillRunner
from sandbox.scenario import FaultSpec
from sandbox.slurm import SimulatedController

# No execution ended for this long before a scheduled sweep: it can find nothing (it looks 10 minutes back).
QUIET_SECONDS = 900.0
# What the fleet report keeps of the drill's own report (the rest is per incident: thousands of lines).
DRILL_KEYS = (
    "api_calls",
    "api_calls_total",
    "state_transitions",
    "max_state_bytes",
    "max_state_at",
    "executions",
    "intake",
    "ledger_at_end",
)


class FleetRunner(DrillRunner):
    def __init__(self, plan: FleetPlan, trace: Trace, log_path: Path) -> None:
        super().__init__(plan.scenario(trace), log_path)
        self.plan = plan
        self.trace = trace
        self.hits: list[Hit] = []
        self.skipped: list[Failure] = []  # job-only faults on a job that was not running
        self._by_delivery = {round(f.at + f.detect_seconds, 6): [] for f in trace.failures}
        for failure in trace.failures:
            self._by_delivery[round(failure.at + failure.detect_seconds, 6)].append(failure)
        self._on_node: dict[int, list[Failure]] = {}
        for failure in trace.failures:
            for node in failure.nodes:
                self._on_node.setdefault(node, []).append(failure)
        self._sick_generation: dict[tuple[int, float], int] = {}
        self.double.replacement_seconds_for = self._replacement_seconds
        self.double.sick_replacement = self._sick
        self.double.reboot_fails_for = self._reboot_fails
        self.fleet_training: FleetTraining | None = None
        self.fleet_copies: FleetCopies | None = None  # the jobs' copies, as the orchestrator keeps them
        self.quiet_sweeps = 0
        self.quiet_sweep_calls: Counter[str] | None = None
        self._ended_at: dict[str, float] = {}
        self.handled_at: dict[Failure, float] = {}  # each failure: when the first execution it started began
        self._hostnames: dict[Failure, set[str]] = {}
        self.largest_item: tuple[int, str] = (0, "")
        self.wall_seconds = 0.0
        # The hang detector's schedule (sandbox/fleet/progress.py): ticks run, ticks counted quiet.
        self.fleet_progress: FleetProgress | None = None
        self.detector_ticks: list[tuple[float, Any]] = []  # (moment, the tick's answer) of each tick run
        self.quiet_ticks = 0
        self.quiet_tick_calls: Counter[str] | None = None
        # EKS: Find Failed Jobs' schedule (sandbox/runner/ runs it where a job failed): a quiet poll's calls.
        self.quiet_poll_calls: Counter[str] = Counter()
        self.quiet_poll_kubernetes_calls = 0
        self._ticked_to = 0.0
        self._progress_rows: dict[str, list[tuple[str, str]]] = {}  # copy -> the keys (pk, sk) of its rows in the table
        # Each failure acts on the training at its moment (its onset), before anything after it reads it.
        self._onsets = list(trace.failures)
        self._onset_next = 0
        self.hit_at_onset: set[Failure] = set()  # failures that stopped a running job
        self.not_sent: list[Failure] = []  # job-only faults whose job had been ended by then: no event
        self.found_by_detector: set[Failure] = set()  # failures whose first recovery a tick started
        self.progress_bytes_per_tick = 0  # the largest table a tick read (its rows' DynamoDB sizes)
        # Issue 50: the precursors delivered (by the announced failure), and the failures they averted.
        self._precursor_of: dict[Failure, Precursor] = {p.failure: p for p in trace.precursors if p.failure is not None}
        self.signals_sent: list[Precursor] = []
        self._sent: set[Precursor] = set()
        self.averted: set[Failure] = set()
        self.watched_copies: dict[str, Precursor] = {}  # copy -> the signal that made it commit each checkpoint
        self._precursors_at: dict[float, list[Precursor]] = {}
        for precursor in trace.precursors:
            self._precursors_at.setdefault(round(precursor.at, 3), []).append(precursor)

    # --- the trace's figures, for the double -----------------------------------------------
    def _failure_before(self, index: int, t: float) -> Failure | None:
        before = [f for f in self._on_node.get(index, []) if f.at <= t]
        return before[-1] if before else None

    def _replacement_seconds(self, node: SimNode, t: float) -> float | None:
        """The trace's figure: the failure before ``t`` on the node's, or (a planned swap's) the one its signal announced."""
        failure = self._failure_before(node.index, t) or self._announced_after(node.index, t)
        return failure.replacement_seconds if failure is not None else None

    def _announced_after(self, index: int, t: float) -> Failure | None:
        return next((f for f in self._on_node.get(index, []) if f.at > t and f in self._precursor_of), None)

    def _sick(self, node: SimNode) -> bool:
        """The first replacement made after a failure whose gate fails comes back sick; the next is healthy.
        Of a rack's, only its first node's: a failed gate is drawn per interruption (3 %), and sixteen
        sick replacements at once are not what a share per replacement would bring (the pipeline rightly
        takes that for a broken check or capacity pool and asks a human: the 4,096-node run's one page)."""
        failure = self._failure_before(node.index, node.created_at)
        if failure is None or not failure.gate_fails or node.index != failure.nodes[0]:
            return False
        first = self._sick_generation.setdefault((node.index, failure.at), node.generation)
        return first == node.generation

    def _reboot_fails(self, node: SimNode, t: float) -> bool:
        failure = self._failure_before(node.index, t)
        return failure is not None and failure.reboot_fails

    # --- running ---------------------------------------------------------------------------
    def run_fleet(self) -> dict[str, Any]:
        """Deliver the whole trace, let every execution finish: the fleet report (sandbox/fleet/report.py),
        with the drill's own report (sandbox/report/) under ``drill``."""
        started = time.perf_counter()
        # The stack told the job's restart (ElasticGrowBackSeconds), as its owner who measured it would: the
        # shrink rule and a planned swap's cost read it until the ledger has measured one. With planned swaps:
        # every signal enforced, at the trace's prior and horizon (template.yaml AtRiskSignals).
        parameters = {"ElasticGrowBackSeconds": str(round(self.plan.restart_seconds))}
        if self.plan.at_risk_signals:
            parameters["AtRiskSignals"] = self.plan.at_risk_signals
        with self.deployed(parameters):
            self._measure_items()
            if self.eks is not None:
                self.fleet_copies = KubeCopies(self.eks, self.double, self.scenario.jobs, self.epoch)
            else:
                self.fleet_copies = SlurmCopies(self.slurm.slurm, self.double)
            self.fleet_training = FleetTraining(
                self.scenario.jobs,
                self.fleet_copies,
                self.aws.client("s3"),
                self.epoch,
                self.plan.checkpoint_interval_seconds,
                self.plan.steps_per_checkpoint,
                self.plan.restart_seconds,
                self.plan.steps_per_checkpoint,
            )
            self.progress = None  # (the drill's progress simulator: the fleet's jobs report through FleetProgress)
            self.fleet_progress = FleetProgress(
                self.fleet_training, self.epoch, self.plan.step_seconds, rules_of(self.aws.template), self.scenario.cluster.name
            )
            if self.eks is not None:
                self._measure_quiet_poll()
            self.play()
            end = self.plan.days * 86_400.0
            self._advance_to(max(end, self.clock.now()))
            if self.eks is not None:
                self.eks.settle(end)  # (the cluster at the run's end: the pods bound since the last request run)
            self.fleet_training.advance(end)
            self.slurm.close()
            self._log.flush()
            drill = build_report(self, wall_seconds=time.perf_counter() - started)
            self.wall_seconds = time.perf_counter() - started
            report = fleet_report(self, drill)
            report["drill"] = {k: drill[k] for k in DRILL_KEYS}
            # (each planned swap's record as the pipeline kept it: its decision, both costs, the work lost past the commit)
            report["planned_swap_records"] = drill.get("planned_swaps", [])
            return report

    def _measure_items(self) -> None:
        """Every item the pipeline writes to the ledger is measured as DynamoDB sizes it (moto's Item.size():
        names and values in bytes), the largest kept: an item may shrink again before the run ends."""
        runner = self
        table = self.aws.ledger_table

        def measured(original: Any) -> Any:
            def write(backend: Any, table_name: str, *args: Any, **kwargs: Any) -> Any:
                item = original(backend, table_name, *args, **kwargs)
                if table_name == table and item is not None:
                    size = item.size()
                    if size > runner.largest_item[0]:
                        keys = item.attrs
                        runner.largest_item = (size, f"{keys['pk'].value} / {keys['sk'].value}")
                return item

            return write

        for name in ("put_item", "update_item"):
            self.aws.enter(mock.patch.object(DynamoDBBackend, name, measured(getattr(DynamoDBBackend, name))))

    def hostnames_of(self, failure: Failure) -> set[str]:
        return self._hostnames.get(failure, set())

    def throttling_met(self) -> int:
        """Throttling errors any call of the pipeline received (its handlers log them)."""
        with self.log_path.open() as log:
            return sum(1 for line in log if "Throttl" in line or "ProvisionedThroughputExceeded" in line)

    # --- the sweep of ended executions, on a quiet fleet ----------------------------------------
    def _run_scheduled_sweeps(self) -> None:
        """The sweep's schedule, as the drill runs it, except where a sweep can find nothing: no
        execution ended within ``QUIET_SECONDS`` before its moment (a sweep lists only ends, from 10
        minutes before its mark, and leaves one younger than a minute to the next sweep; a skipped
        sweep leaves its mark behind, so the next one that runs lists from there). Such a sweep is
        counted, at the calls and invocations the first sweep of the run (before any fault: a quiet
        one) was measured to make, not run: over 54 days, 15,000 sweeps at 80 ms each."""
        bound = min(self.clock.next_wake(), self._until)
        if bound == float("inf"):
            return
        while self._swept_to + self.sweep_period <= bound:
            moment = self._swept_to + self.sweep_period
            if self.quiet_sweep_calls is not None and self._quiet_at(moment):
                self._swept_to = moment
                self.quiet_sweeps += 1
                continue
            before = self.aws.api_calls.counts.copy()
            self._sweep_at(moment)
            if self.quiet_sweep_calls is None:
                self.quiet_sweep_calls = self.aws.api_calls.counts - before

    def _quiet_at(self, moment: float) -> bool:
        """No execution ended within QUIET_SECONDS before ``moment`` (one still running has not ended)."""
        for execution in self.aws.executions():
            if execution.exec_status is None or execution.exec_status.value == "RUNNING":
                continue
            ended = self._ended_at.setdefault(execution.name, self.clock.now(execution.name))
            if moment - QUIET_SECONDS < ended <= moment:
                return False
        return True

    # --- EKS: the job poller, every minute ----------------------------------------------------
    def _measure_quiet_poll(self) -> None:
        """Find Failed Jobs runs every minute on an EKS stack and lists every training job (77,760
        times in 54 days); the drill runs it where a job failed and its repeats, and the fleet counts
        the others at what one poll before any fault (a quiet one) was measured to cost."""
        assert self.eks is not None
        before, kube_before = self.aws.api_calls.counts.copy(), len(self.eks.kube.calls)
        self._poll_failed_jobs()
        self.quiet_poll_calls = self.aws.api_calls.counts - before
        self.quiet_poll_kubernetes_calls = len(self.eks.kube.calls) - kube_before

    @property
    def quiet_polls(self) -> int:
        """The poller's ticks over the run that were counted, not run (none on Slurm: it is EKS's)."""
        if self.eks is None:
            return 0
        return max(0, int(self.plan.days * 86_400.0 // self.schedule_period(POLLER_FUNCTION)) - len(self.polls))

    def orchestrator_second_copies(self) -> list[dict[str, Any]]:
        """Each moment two copies of one job were live at once, pending or running, as the simulated
        orchestrator itself tells (SimulatedSlurm.second_copies, FakeKube.second_copies)."""
        if self.eks is not None:
            return self.eks.kube.second_copies()
        return self.slurm.slurm.second_copies() if isinstance(self.slurm, SimulatedController) else []

    def counted_kubernetes_calls(self) -> int:
        """Every Kubernetes API call the pipeline made, the quiet polls' counted at their measured cost."""
        if self.eks is None:
            return 0
        return len(self.eks.kube.calls) + self.quiet_poll_kubernetes_calls * self.quiet_polls

    def counted_api_calls(self) -> Counter[str]:
        """Every AWS call of the run, the quiet sweeps' and quiet detector ticks' counted at their measured cost."""
        counts = Counter(self.aws.api_calls.counts)
        for call, n in (self.quiet_sweep_calls or Counter()).items():
            counts[call] += n * self.quiet_sweeps
        for call, n in (self.quiet_tick_calls or Counter()).items():
            counts[call] += n * self.quiet_ticks
        for call, n in self.quiet_poll_calls.items():
            counts[call] += n * self.quiet_polls
        return counts

    def _between(self) -> None:
        """Every execution is parked: up to the next wake-up, in time order, the failures' onsets,
        then what AWS delivers on its own (cluster events, execution ends, sweeps: the drill's) and
        the detector's ticks, merged: a tick that acts runs after everything before its moment and
        before everything after it, and what it started runs before the next one is judged."""
        if self.fleet_training is None or self.fleet_progress is None:
            super()._between()
            return
        until = self._until
        try:
            while True:
                bound = min(self.clock.next_wake(), until)
                self._kube_at(self.clock.horizon)
                self.fleet_training.advance(self.clock.horizon)
                moment = self._next_tick_to_run(bound)
                if moment is None:
                    if bound != float("inf"):
                        self._process_onsets(bound)  # (every failure up to the next wake-up, before anything reads it)
                    self._until = until
                    super()._between()
                    self._job_nodes_at_horizon()
                    self._kube_at(self.clock.horizon)
                    self.fleet_training.advance(self.clock.horizon)
                    return
                self._until = moment  # (what AWS delivers before the tick's moment, first)
                super()._between()
                self._job_nodes_at_horizon()
                self._until = until
                if self.clock.next_wake() < moment:
                    continue  # (what it delivered woke an execution before the tick: that one goes first)
                self._run_tick(moment)
                self.clock.wait_until_parked(self._running)  # (what it started runs to its first wait)
        finally:
            self._until = until

    def _job_nodes_at_horizon(self) -> None:
        """While a planned swap runs, the agent's job-nodes snapshot is brought up to the present (the
        executions' horizon): between the fleet's deliveries, hours apart, the driver's own clock stands
        at the last one, and a snapshot taken there would read as stale to the swap deciding now."""
        if not isinstance(self.slurm, SimulatedController) or not any(n.startswith("hps-") for n in self._running()):
            return
        present = self.clock.now(DRIVER)
        if self.clock.horizon <= present or self.clock.horizon == float("inf"):
            return
        self.clock.set_driver_time(self.clock.horizon)
        try:
            self.slurm.report_job_nodes()
        finally:
            self.clock.set_driver_time(present)

    def _deliveries(self) -> list[Delivery]:
        """The drill's deliveries less Detect Hung Jobs' ticks: the fleet runs its schedule itself (_between)."""
        return [d for d in super()._deliveries() if not (d.detect and not d.faults)]

    # --- a failure's onset: the training stops --------------------------------------------------
    def _kube_at(self, moment: float) -> None:
        """EKS: the pods bound and due to start by ``moment`` run (their copies train) before the training model reads them."""
        if self.eks is not None:
            self.eks.catch_up(moment)

    def _process_onsets(self, moment: float) -> None:
        """Every failure up to ``moment`` stops the training it hits (its hit, its reporters' story)."""
        self._kube_at(moment)
        assert self.fleet_training is not None and self.fleet_progress is not None and self.fleet_copies is not None
        while self._onset_next < len(self._onsets) and self._onsets[self._onset_next].at <= moment:
            failure = self._onsets[self._onset_next]
            self._onset_next += 1
            if failure.remedy in ("job", "hang"):
                root = self.plan.job_of(failure.nodes[0])
                if not self.fleet_training.running(root):
                    self.skipped.append(failure)  # (a job fault needs a running job)
                    continue
                behind = self._hang_onset(root, failure) if failure.remedy == "hang" else None
                stopped = self.fleet_training.hit(failure.at, root=root)
                dead = frozenset()
            elif self._averted(failure):
                self.averted.add(failure)  # (its node left the cluster or was reset after its signal: it never happens)
                continue
            else:
                names = {self.fleet_copies.node_name(f"{WORKERS}:{n}", failure.at) for n in failure.nodes}
                # (the hosts, as the double's repairs name them: on EKS the nodes' names are not their hostnames)
                self._hostnames[failure] = {
                    self.double.current(f"{WORKERS}:{n}", t=failure.at).hostname.split(".", 1)[0] for n in failure.nodes
                }
                stopped = self.fleet_training.hit(failure.at, nodes=names)
                behind, dead = None, frozenset(names)
            for copy in stopped:
                stop = Stop(failure.at, dead & set(self.fleet_copies.jobs[copy.copy].nodes), behind)
                if failure.remedy == "job":
                    # (a crash: the rank on the drawn node died with its reporter; a collective that
                    # never completes, until its watchdog: that node's rank stopped first, every reporter heartbeats)
                    (node,) = self._drawn_node(copy.copy, failure)
                    stop = Stop(failure.at, behind=node) if failure.detect_seconds > 0 else Stop(failure.at, dead=frozenset({node}))
                self.fleet_progress.stopped(copy, stop)
                self.hits.append(
                    Hit(failure, copy.root, copy.copy, failure.at, self.fleet_training.last_checkpoint_before(copy, failure.at))
                )
            if stopped:
                self.hit_at_onset.add(failure)

    def _averted(self, failure: Failure) -> bool:
        """The failure's node was replaced or rebooted between its delivered precursor and it."""
        precursor = self._precursor_of.get(failure)
        if precursor is None or precursor not in self._sent:
            return False
        node_id = self.double.current(f"{WORKERS}:{precursor.node}", t=precursor.at).node_id
        repairs = [r.initiated_at for r in self.double.replacements if r.old_node_id == node_id]
        repairs += [r.initiated_at for r in self.double.reboots if r.node_id == node_id]
        return any(precursor.at <= at <= failure.at for at in repairs)

    def _drawn_node(self, copy: str, failure: Failure) -> set[str]:
        """The copy's node a job fault drawn on worker ``n`` is on: that worker's node if the copy runs there, else one in turn."""
        assert self.fleet_copies is not None
        nodes = self.fleet_copies.jobs[copy].nodes
        name = self.fleet_copies.node_name(f"{WORKERS}:{failure.nodes[0]}", failure.at)
        return {name if name in nodes else nodes[failure.nodes[0] % len(nodes)]}

    def _hang_onset(self, root: str, failure: Failure) -> str:
        """The job's current copy hangs: its ranks wait in a collective but on one node (its data
        loader's stack there): the node that stopped first."""
        assert self.fleet_copies is not None
        job = self.fleet_copies.current(root)
        (node,) = self._drawn_node(job.job_id, failure)
        self.fleet_copies.hang(job.job_id, node)
        return node

    # --- Detect Hung Jobs, every minute ---------------------------------------------------------
    @property
    def detector_period(self) -> float:
        return self.schedule_period(HANG_DETECTOR_FUNCTION)

    def _next_tick_to_run(self, bound: float) -> float | None:
        """The first tick up to ``bound`` to run (one whose reports give a verdict, or the run's first,
        measured as quiet), the quiet ones before it counted; None when none up to ``bound`` acts.
        Nothing changes the jobs before the next wake-up, so a quiet tick is quiet whenever it is judged."""
        assert self.fleet_progress is not None
        if bound == float("inf"):
            return None
        while self._ticked_to + self.detector_period <= bound:
            moment = self._ticked_to + self.detector_period
            self._process_onsets(moment)  # (the failures up to the tick's moment, no later)
            if self.quiet_tick_calls is None or self.fleet_progress.verdicts_at(moment):
                return moment
            self._ticked_to = moment
            self.quiet_ticks += 1
        return None

    def _run_tick(self, moment: float) -> None:
        self._ticked_to = moment
        before = self.aws.api_calls.counts.copy()
        quiet = not self.fleet_progress or not self.fleet_progress.verdicts_at(moment)
        self._tick_at(moment)
        if quiet and self.quiet_tick_calls is None:
            self.quiet_tick_calls = self.aws.api_calls.counts - before

    def _tick_at(self, moment: float) -> None:
        """One tick run: the reporters' rows as of ``moment`` in the table, then the detector invoked there."""
        assert self.fleet_progress is not None
        backend = dynamodb_backends[ACCOUNT][REGION]
        table = self.aws.progress_table
        by_copy = self.fleet_progress.items(moment, progress_item)
        for gone in set(self._progress_rows) - set(by_copy):
            for pk, sk in self._progress_rows.pop(gone):
                backend.delete_item(table, {"pk": {"S": pk}, "sk": {"S": sk}})
        for copy, items in by_copy.items():
            for item in items:
                backend.put_item(table, item)
            keys = [(item["pk"]["S"], item["sk"]["S"]) for item in items]
            self._progress_rows[copy] = list(dict.fromkeys([*self._progress_rows.get(copy, []), *keys]))
        self.progress_bytes_per_tick = max(self.progress_bytes_per_tick, sum(_item_bytes(i) for items in by_copy.values() for i in items))
        self.clock.advance_horizon(max(moment, self.clock.horizon))
        present = self.clock.now(DRIVER)
        self.clock.set_driver_time(moment)
        before = {e.name for e in self.aws.executions()}
        try:
            with self.aws.api_calls.counting():
                response = self.aws.client("lambda").invoke(FunctionName=HANG_DETECTOR_FUNCTION, Payload=b"{}")
            self.detector_ticks.append((moment, json.loads(response["Payload"].read())))
        finally:
            self.clock.set_driver_time(present)
        for execution in (e for e in self.aws.executions() if e.name not in before):
            # A stall's recovery handles each failure that stopped its job and nothing handled yet
            # (a hang; an NCCL watchdog's fault, before its own end).
            job = json.loads(execution.execution_input).get("job_id")
            for hit in self.hits:
                if hit.copy == job and hit.failure not in self.handled_at:
                    self.handled_at[hit.failure] = moment
                    self.found_by_detector.add(hit.failure)

    def counted_detector_ticks(self) -> int:
        return len(self.detector_ticks) + self.quiet_ticks

    # --- a failure's delivery: the stack is told --------------------------------------------------
    def _deliver(self, delivery: Delivery) -> None:
        assert self.fleet_training is not None
        self._process_onsets(delivery.at)
        kept: list[FaultSpec] = []
        delivered: list[Failure] = []
        for fault in delivery.faults:
            failures = self._by_delivery.get(round(fault.at, 6), [])
            failure = next((f for f in failures if _matches(f, fault)), None)
            if failure is None:
                kept.append(fault)
                continue
            if failure in self.averted:
                continue  # (it never happened: nothing to see)
            if failure.remedy == "hang":
                continue  # (no event: the detector's ticks find it; its onset hung the job)
            if failure.remedy == "job":
                assert fault.job is not None
                if failure not in self.hit_at_onset:
                    continue  # (counted skipped at its onset: its job was not running)
                # (the copy it hit: a copy started since, the resubmission of the hang detector's recovery, is not the one)
                hit_copies = {hit.copy for hit in self.hits if hit.failure == failure}
                assert self.fleet_copies is not None
                current = self.fleet_copies.current(fault.job)
                if current.job_id not in hit_copies or current.state != "RUNNING":
                    self.not_sent.append(failure)  # (ended before its own end could come: by the hang detector's recovery)
                    continue
            kept.append(fault)
            delivered.append(failure)
        delivery.faults = kept
        for fault in kept:
            if fault.kind == "at_risk":
                self._signal(fault)
        before = {e.name for e in self.aws.executions()}
        if kept or delivery.agent_back or delivery.poll or delivery.detect:
            super()._deliver(delivery)
        started = [self.clock.started_at(e.name) for e in self.aws.executions() if e.name not in before]
        for failure in delivered:
            if started:
                # (a failure the detector found first keeps that moment)
                self.handled_at.setdefault(failure, min(started))

    def _signal(self, fault: FaultSpec) -> None:
        """An at-risk signal goes out now: the copies on its node commit each checkpoint when due (a planned swap waits for one)."""
        assert self.fleet_training is not None and self.fleet_copies is not None and fault.node is not None
        index = int(fault.node.rsplit(":", 1)[1])
        precursor = next((p for p in self._precursors_at.get(round(fault.at, 3), []) if p.node == index and p not in self._sent), None)
        if precursor is None:
            return
        self.signals_sent.append(precursor)
        self._sent.add(precursor)
        for copy in self.fleet_training.watch({self.fleet_copies.node_name(fault.node, fault.at)}, fault.at):
            self.watched_copies.setdefault(copy.copy, precursor)


def _item_bytes(item: dict[str, dict[str, str]]) -> int:
    """An item's size as DynamoDB counts it: its attribute names and values in bytes (numbers approximated by their text)."""
    return sum(len(name.encode()) + len(next(iter(value.values())).encode()) for name, value in item.items())


def _matches(failure: Failure, fault: FaultSpec) -> bool:
    kind = {"job": "job_failed", "hang": "hang"}.get(failure.remedy, "node_health")
    return kind == fault.kind
