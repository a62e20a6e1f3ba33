"""Simulated Slurm's records: its nodes, its jobs (and the batch script each holds), the resubmissions
made, and the stacks py-spy dumps of a hung training run."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

TRAINING_SCRIPT = "#!/bin/bash\n#SBATCH --exclusive\nsrun python train.py --resume-from-env\n"
# What ``py-spy dump`` prints for a rank of a hung training run ({pid}: the rank's process): every rank
# of a healthy-but-hung collective waits in the same all_reduce, so all nodes share one signature.
ALL_REDUCE_STACK = """Process {pid}: /opt/conda/bin/python3.10 -u train.py --config llama-70b.yaml --resume-from-env
Python v3.10.14 (/opt/conda/bin/python3.10)

Thread {pid} (idle): "MainThread"
    all_reduce (torch/distributed/distributed_c10d.py:2050)
    wrapper (torch/distributed/c10d_logger.py:75)
    reduce_gradients (train.py:211)
    train_step (train.py:248)
    main (train.py:301)
    <module> (train.py:317)
Thread {thread} (idle): "Thread-1 (_pin_memory_loop)"
    select (selectors.py:415)
    wait (multiprocessing/connection.py:931)
    _poll (multiprocessing/connection.py:424)
    poll (multiprocessing/connection.py:257)
    get (multiprocessing/queues.py:113)
    do_one_step (torch/utils/data/_utils/pin_memory.py:31)
    _pin_memory_loop (torch/utils/data/_utils/pin_memory.py:54)
    run (threading.py:953)
    _bootstrap_inner (threading.py:1016)
    _bootstrap (threading.py:973)"""
# The odd rank a scenario may name: it never reached the collective (stuck reading its data shard).
DATA_LOADER_STACK = """Process {pid}: /opt/conda/bin/python3.10 -u train.py --config llama-70b.yaml --resume-from-env
Python v3.10.14 (/opt/conda/bin/python3.10)

Thread {pid} (idle): "MainThread"
    recv_into (ssl.py:1275)
    readinto (socket.py:705)
    _read_status (http/client.py:279)
    begin (http/client.py:318)
    getresponse (http/client.py:1375)
    read_shard (data.py:88)
    __next__ (data.py:120)
    train_step (train.py:240)
    main (train.py:301)
    <module> (train.py:317)"""


@dataclass
class SlurmNode:
    name: str
    state: str = "idle"  # idle | allocated
    drained: bool = False
    reason: str = ""
    boot_time: datetime | None = None  # without a host view: slurmd registered with this, and responds
    free_since: datetime | None = None  # when its last job ended or its drain was lifted (None: from the start)


PARTITION = "gpu"  # the simulated cluster's one partition
# The simulated jobs' owner (the agent runs as root; every job is someone else's).
OWNER = {"user": "trainer", "uid": 1000, "group": "trainer", "gid": 1000}


@dataclass
class SlurmJob:
    job_id: str
    name: str
    nodes: list[str]
    state: str
    checkpoint_uri: str | None
    auto_resume: bool = False
    environment: dict[str, str] = field(default_factory=dict)
    comment: str = ""
    resubmission_of: str | None = None
    script_bytes: int = 0  # pad the batch script to this size (a real training script can be long)
    batch: bool = True  # False: an salloc/srun allocation, with no batch script to submit again
    submitted_by: str | None = None  # the user a resubmission ran sbatch as
    # A pending resubmission waits for this many nodes (its old job's count), preferring ``preferred``
    # and never on ``excluded``; ``started_at`` is when the scheduler started it (virtual time).
    node_count: int = 0
    preferred: list[str] = field(default_factory=list)
    excluded: list[str] = field(default_factory=list)
    started_at: datetime | None = None
    submitted_at: datetime | None = None
    ended_at: datetime | None = None  # when it stopped being live (failed, cancelled): None while it is
    # After scancel: COMPLETING this long (KillWait, an epilog) before it ends; None: never (a process
    # in uninterruptible sleep that SIGKILL does not end). ``completing_until``: when it ends.
    kill_wait_seconds: float | None = 0.0
    completing_until: datetime | None = None
    # A hang's odd nodes (hang_job): the stack py-spy dumps there ({pid} filled in), None: the dump hangs.
    odd_stacks: dict[str, str | None] = field(default_factory=dict)
    # The script's own node range (``#SBATCH --nodes=A-B``, "1-2"): the agent reads a job's opt-in there.
    node_range: str | None = None

    @property
    def script(self) -> str:
        script = TRAINING_SCRIPT.replace("--resume-from-env", "--auto-resume=1") if self.auto_resume else TRAINING_SCRIPT
        if self.node_range is not None:
            script = script.replace("#SBATCH --exclusive\n", f"#SBATCH --exclusive\n#SBATCH --nodes={self.node_range}\n")
        return script + "#" * max(0, self.script_bytes - len(script) - 1) + "\n" if self.script_bytes > len(script) else script


@dataclass
class Submission:
    incident_id: str
    old_job_id: str
    new_job_id: str
    checkpoint_uri: str
    checkpoint_step: int
