"""hyperpod-recovery-agent: runs on the HyperPod Slurm controller node, long-polls the stack's command
queue, executes typed commands against slurmctld and answers with SendTaskSuccess / SendTaskFailure.
Outbound only; every Slurm call is an argument list, never a shell string (see slurm.py)."""

__version__ = "0.1.0"
