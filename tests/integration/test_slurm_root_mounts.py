"""Slurm 24.11's root sees the host through mounts that never reach the host (tools/slurm_root_ns.sh):
they are made in a mount namespace of the daemons' own (propagation slave), end with its last process,
and are never unmounted on the host. A systemd host is played by a namespace in which / is made shared
(this machine's mounts are private, so the hazard cannot show here otherwise). The daemons are
stand-ins: copies of `sleep` under their names, chrooted under the root as the real ones are."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT

TOOLS = ROOT / "tools"
TRIXIE = Path("/var/lib/hyperpod-recovery/trixie")  # tools/slurm_root.sh's (made by .ci/run)


def _namespaces_available() -> bool:
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return False
    return subprocess.run(["unshare", "--mount", "true"], capture_output=True, check=False).returncode == 0


pytestmark = pytest.mark.skipif(not _namespaces_available(), reason="needs root and mount namespaces (unshare)")


def mounted_under(path: Path) -> list[str]:
    """This (the host's) mount table's mount points under ``path``."""
    targets = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    return [t for t in targets if t == str(path) or t.startswith(f"{path}/")]


def alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


@pytest.fixture
def started(tmp_path: Path) -> Iterator[list[int]]:
    """The pids of the stand-ins a test starts; each still running at the end is killed (ours alone)."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def start_in_root(tmp_path: Path, name: str, started: list[int]) -> tuple[Path, Path, int]:
    """A stand-in daemon called ``name`` started as tools/slurm_up.sh starts 24.11's: through
    slurm_root_ns.sh, chrooted under a root (here /run/host in it: the root has no programs of its own)."""
    base, root, bin_dir = tmp_path / "base", tmp_path / "root", tmp_path / "bin"
    for folder in (base / "state", base / "log", root, bin_dir):
        folder.mkdir(parents=True, exist_ok=True)
    sleep = shutil.which("sleep")
    assert sleep is not None
    shutil.copy(sleep, bin_dir / name)
    (base / "slurm.conf").write_text("ClusterName=ci\n")
    (base / "version").write_text("24.11\n")
    start = 'chroot "$1/run/host" "$2" 600 </dev/null >/dev/null 2>&1 & echo $! > "$3"'
    command = ["/bin/sh", "-c", start, "sh", str(root), str(bin_dir / name), str(base / f"{name}.pid")]
    done = subprocess.run(
        [str(TOOLS / "slurm_root_ns.sh"), "--record", str(base), str(root), str(tmp_path), "--", *command],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    pid = int((base / f"{name}.pid").read_text())
    started.append(pid)
    return base, root, pid


def test_the_roots_mounts_are_in_the_daemons_namespace_only_and_none_propagates(tmp_path: Path, started: list[int]) -> None:
    # Given a daemon started in the root's namespace
    base, root, pid = start_in_root(tmp_path, "slurmctld", started)
    # Then nothing is mounted under the root on the host
    assert mounted_under(root) == []
    # And the namespace and the root are recorded, the namespace being the daemon's, not the host's
    namespace = (base / "mount-ns").read_text().strip()
    assert namespace == os.readlink(f"/proc/{pid}/ns/mnt") != os.readlink("/proc/self/ns/mnt")
    assert (base / "root").read_text().strip() == str(root)
    # And in it, each recorded mount is there, and none under the root is shared (none sends events out)
    table = subprocess.run(
        ["nsenter", "-t", str(pid), "-m", "findmnt", "-rn", "-o", "TARGET,PROPAGATION"], capture_output=True, text=True, check=True
    ).stdout
    propagation = dict(line.rsplit(" ", 1) for line in table.splitlines())
    recorded = (base / "mounts").read_text().split()
    assert recorded[:3] == [f"{root}/run/host", f"{root}/proc", f"{root}/sys"] and f"{root}{tmp_path}" in recorded
    assert all(target in propagation for target in recorded)
    assert not [kind for target, kind in propagation.items() if target.startswith(f"{root}/") and "shared" in kind]


def test_slurm_down_without_slurm_root_in_its_environment_uses_the_recorded_root_and_the_namespace_ends(
    tmp_path: Path, started: list[int]
) -> None:
    # Given a 24.11 run from a root other than the default (SLURM_ROOT=/x), its commands in <root>/host-bin
    base, root, pid = start_in_root(tmp_path, "slurmctld", started)
    host_bin = root / "host-bin"
    host_bin.mkdir()
    for command in ("squeue", "scancel"):
        (host_bin / command).write_text(f'#!/bin/sh\necho {command} >> "{tmp_path}/asked"\n')
        (host_bin / command).chmod(0o755)
    (base / "slurmctld.pid").write_text(f"{pid}\n")
    # When it is stopped without SLURM_ROOT (make drill-down in another shell)
    environment = {k: v for k, v in os.environ.items() if k != "SLURM_ROOT"}
    done = subprocess.run(
        [str(TOOLS / "slurm_down.sh")], env={**environment, "BASE": str(base)}, capture_output=True, text=True, check=False
    )
    # Then it asked the recorded root's commands, stopped the daemon, and its namespace ended with it
    assert done.returncode == 0, done.stdout + done.stderr
    assert "squeue" in (tmp_path / "asked").read_text()
    assert not alive(pid)
    assert "slurm_down: Slurm 24.11's mount namespace ended with its processes" in done.stdout
    assert not (base / "mount-ns").exists() and mounted_under(root) == []


def test_slurm_down_says_what_still_runs_in_the_namespace_and_fails(tmp_path: Path, started: list[int]) -> None:
    # Given a process in the namespace that no pid file names (a job's orphan)
    base, _root, pid = start_in_root(tmp_path, "slurmstepd", started)
    done = subprocess.run(
        [str(TOOLS / "slurm_down.sh")], env={**os.environ, "BASE": str(base)}, capture_output=True, text=True, check=False
    )
    assert done.returncode == 1 and f"{pid}(slurmstepd)" in done.stdout, done.stdout
    assert alive(pid) and (base / "mount-ns").exists()


def test_a_start_of_either_version_is_refused_while_an_earlier_24_11_of_the_base_still_runs(tmp_path: Path, started: list[int]) -> None:
    # Given a 24.11 run of this base interrupted after its munged started
    base, _root, pid = start_in_root(tmp_path, "munged", started)
    # When Slurm 22.05 is started on the same base
    try:
        done = subprocess.run(
            [str(TOOLS / "slurm_up.sh")],
            env={**os.environ, "BASE": str(base), "SLURM_VERSION": "22.05"},
            capture_output=True,
            text=True,
            check=False,
        )
    finally:  # (a start that was not refused is stopped again, never left running)
        if (base / "slurmctld.pid").exists():
            subprocess.run([str(TOOLS / "slurm_down.sh"), "--munged"], env={**os.environ, "BASE": str(base)}, check=False)
    # Then it refuses, naming what runs, and the records of the 24.11 run are kept for slurm_down.sh
    assert done.returncode == 1 and f"{pid}(munged)" in done.stderr and "tools/slurm_down.sh" in done.stderr, done.stderr
    assert (base / "version").read_text() == "24.11\n" and (base / "mount-ns").exists() and (base / "root").exists()


# The arch-chroot hazard, on a host whose / is shared: what is unmounted under the root must never
# unmount the host's own, and what is mounted under the root must never appear on the host.
PLAYS_A_SYSTEMD_HOST = r"""
set -eu
tools=$1 t=$2
mount --make-rshared /
mkdir -p "$t/hostfs" "$t/root" "$t/base"
mount -t tmpfs hostfs "$t/hostfs"; mkdir "$t/hostfs/sub"; mount -t tmpfs sub "$t/hostfs/sub"
"$tools/slurm_root_ns.sh" --record "$t/base" "$t/root" "$t/hostfs" -- /bin/sh -c '
  findmnt -rn -o TARGET,PROPAGATION | grep "^$1/" > "$3/in-namespace"
  for target in "$1/run/host$2/hostfs/sub" "$1$2/hostfs/sub"; do umount "$target" || echo "$target gone already" >&2; done
  umount -R "$1/sys"' sh "$t/root" "$t" "$t/base"
echo "host: $(findmnt -rn -o TARGET,PROPAGATION "$t/hostfs/sub" || echo gone)"
echo "under the root: $(awk -v p="$t/root/" 'index($5, p) == 1' /proc/self/mountinfo | wc -l)"
echo "sys: $(findmnt -rn -o TARGET /sys/fs/cgroup >/dev/null && echo there || echo gone)"
"""


def test_on_a_host_with_shared_mounts_unmounting_under_the_root_never_unmounts_the_hosts(tmp_path: Path) -> None:
    # Given a host whose / is shared (as under systemd), with a filesystem mounted inside another
    # When the root's namespace is made, and in it the copies of both under the root are unmounted
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "--", "bash", "-c", PLAYS_A_SYSTEMD_HOST, "sh", str(TOOLS), str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    said = dict(line.split(": ", 1) for line in done.stdout.splitlines())
    # Then the host's are still mounted, and still shared; nothing of the root's appeared on the host
    assert said == {"host": f"{tmp_path}/hostfs/sub shared", "under the root": "0", "sys": "there"}, done.stdout
    # And in the namespace no mount under the root was shared: each a slave of the host's, or private
    inside = (tmp_path / "base" / "in-namespace").read_text().splitlines()
    assert inside and not [line for line in inside if "shared" in line.rsplit(" ", 1)[1]], inside
    assert any(line.endswith(" private,slave") for line in inside), inside  # (findmnt's word for a slave alone)


def test_the_root_sees_a_filesystem_mounted_on_its_own_and_proc_through_run_host(tmp_path: Path) -> None:
    # (the epilog's view: chrooted into the root by slurmctld, then into /run/host to run the agent's hook)
    if not (TRIXIE / ".hyperpod-recovery-root").exists():
        pytest.skip(f"no Slurm 24.11 root at {TRIXIE} (tools/slurm_root.sh)")
    # Given a checkout on a filesystem of its own (a tmpfs, as Debian 13's /tmp is), mounted before the
    # namespace is made
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "checkout", str(checkout)], check=True)
    try:
        (checkout / "hook.sh").write_text("#!/bin/sh\necho hook ran; test -r /proc/self/status && test -c /dev/null && echo proc and dev\n")
        (checkout / "hook.sh").chmod(0o755)
        base = tmp_path / "base"
        base.mkdir()
        # When a program in the root runs it on the host as the epilog wrapper does
        view = f"exec chroot {TRIXIE} /usr/sbin/chroot /run/host {checkout}/hook.sh"
        done = subprocess.run(
            [str(TOOLS / "slurm_root_ns.sh"), "--record", str(base), str(TRIXIE), "--", "/bin/sh", "-c", view],
            capture_output=True,
            text=True,
            check=False,
        )
    finally:
        subprocess.run(["umount", str(checkout)], check=True)
    # Then the hook is found and runs with /proc and /dev
    assert done.stdout.splitlines() == ["hook ran", "proc and dev"], done.stdout + done.stderr


def test_the_multiarch_folder_is_the_roots_own(tmp_path: Path) -> None:
    # Given a root laid out for Graviton (aarch64)
    (tmp_path / "usr" / "lib" / "aarch64-linux-gnu").mkdir(parents=True)
    (tmp_path / "usr" / "lib" / "aarch64-linux-gnu" / "libc.so.6").write_text("")
    # Then the tools find its folder (PluginDir, the commands' libraries); slurm_up.sh names no machine's itself
    done = subprocess.run(
        ["bash", "-c", f'. "{TOOLS}/slurm_lib.sh"; root_triplet "$1"', "sh", str(tmp_path)], capture_output=True, text=True, check=True
    )
    assert done.stdout == "aarch64-linux-gnu\n"
    assert "x86_64-linux-gnu" not in (TOOLS / "slurm_up.sh").read_text()
