"""Run on a compute node, inside a hung job's allocation (``srun --overlap --jobid``): find the job's
processes on this node and dump their Python stacks with py-spy. Read-only: nothing is signalled.

It is not installed on the nodes: the agent sends this file's text as the program of ``python3 -c``,
so it uses the standard library only and runs on any Python 3.8+. It prints one JSON line,
``{"outcome": ..., "text": ...}`` (an EvidenceOutcome), and exits 0 whatever it found.

The job's processes come from ``scontrol listpids <job>``: Slurm's own process tracking (cgroup or
process group) asked on the node itself, through this node's slurmd, so neither a cgroup layout nor an
environment variable a process could have changed is guessed at. The processes of evidence steps (this
one, and any other capture of the same job running at once) are left out: they carry EVIDENCE_MARK.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

# Left for printing the answer once the dumps are killed at the deadline.
_MARGIN_SECONDS = 0.5
# In the environment of every evidence step (the agent's srun sets it; srun exports it to the task).
EVIDENCE_MARK = "HYPERPOD_RECOVERY_EVIDENCE_STEP=1"


def listed_pids(listing: str, own_step: str | None) -> list[int]:
    """PIDs of ``scontrol listpids`` output (``PID JOBID STEPID LOCALID GLOBALID`` lines under a
    header), without those of ``own_step``."""
    pids = []
    for line in listing.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[0].isdigit() and fields[2] != own_step:
            pids.append(int(fields[0]))
    return pids


def program_name(pid: int) -> str:
    """The process's executable's name (what py-spy reads too), or its comm when it cannot be read."""
    try:
        return os.path.basename(os.readlink(f"/proc/{pid}/exe"))
    except OSError:
        try:
            with open(f"/proc/{pid}/comm") as handle:
                return handle.read().strip()
        except OSError:
            return "?"


def is_evidence_step(pid: int) -> bool:
    """Whether the process belongs to an evidence step (ours, or another capture's at the same time)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return EVIDENCE_MARK.encode() in handle.read().split(b"\0")
    except OSError:
        return False  # gone, or not ours to read: py-spy will say


def is_python(name: str) -> bool:
    return name.startswith("python") or name.startswith("pypy")


def first_error_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else "no output"


def dump(job_id: str, tool: str, scontrol: str, seconds: float, node: str) -> tuple[str, str]:
    deadline = time.monotonic() + seconds
    try:
        listing = subprocess.run(  # noqa: S603 - an argument list, never a shell
            [scontrol, "listpids", job_id], capture_output=True, text=True, timeout=max(1.0, seconds / 2), check=False
        )
    except subprocess.TimeoutExpired:
        return "timed_out", f"scontrol listpids {job_id} did not answer in {max(1.0, seconds / 2):.0f} s on {node}"
    except OSError as exc:
        return "failed", f"scontrol listpids could not run on {node}: {exc}"
    if listing.returncode != 0:
        return "failed", f"scontrol listpids {job_id} on {node}: {first_error_line(listing.stderr or listing.stdout)}"
    own = os.getpid()
    pids = [pid for pid in listed_pids(listing.stdout, os.environ.get("SLURM_STEP_ID")) if pid != own and not is_evidence_step(pid)]
    if not pids:
        return "no_process", f"job {job_id} has no process on {node}"
    names = {pid: program_name(pid) for pid in pids}
    found = ", ".join(f"{name}({pid})" for pid, name in sorted(names.items()))
    program = shutil.which(tool)
    if program is None:
        return "tool_absent", f"{tool} is not installed on {node} (not on PATH): its stacks were not dumped; job {job_id} runs {found}"
    python = [pid for pid in sorted(names) if is_python(names[pid])]
    if not python:
        return "no_process", f"no Python process of job {job_id} on {node}: {found}"
    dumps: list[str] = []
    notes: list[str] = []
    timed_out: list[int] = []
    failed, errors = _dump_all(program, python, deadline, seconds, tool, dumps, timed_out, notes)
    if failed and time.monotonic() < deadline - _MARGIN_SECONDS - 1.0:
        # Tried once more while time is left: py-spy's "Failed to get stack traces" can be transient
        # (it read the interpreter mid-change, or another tracer held the process for a moment).
        failed, errors = _dump_all(program, failed, deadline, seconds, tool, dumps, timed_out, notes)
    notes.extend(errors)
    text = "\n\n".join(dumps + notes)
    if dumps:
        return "captured", text
    return ("timed_out" if timed_out else "failed"), text


def _dump_all(
    program: str, pids: list[int], deadline: float, seconds: float, tool: str, dumps: list[str], timed_out: list[int], notes: list[str]
) -> tuple[list[int], list[str]]:
    """Dump ``pids`` all at once (one stuck process must not take the others' time); the pids whose
    dump failed (not those that timed out: no time is left for them), and why."""
    quiet = {**os.environ, "RUST_BACKTRACE": "0"}
    running = {
        pid: subprocess.Popen(  # noqa: S603 - an argument list, never a shell
            [program, "dump", "--pid", str(pid)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=quiet
        )
        for pid in pids
    }
    failed, errors = [], []
    for pid, process in running.items():
        try:
            out, err = process.communicate(timeout=max(0.1, deadline - _MARGIN_SECONDS - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            timed_out.append(pid)
            notes.append(f"{tool} dump --pid {pid} did not answer in {seconds:.0f} s")
            continue
        if process.returncode == 0 and out.strip():
            dumps.append(out.rstrip("\n"))
        else:
            failed.append(pid)
            errors.append(f"{tool} dump --pid {pid} exited {process.returncode}: {first_error_line(err or out)}")
    return failed, errors


def main(argv: list[str]) -> int:
    job_id, tool, scontrol, seconds = argv[1], argv[2], argv[3], float(argv[4])
    node = os.environ.get("SLURMD_NODENAME", "this node")
    outcome, text = dump(job_id, tool, scontrol, seconds, node)
    print(json.dumps({"outcome": outcome, "text": text}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
