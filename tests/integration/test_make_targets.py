"""What the make targets an operator meets first say and leave behind: `make drill SLURM=real` says
what it sets up, `make drill-down` undoes it, `make deploy` checks before it builds, `make install` puts the command on PATH."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT


def _make(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "-s", "-f", str(ROOT / "Makefile"), *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


# --- make drill SLURM=real / make drill-down -------------------------------------------------------
@pytest.mark.parametrize(("version", "installs"), [("22.05", "apt-get"), ("24.11", "debootstrap")])
def test_a_real_slurm_drill_says_what_it_installs_starts_and_leaves_before_doing_it(version: str, installs: str) -> None:
    # When make shows what `make drill SLURM=real` would run, on either Slurm version
    recipe = _make("-n", "drill", "SLURM=real", f"SLURM_VERSION={version}").stdout
    # Then the explanation comes before the script that installs packages and starts daemons
    plan, _, rest = recipe.partition("tools/slurm_up.sh")
    assert rest, recipe
    for promise in (installs, f"Slurm {version}", "slurmctld slurmd slurm-client munge", "munged", "slurmd", "sleep", "make drill-down"):
        assert promise in plan, promise
    # And after the drill it says again what is still running
    assert f"still running: Slurm {version}'s munged, slurmctld" in rest and "make drill-down stops them" in rest


# --- make drill's arguments ------------------------------------------------------------------------
def _refused_by_make(done: subprocess.CompletedProcess[str]) -> str:
    """make exits 2 when a recipe fails; the tool's own line is the first on stderr and says why."""
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    ours = done.stderr.splitlines()[0]
    assert ours.startswith("error: ") and all(line.startswith("make") for line in done.stderr.splitlines()[1:]), done.stderr
    return ours


def test_make_drill_with_a_folder_as_scenario_says_so_in_one_line() -> None:
    ours = _refused_by_make(_make("drill", "SCENARIO=events/drills"))
    assert "events/drills is a directory" in ours


def test_make_drill_with_a_file_as_out_leaves_the_file_alone(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# keep me\n")
    ours = _refused_by_make(_make("drill", f"OUT={readme}"))
    assert "--out" in ours and "not a directory" in ours and readme.read_text() == "# keep me\n"


def test_make_drill_real_checks_the_scenario_before_setting_up_slurm() -> None:
    # A bad scenario must not cost an apt-get and three daemons first
    recipe = _make("-n", "drill", "SLURM=real").stdout
    assert recipe.index("sandbox check") < recipe.index("tools/slurm_up.sh")


def test_make_drill_with_an_unknown_slurm_mode_is_refused() -> None:
    ours = _refused_by_make(_make("drill", "SLURM=reel"))
    assert "SLURM=reel" in ours and "simulated" in ours and "real" in ours


@pytest.fixture
def fake_daemons(tmp_path: Path) -> Iterator[dict[str, subprocess.Popen[bytes]]]:
    """Stand-ins named like Slurm's daemons (a copy of `sleep` under each name): what slurm_down.sh
    sees of a real slurmctld, slurmd or munged is its name and pid."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    sleep = shutil.which("sleep")
    assert sleep is not None
    started: dict[str, subprocess.Popen[bytes]] = {}
    for name in ("slurmctld", "slurmd", "munged", "bystander"):
        binary = bin_dir / name
        shutil.copy(sleep, binary)
        started[name] = subprocess.Popen([str(binary), "600"])
    yield started
    for process in started.values():
        process.kill()
        process.wait()


def _slurm_base(tmp_path: Path, pids: dict[str, int]) -> Path:
    """A SLURM_BASE as tools/slurm_up.sh lays it out, naming the given pids."""
    base = tmp_path / "slurm"
    for folder in ("state", "spool", "log", "jobs"):
        (base / folder).mkdir(parents=True)
    for file, pid in pids.items():
        (base / file).write_text(f"{pid}\n")
    return base


def _stopped(process: subprocess.Popen[bytes]) -> bool:
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        return False
    return True


def test_drill_down_stops_the_daemons_and_the_munged_slurm_up_started_and_removes_the_base(
    tmp_path: Path, fake_daemons: dict[str, subprocess.Popen[bytes]]
) -> None:
    # Given the daemons tools/slurm_up.sh started, munged among them (its pid copied into the base)
    pids = {name: fake_daemons[name].pid for name in ("slurmctld", "slurmd", "munged")}
    base = _slurm_base(
        tmp_path, {"slurmctld.pid": pids["slurmctld"], "slurmd-ip-10-1-0-1.pid": pids["slurmd"], "munged.pid": pids["munged"]}
    )
    (base / "installed-packages").write_text("slurmctld slurmd slurm-client munge\n")
    # When the operator undoes the drill
    done = _make("drill-down", f"SLURM_BASE={base}")
    # Then every daemon is stopped, the base is gone, and it said so, and that the packages stay
    assert done.returncode == 0, done.stdout + done.stderr
    assert all(_stopped(fake_daemons[name]) for name in ("slurmctld", "slurmd", "munged"))
    assert not base.exists()
    for line in (
        f"stopped slurmd (pid {pids['slurmd']})",
        f"stopped slurmctld (pid {pids['slurmctld']})",
        f"stopped munged (pid {pids['munged']})",
    ):
        assert f"slurm_down: {line}\n" in done.stdout
    assert "left installed: slurmctld slurmd slurm-client munge (tools/slurm_up.sh installed them; apt-get purge" in done.stdout
    assert f"slurm_down: removed {base}\n" in done.stdout


def test_drill_down_leaves_a_munged_it_did_not_start_and_a_process_that_reused_a_pid(
    tmp_path: Path, fake_daemons: dict[str, subprocess.Popen[bytes]]
) -> None:
    # Given munged running before slurm_up.sh (no munged.pid in the base), and a slurmctld.pid whose
    # process died and whose pid now belongs to another program
    base = _slurm_base(tmp_path, {"slurmctld.pid": fake_daemons["bystander"].pid})
    # When the operator undoes the drill
    done = _make("drill-down", f"SLURM_BASE={base}")
    # Then neither is touched, and it says why
    assert done.returncode == 0, done.stdout + done.stderr
    assert fake_daemons["munged"].poll() is None and fake_daemons["bystander"].poll() is None
    assert "slurm_down: slurmctld: not running (stale slurmctld.pid)" in done.stdout
    assert "left running, it was running before tools/slurm_up.sh" in done.stdout
    assert not base.exists()


def test_drill_down_with_nothing_started_says_so(tmp_path: Path) -> None:
    done = _make("drill-down", f"SLURM_BASE={tmp_path / 'never-started'}")
    assert done.returncode == 0 and "nothing under" in done.stdout


def test_drill_down_never_removes_a_directory_slurm_up_did_not_lay_out(tmp_path: Path) -> None:
    # Given SLURM_BASE pointing at somebody's directory by mistake
    precious = tmp_path / "home"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep me")
    done = _make("drill-down", f"SLURM_BASE={precious}")
    assert done.returncode == 0 and (precious / "notes.txt").exists() and "not a tools/slurm_up.sh directory" in done.stdout


# --- make deploy / arm / install ----------------------------------------------------------------
@pytest.fixture
def fake_sam(tmp_path: Path) -> Path:
    """A sam that records each call: the deploy must not reach it (nor its build) when it fails first."""
    sam = tmp_path / "sam"
    sam.write_text(f'#!/bin/sh\necho "sam $*" >> {tmp_path / "sam-calls"}\n')
    sam.chmod(0o755)
    return sam


def _with_this_checkout(env: dict[str, str] | None = None) -> tuple[str, dict[str, str]]:
    """The operator's command as this checkout's code (HPR=...), whatever venv the suite runs in."""
    paths = ":".join(str(ROOT / p) for p in ("layers/recovery_core", "training", "agent", "cli", "."))
    return f"HPR={sys.executable} -m hyperpod_recovery_cli", {**(env or os.environ), "PYTHONPATH": paths}


def test_deploy_without_credentials_fails_in_one_line_before_building_anything(tmp_path: Path, fake_sam: Path) -> None:
    # Given a laptop with no AWS credentials and no region (the cluster's ARN names one)
    empty = tmp_path / "aws"
    empty.write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env |= {"AWS_CONFIG_FILE": str(empty), "AWS_SHARED_CREDENTIALS_FILE": str(empty), "AWS_EC2_METADATA_DISABLED": "true"}
    hpr, env = _with_this_checkout(env)
    cluster = "CLUSTER=arn:aws:sagemaker:us-west-2:111122223333:cluster/a1b2c3d4e5f6"
    done = subprocess.run(
        ["make", "-s", "-o", ".venv/.installed", "deploy", cluster, "BUCKETS=ckpt", f"SAM={fake_sam}", "YES=1", hpr],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    # Then the tool's one line comes first, make reports its exit code 3, and neither sam build nor deploy ran
    lines = done.stderr.splitlines()
    assert done.returncode == 2 and lines[0].startswith("hyperpod-recovery: no AWS credentials found:"), done.stderr
    assert "Error 3" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "sam-calls").exists()


def test_deploy_builds_only_from_inside_the_tool_after_its_checks() -> None:
    # What make runs: the tool alone, which runs `make build` itself once credentials and cluster are read
    recipe = _make("-n", "-o", ".venv/.installed", "deploy", "CLUSTER=llm-train", "STACK=hpr", "PARAMS=SlackChannelId=C1").stdout
    assert "bin/sam build" not in recipe and "bin/sam deploy" not in recipe, recipe
    for part in ("deploy --cluster 'llm-train'", "--stack 'hpr'", "--param 'SlackChannelId=C1'", "--build-with '", " build'"):
        assert part in recipe, part


@pytest.mark.parametrize("target", ["arm", "preflight", "drill-aws"])
def test_a_target_without_a_stack_says_so_in_one_line_on_stderr_naming_the_variables(target: str) -> None:
    done = _make("-o", ".venv/.installed", target, "HYPERPOD_RECOVERY_STACK=")
    said = f"make {target} needs STACK=<your stack name> or $HYPERPOD_RECOVERY_STACK (and AWS credentials for its account)"
    assert done.returncode == 2 and done.stderr.splitlines()[0] == said


def test_a_targets_stack_defaults_to_the_environment_variable_as_the_commands_does() -> None:
    recipe = _make("-n", "-o", ".venv/.installed", "preflight", "HYPERPOD_RECOVERY_STACK=prod-recovery").stdout
    assert "preflight --stack prod-recovery" in recipe


def test_install_puts_the_command_on_path_with_pipx(tmp_path: Path) -> None:
    # Given pipx on PATH (a stand-in that records its arguments)
    pipx = tmp_path / "pipx"
    pipx.write_text(f'#!/bin/sh\necho "$*" > {tmp_path / "pipx-args"}\n')
    pipx.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:/usr/bin:/bin"}
    done = subprocess.run(["make", "-s", "install"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False)
    # Then pipx installed this checkout, and make says where the command is (or how to put it on PATH)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "pipx-args").read_text().strip() == "install --force ."
    assert "hyperpod-recovery is on PATH" in done.stdout or "export PATH=" in done.stdout


def test_install_without_pipx_makes_a_venv_of_its_own_and_links_the_command(tmp_path: Path) -> None:
    # Given no pipx, and a python whose venv and pip are stand-ins that record what they were asked
    python = tmp_path / "python3"
    python.write_text(
        "#!/bin/sh\n"  # called as: python3 -m venv --clear DIR
        'mkdir -p "$4/bin"\n'
        f'printf \'#!/bin/sh\\necho "$*" > {tmp_path}/pip-args\\n\' > "$4/bin/pip"\n'
        "printf '#!/bin/sh\\n' > \"$4/bin/hyperpod-recovery\"\n"
        'chmod +x "$4/bin/pip" "$4/bin/hyperpod-recovery"\n'
    )
    python.chmod(0o755)
    home, bin_dir = tmp_path / "share", tmp_path / "bin"
    env = {**os.environ, "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        ["make", "-s", "install", f"TOOLS_PYTHON={python}", f"INSTALL_HOME={home}", f"BIN_DIR={bin_dir}"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    # Then this checkout is pip-installed into that venv, the command is linked into BIN_DIR, and make
    # says how to put BIN_DIR on PATH
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "pip-args").read_text().strip() == "install --quiet ."
    assert (bin_dir / "hyperpod-recovery").resolve() == (home / "bin" / "hyperpod-recovery").resolve()
    assert f'export PATH="{bin_dir}:$PATH"' in done.stdout


def test_make_help_lists_the_new_targets() -> None:
    listed = _make("help").stdout
    assert "make drill-down " in listed and "make readme-sample " in listed and "make preflight " in listed
    for target in ("deploy", "arm", "install", "preflight-sandbox", "drills", "oncall"):
        assert f"make {target} " in listed, target


# --- make oncall -----------------------------------------------------------------------------------
@pytest.mark.sandbox
def test_make_oncall_plays_the_scenario_then_runs_each_command_on_its_stack(tmp_path: Path) -> None:
    done = _make(
        "oncall",
        f"OUT={tmp_path}",
        "RUN=locks --stack sandbox;incidents show {incident} --stack sandbox;hold {hostname} --stack sandbox --reason 'RMA 42' --yes",
    )
    assert done.returncode == 0, done.stderr
    assert "$ hyperpod-recovery locks --stack sandbox" in done.stdout and "hostname lock" in done.stdout
    assert "{incident}" not in done.stdout and "outcome: escalated   error: RejoinDeadlineExceeded" in done.stdout
    assert "held by" in done.stdout and ": RMA 42" in done.stdout  # a quoted reason reaches the command as written
