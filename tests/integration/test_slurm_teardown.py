"""The real-Slurm tests stop what they started, munged included (issue 31: `make test` left munged
running), and only that. The daemons are stand-ins named like them (a copy of `sleep` under each
name): what tools/slurm_down.sh sees of a daemon is its name and its pid."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.slurm.conftest import drill_slurm_running, stop_slurm


@pytest.fixture
def daemons(tmp_path: Path) -> Iterator[dict[str, subprocess.Popen[bytes]]]:
    sleep = shutil.which("sleep")
    assert sleep is not None
    started: dict[str, subprocess.Popen[bytes]] = {}
    for name, folder in (("slurmctld", "ours"), ("slurmd", "ours"), ("munged", "ours"), ("munged", "before")):
        binary = tmp_path / folder / name
        binary.parent.mkdir(exist_ok=True)
        shutil.copy(sleep, binary)
        started[f"{folder}/{name}"] = subprocess.Popen([str(binary), "600"])
    yield started
    for process in started.values():
        process.kill()
        process.wait()


def base_naming(tmp_path: Path, pids: dict[str, int]) -> Path:
    """A base as tools/slurm_up.sh lays it out, its pid files naming ``pids``."""
    base = tmp_path / "slurm"
    for folder in ("state", "spool", "log"):
        (base / folder).mkdir(parents=True)
    (base / "slurm.conf").write_text("ClusterName=ci\n")
    for file, pid in pids.items():
        (base / file).write_text(f"{pid}\n")
    return base


def stopped(process: subprocess.Popen[bytes]) -> bool:
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        return False
    return True


def test_given_the_munged_slurm_up_started_for_the_tests_when_they_end_then_it_is_stopped_with_the_rest_and_the_logs_stay(
    tmp_path: Path, daemons: dict[str, subprocess.Popen[bytes]]
) -> None:
    # Given the daemons slurm_up.sh started for the tests, munged among them (its pid copied into the base)
    pids = {name: daemons[f"ours/{name}"].pid for name in ("slurmctld", "slurmd", "munged")}
    files = {"slurmctld.pid": pids["slurmctld"], "slurmd-ip-10-1-0-1.pid": pids["slurmd"], "munged.pid": pids["munged"]}
    base = base_naming(tmp_path, files)
    # When the tests' session ends
    done = stop_slurm(base)
    # Then all three are stopped, it says so, and the base (the daemons' logs) is left for pytest
    assert done.returncode == 0, done.stdout + done.stderr
    assert all(stopped(daemons[f"ours/{name}"]) for name in ("slurmctld", "slurmd", "munged"))
    assert f"slurm_down: stopped munged (pid {pids['munged']})\n" in done.stdout
    assert (base / "log").is_dir()


def test_given_a_munged_that_ran_before_the_tests_when_they_end_then_it_is_left_running(
    tmp_path: Path, daemons: dict[str, subprocess.Popen[bytes]]
) -> None:
    # Given munged running before slurm_up.sh (so no munged.pid in the base)
    base = base_naming(tmp_path, {"slurmctld.pid": daemons["ours/slurmctld"].pid})
    done = stop_slurm(base)
    assert done.returncode == 0, done.stdout + done.stderr
    assert stopped(daemons["ours/slurmctld"])
    assert daemons["before/munged"].poll() is None and daemons["ours/munged"].poll() is None
    assert "left running, it was running before tools/slurm_up.sh" in done.stdout


def test_given_the_slurm_of_make_drill_running_when_the_tests_start_then_they_see_it_and_leave_it_alone(
    tmp_path: Path, daemons: dict[str, subprocess.Popen[bytes]]
) -> None:
    # Given `make drill SLURM=real`'s slurmctld (the tests used to stop it to take its ports)
    drill = base_naming(tmp_path, {"slurmctld.pid": daemons["ours/slurmctld"].pid})
    # Then it is seen as running, and nothing stops it
    assert drill_slurm_running(drill)
    assert daemons["ours/slurmctld"].poll() is None
    # And a pid file whose process is another program, or no pid file, is no running Slurm
    (drill / "slurmctld.pid").write_text(f"{daemons['ours/slurmd'].pid}\n")
    assert not drill_slurm_running(drill)
    assert not drill_slurm_running(tmp_path / "never-started")
