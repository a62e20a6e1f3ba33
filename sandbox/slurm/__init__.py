"""Slurm for drills: a simulated slurmctld (slurmctld.py, its records in records.py) answered by the
real agent code (controller.py).

``SimulatedSlurm`` keeps Slurm's view of the cluster (nodes with state and drain reason, jobs with
their nodes and state) and implements the agent's ``Slurm`` port, so the command queue is
answered by the real ``Agent`` and ``CommandExecutor`` (agent/hyperpod_recovery_agent/): the
drain/resume/resubmit rules drilled here are the ones that run on a controller. What is modelled
is only Slurm itself, and the agent's latency on the execution's virtual timeline. Commands are
answered synchronously after the Lambda invocation that sent them (``pump``), on the thread of the
task that waits for the answer, so drills need no polling thread.

``make drill SLURM=real`` replaces all of this with the agent as a separate process against a real
slurmctld (sandbox/real_slurm.py).
"""

from sandbox.slurm.controller import SimulatedController
from sandbox.slurm.records import ALL_REDUCE_STACK, DATA_LOADER_STACK, SlurmJob, SlurmNode, Submission
from sandbox.slurm.slurmctld import SimulatedSlurm

__all__ = ["ALL_REDUCE_STACK", "DATA_LOADER_STACK", "SimulatedController", "SimulatedSlurm", "SlurmJob", "SlurmNode", "Submission"]
