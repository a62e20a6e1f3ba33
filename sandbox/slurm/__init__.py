"""Slurm for drills: a simulated slurmctld answered by the real agent code (slurmctld.py)."""

from sandbox.slurm.slurmctld import ALL_REDUCE_STACK, DATA_LOADER_STACK, SimulatedController, SimulatedSlurm, SlurmJob, Submission

__all__ = ["ALL_REDUCE_STACK", "DATA_LOADER_STACK", "SimulatedController", "SimulatedSlurm", "SlurmJob", "Submission"]
