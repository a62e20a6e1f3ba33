"""The fleet's jobs as their orchestrator keeps them: each copy (a Slurm job, an EKS job object) with
its state, nodes, start and end, and the copy it was resubmitted from, in one shape for both.

The fleet (training, progress, the runner's faults) reads copies through this, not through Slurm or
Kubernetes, so a run on EKS is the same run as on Slurm but for who keeps the jobs:

* Slurm (``SlurmCopies``): the simulated slurmctld's jobs, as they are (a copy is a job id; a
  resubmission names its old job);
* EKS (``KubeCopies``): each PyTorchJob object of a scenario job's lineage (the job, then each one we
  re-created from it: annotation resubmitted-from, the old object's uid), by uid. It runs while every
  pod it has is Running (FakeKube.runs(): its first span), on the nodes its pods were bound to as that
  span opened (FakeKube.run_nodes), and it ended when that span closed (failed, stopped, or its pods gone). Its pods report as
  ``namespace/name`` (docs/progress.md: the downward API gives no uid).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from hyperpod_recovery.models.kubernetes import node_name_for_instance
from sandbox.eks import SimulatedEks
from sandbox.hyperpod import HyperPodDouble
from sandbox.kube import RESUBMITTED_FROM
from sandbox.scenario_jobs import JobSpec
from sandbox.slurm import DATA_LOADER_STACK, SimulatedSlurm
from sandbox.training import _env_of


class Copy(Protocol):
    """What the fleet reads of one copy of a job (sandbox/slurm/records.py SlurmJob has these fields)."""

    job_id: str
    state: str  # RUNNING while it runs
    nodes: list[str]
    started_at: datetime | None
    ended_at: datetime | None
    completing_until: datetime | None  # (Slurm: a cancelled job's KillWait end; None: it never ends)
    resubmission_of: str | None
    environment: dict[str, str]


class FleetCopies(Protocol):
    @property
    def jobs(self) -> Mapping[str, Copy]: ...

    def scenario_job(self, copy: Copy) -> str | None:
        """The scenario job an original copy (one resubmitted from none) is, or None (nobody's of ours)."""

    def current(self, scenario_job: str) -> Copy:
        """The job's newest copy: what a job fault hits."""

    def report_key(self, copy: str) -> str:
        """What the copy's reporters file their progress under."""

    def node_name(self, ref: str, at: float) -> str:
        """The orchestrator's name of the node behind ``group:index`` at ``at`` (virtual seconds)."""

    def hang(self, copy: str, odd_node: str) -> None:
        """The copy hangs: its ranks wait in a collective, but on ``odd_node``, stuck in its data loader."""


@dataclass
class SlurmCopies:
    slurm: SimulatedSlurm
    double: HyperPodDouble

    @property
    def jobs(self) -> Mapping[str, Copy]:
        return self.slurm.jobs

    def scenario_job(self, copy: Copy) -> str | None:
        return copy.job_id

    def current(self, scenario_job: str) -> Copy:
        return self.slurm.current_incarnation(scenario_job)

    def report_key(self, copy: str) -> str:
        return copy

    def node_name(self, ref: str, at: float) -> str:
        return self.double.current(ref, t=at).hostname.split(".", 1)[0]

    def hang(self, copy: str, odd_node: str) -> None:
        self.slurm.hang_job(copy, odd_nodes={odd_node: DATA_LOADER_STACK})


@dataclass
class KubeCopy:
    job_id: str  # the object's uid
    name: str
    namespace: str
    state: str
    nodes: list[str]
    started_at: datetime | None
    ended_at: datetime | None
    resubmission_of: str | None
    environment: dict[str, str]
    completing_until: datetime | None = None


@dataclass
class KubeCopies:
    eks: SimulatedEks
    double: HyperPodDouble
    specs: list[JobSpec]
    epoch: datetime
    _view: dict[str, KubeCopy] = field(default_factory=dict)
    _seen: tuple[Any, ...] = ()

    @property
    def jobs(self) -> Mapping[str, Copy]:
        """Every PyTorchJob of the scenario's namespaces, by uid (rebuilt when a job or a run changed)."""
        kube = self.eks.kube
        with self.eks.lock:
            return self._jobs(kube)

    def _jobs(self, kube: Any) -> Mapping[str, Copy]:
        seen = (kube._version, *((uid, len(spans), spans[-1][1] is None) for uid, spans in kube._runs.items() if spans))
        if seen != self._seen:
            self._view = {copy.job_id: copy for copy in map(self._copy, self._objects())}
            self._seen = seen
        return self._view

    def _objects(self) -> list[dict[str, Any]]:
        return [obj for (kind, _, _), obj in sorted(self.eks.kube.jobs.items()) if kind == "PyTorchJob"]

    def _copy(self, obj: dict[str, Any]) -> KubeCopy:
        metadata = obj["metadata"]
        uid = str(metadata["uid"])
        # (a copy trains once, its first run: one whose pods all went and came back is not trained again)
        start, end = (self.eks.kube._runs.get(uid) or [[None, None]])[0]
        running = start is not None and end is None
        return KubeCopy(
            job_id=uid,
            name=str(metadata["name"]),
            namespace=str(metadata["namespace"]),
            state="RUNNING" if running else ("ENDED" if start is not None else "PENDING"),
            nodes=self.eks.kube.run_nodes.get(uid, []),
            started_at=None if start is None else self.epoch + timedelta(seconds=start),
            ended_at=None if end is None else self.epoch + timedelta(seconds=end),
            resubmission_of=(metadata.get("annotations") or {}).get(RESUBMITTED_FROM),
            environment=_env_of(obj),
        )

    def scenario_job(self, copy: Copy) -> str | None:
        assert isinstance(copy, KubeCopy)
        return next((s.id for s in self.specs if (s.kubernetes.namespace, s.name) == (copy.namespace, copy.name)), None)

    def current(self, scenario_job: str) -> Copy:
        copies = self.jobs
        original = next(c for c in copies.values() if c.resubmission_of is None and self.scenario_job(c) == scenario_job)
        current = original
        while True:
            newer = [c for c in copies.values() if c.resubmission_of == current.job_id]
            if not newer:
                return current
            current = max(newer, key=lambda c: c.started_at or self.epoch)

    def report_key(self, copy: str) -> str:
        job = self.jobs[copy]
        assert isinstance(job, KubeCopy)
        return f"{job.namespace}/{job.name}"

    def node_name(self, ref: str, at: float) -> str:
        return node_name_for_instance(self.double.current(ref, t=at).node_id)

    def hang(self, copy: str, odd_node: str) -> None:
        self.eks.object_hangs(copy, odd_node)
