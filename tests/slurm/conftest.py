"""A real Slurm (Debian's slurmctld + 4 slurmd on this host, tools/slurm_up.sh) for the agent's tests.

SLURM_VERSION picks which: 22.05 (default; Debian 12's packages on the host) or 24.11 (Debian 13's, in
the trixie root of tools/slurm_root.sh). Every test here runs on either; `make test` runs them once per
version. Needs root and the packages (or the root); `.ci/run` installs both and sets
HYPERPOD_RECOVERY_REQUIRE_SLURM=1, which turns "Slurm not available" from a skip into a failure so CI can
never pass without running them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hyperpod_recovery_agent.slurm import SlurmCli
from tests.conftest import ROOT

NODES = [f"ip-10-1-0-{n}" for n in range(1, 5)]
PYTHONPATH = [ROOT / "layers" / "recovery_core", ROOT / "agent"]
# slurmctld's EpilogSlurmctld: the agent's job-ended hook, once a test has configured it (epilog.env).
# slurmctld gives it no environment beyond SLURM_JOB_*, so everything else is set here.
EPILOG_WRAPPER = """#!/bin/sh
[ -f %(base)s/epilog.env ] || exit 0
. %(base)s/epilog.env
PYTHONPATH=%(pythonpath)s exec %(python)s -m hyperpod_recovery_agent --config %(base)s/agent.toml job-ended 2>> %(base)s/epilog.log
"""
DEADLINE_SECONDS = 60  # a real scheduler: poll its state, never sleep a fixed time


DRILL_BASE = Path("/tmp/hyperpod-recovery-slurm")  # the Makefile's SLURM_BASE
SLURM_VERSIONS = ("22.05", "24.11")
SLURM_ROOT = Path(os.environ.get("SLURM_ROOT", "/var/lib/hyperpod-recovery/trixie"))
ROOT_MARKER = ".hyperpod-recovery-root"  # tools/slurm_root.sh's: the root is complete


def drill_slurm_running(base: Path = DRILL_BASE) -> bool:
    """Whether the slurmctld of ``base``'s pid file runs (checked as tools/slurm_down.sh checks it:
    the pid's process is still called slurmctld)."""
    try:
        pid = int((base / "slurmctld.pid").read_text().strip())
        return Path(f"/proc/{pid}/comm").read_text().strip() == "slurmctld"
    except (OSError, ValueError):
        return False


def _unavailable(reason: str) -> None:
    if os.environ.get("HYPERPOD_RECOVERY_REQUIRE_SLURM") == "1":
        pytest.fail(f"real Slurm required but {reason}")
    pytest.skip(f"real Slurm not available: {reason}")


def slurm_version() -> str:
    """The Slurm the tests run on: SLURM_VERSION, 22.05 when unset."""
    version = os.environ.get("SLURM_VERSION") or "22.05"
    if version not in SLURM_VERSIONS:
        pytest.fail(f"SLURM_VERSION={version}: one of {', '.join(SLURM_VERSIONS)}")
    return version


@pytest.fixture(scope="session")
def slurm_env() -> Iterator[dict[str, str]]:
    version = slurm_version()
    required = os.environ.get("HYPERPOD_RECOVERY_REQUIRE_SLURM") == "1"
    if os.geteuid() != 0:
        _unavailable("the tests start slurmctld/slurmd and need root")
    if version == "22.05" and not (shutil.which("slurmctld") or required):
        _unavailable("slurmctld is not installed (apt-get install slurmctld slurmd slurm-client munge)")
    if version == "24.11" and not ((SLURM_ROOT / ROOT_MARKER).exists() or required):
        _unavailable(f"no Slurm 24.11 root at {SLURM_ROOT} (tools/slurm_root.sh makes it, in about a minute)")
    # The Slurm of `make drill SLURM=real` holds the same ports; it is its owner's to stop, not ours.
    if drill_slurm_running():
        _unavailable(f"the Slurm of `make drill SLURM=real` runs from {DRILL_BASE} on the same ports: `make drill-down` stops it")
    # Every user's sbatch reads slurm.conf (test_resubmit_as_owner.py submits as a non-root user): its
    # directory is one of the system's temporary directory, open to all as on a real cluster. (Not under
    # pytest's: any other pytest session of root's makes pytest-of-root root's alone again, mid-run.)
    base = Path(tempfile.mkdtemp(prefix="hyperpod-recovery-slurm-tests-"))
    base.chmod(0o755)
    # The hook lives on a filesystem of its own, as a checkout on its own disk or in Debian 13's tmpfs
    # /tmp does: slurmctld (chrooted, for 24.11) must still find it on the host.
    hook = base / "hook"
    hook.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0755", "hyperpod-recovery-hook", str(hook)], check=True)
    epilog = hook / "epilog.sh"
    epilog.write_text(EPILOG_WRAPPER % {"base": base, "python": sys.executable, "pythonpath": os.pathsep.join(map(str, PYTHONPATH))})
    epilog.chmod(0o755)
    env = {**os.environ, "BASE": str(base), "NODES": str(len(NODES)), "EPILOG": str(epilog), "SLURM_VERSION": version}
    try:
        up = subprocess.run([str(ROOT / "tools" / "slurm_up.sh")], env=env, capture_output=True, text=True, check=False)
        if up.returncode != 0:
            pytest.fail(f"tools/slurm_up.sh failed:\n{up.stdout}\n{up.stderr}")
        ready = {**os.environ, **exported(up.stdout)}
        RUNNING.update(version=SlurmCli(env=ready).version())  # the session's summary names it
        yield ready
    finally:  # also when slurm_up.sh failed half-way: what it started is ours to stop
        stopped = stop_slurm(base)
        subprocess.run(["umount", str(hook)], check=False)
        if stopped.returncode != 0:
            warnings.warn(f"tools/slurm_down.sh left a daemon running (its logs are in {base}):\n{stopped.stdout}", stacklevel=1)
        else:
            shutil.rmtree(base, ignore_errors=True)


RUNNING: dict[str, str] = {}  # the release the session's Slurm says it is, for the terminal summary


def exported(said: str) -> dict[str, str]:
    """tools/slurm_up.sh's ``export NAME=value`` lines (SLURM_CONF; PATH for 24.11's commands)."""
    values = {}
    for line in said.splitlines():
        name, _, value = line.removeprefix("export ").partition("=")
        if line.startswith("export ") and name:
            values[name] = value.replace("$PATH", os.environ.get("PATH", ""))
    return values


def login_path(slurm_env: dict[str, str]) -> str:
    """A login shell's PATH on this cluster: the session's Slurm commands first (24.11's), then the system's."""
    added = slurm_env.get("PATH", "").removesuffix(os.environ.get("PATH", "")).rstrip(":")
    return ":".join(part for part in (added, "/usr/local/bin:/usr/bin:/bin") if part)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if RUNNING:
        terminalreporter.write_line(f"real Slurm {RUNNING['version']} (SLURM_VERSION={slurm_version()})")


def stop_slurm(base: Path) -> subprocess.CompletedProcess[str]:
    """Stop what tools/slurm_up.sh started under ``base``, munged included when it started it (a munged
    that ran before is left running); ``base`` and its logs stay."""
    return subprocess.run(
        [str(ROOT / "tools" / "slurm_down.sh"), "--munged"],
        env={**os.environ, "BASE": str(base)},  # (the root a 24.11 ran from is recorded in the base)
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.fixture
def slurm(slurm_env: dict[str, str]) -> Iterator[SlurmCli]:
    """A clean cluster per test: no jobs, every node idle."""
    cli = SlurmCli(env=slurm_env)
    yield cli
    subprocess.run(["scancel", "-u", "root"], env=slurm_env, check=False)
    subprocess.run(["scontrol", "update", f"NodeName={','.join(NODES)}", "State=RESUME"], env=slurm_env, capture_output=True, check=False)
    wait_for(lambda: all(not s.drained_or_draining for s in cli.node_states(NODES).values()), "nodes resumed")


@pytest.fixture
def job_dir(tmp_path: Path) -> Path:
    tmp_path.chmod(0o777)
    return tmp_path


def wait_for(condition: Callable[[], object], what: str) -> object:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.25)
    raise AssertionError(f"timed out after {DEADLINE_SECONDS} s waiting for {what}")


def sbatch(env: dict[str, str], *args: str, script: str) -> str:
    done = subprocess.run(["sbatch", "--parsable", *args], input=script, env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip().split(";", 1)[0]


def job_state(env: dict[str, str], job_id: str) -> str:
    done = subprocess.run(
        ["squeue", "-h", "-j", job_id, "-o", "%T", "--states", "all"], env=env, capture_output=True, text=True, check=False
    )
    return done.stdout.strip()
