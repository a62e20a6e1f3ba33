"""The lifecycle snippet that installs the agent (agent/install/install_agent.sh) as root on the
controller: it installs the bundle `make dists` writes and nothing else, every wheel pinned by
sha256, no package index asked, and refuses (changing nothing) whatever is not that build.

Each test runs the script with DESTDIR (documented in it): everything lands in a temporary folder,
and neither slurm.conf nor systemd is touched, though CI runs the tests as root."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hyperpod_recovery import __version__
from hyperpod_recovery_agent.config import load_config
from tests.conftest import ROOT
from tools.build_dists import bundle_agent

SCRIPT = ROOT / "agent" / "install" / "install_agent.sh"
QUEUE = "https://sqs.us-west-2.amazonaws.com/123456789012/hyperpod-recovery-CommandQueue-EXAMPLE"
PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
SYSTEM_UNIT = Path("/etc/systemd/system/hyperpod-recovery-agent.service")


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """dist/agent-bundle/ as `make dists` writes it, for the Python running the tests."""
    return bundle_agent(tmp_path_factory.mktemp("dist"), pythons=(PYTHON,))


@pytest.fixture
def copy_of(bundle: tuple[Path, str], tmp_path: Path) -> Iterator[Path]:
    """A copy of the bundle a test may tamper with."""
    folder = tmp_path / "agent-bundle"
    shutil.copytree(bundle[0], folder)
    yield folder


def _install(
    tmp_path: Path,
    source: Path | str,
    digest: str,
    *,
    python: str | None = sys.executable,
    path: str = "/usr/bin:/bin",
    ledger: str | None = None,
    **env: str,
) -> subprocess.CompletedProcess[str]:
    environment = {"PATH": path, "DESTDIR": str(tmp_path / "root"), **env}
    if python is not None:
        environment["HYPERPOD_RECOVERY_PYTHON"] = python
    return subprocess.run(
        ["bash", str(SCRIPT), QUEUE, "llm-train", str(source), digest, *([ledger] if ledger else [])],
        capture_output=True,
        text=True,
        env=environment,
        timeout=300,
    )


def _refused(done: subprocess.CompletedProcess[str], says: str, code: int = 1) -> None:
    assert done.returncode == code, done.stdout + done.stderr
    last = done.stderr.splitlines()[-1]
    assert last.startswith("hyperpod-recovery: ") and says in last, done.stderr


def _pins(requirements: Path) -> dict[str, str]:
    lines = [line.split()[0] for line in requirements.read_text().splitlines() if line and not line.startswith("#")]
    return dict(line.split("==") for line in lines)


def _fake_wheel(folder: Path, name: str) -> None:
    (folder / name).write_bytes(b"PK\x05\x06" + bytes(18))  # an empty zip: never opened unless chosen


def test_given_the_bundle_folder_then_exactly_its_pinned_wheels_are_installed_and_nothing_outside_destdir(
    bundle: tuple[Path, str], tmp_path: Path
) -> None:
    folder, digest = bundle
    unit_before = SYSTEM_UNIT.exists()
    # Given an environment that would send pip elsewhere: an index, links with a preferred build of
    # our agent's name, and constraints no bundle meets (pip must read none of them)
    poison = tmp_path / "poison"
    poison.mkdir()
    _fake_wheel(poison, f"hyperpod_recovery_agent-{__version__}-1-py3-none-any.whl")
    env = {"PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_FIND_LINKS": str(poison), "PIP_CONSTRAINT": str(poison / "c.txt")}
    (poison / "c.txt").write_text("boto3==0.0.1\n")
    # When the lifecycle script installs it
    done = _install(tmp_path, folder, digest, **env)
    # Then the agent runs from a venv holding exactly the pinned distributions
    assert done.returncode == 0, done.stderr
    prefix = tmp_path / "root" / "opt" / "hyperpod-recovery-agent"
    agent = prefix / "venv" / "bin" / "hyperpod-recovery-agent"
    assert subprocess.run([str(agent), "--version"], capture_output=True, text=True, check=True).stdout.strip() == __version__
    listed = subprocess.run(
        [str(prefix / "venv" / "bin" / "python"), "-m", "pip", "list", "--format=freeze", "--exclude", "pip", "--exclude", "setuptools"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    installed = {name.lower().replace("_", "-"): version for name, version in (line.split("==") for line in listed.split())}
    assert installed == _pins(folder / "requirements.txt")
    # And the venv is the build's own, named by the pinned hash
    assert (prefix / "venv").readlink() == Path("releases") / digest[:16]
    # And the configuration, epilog and unit are in DESTDIR, and nothing on the machine itself
    config = (tmp_path / "root" / "etc" / "hyperpod-recovery" / "agent.toml").read_text()
    assert f'command_queue_url = "{QUEUE}"' in config and 'cluster_name = "llm-train"' in config
    assert (prefix / "epilog_slurmctld.sh").exists() and (tmp_path / "root" / "etc" / "systemd" / "system" / SYSTEM_UNIT.name).exists()
    assert SYSTEM_UNIT.exists() == unit_before
    assert "slurm.conf and systemd left alone" in done.stdout

    # When it runs again with the same build (a lifecycle script re-run)
    again = _install(tmp_path, folder, digest)
    # Then the running agent's venv is kept as it is
    assert again.returncode == 0 and "this build is the one installed" in again.stdout, again.stderr
    assert (prefix / "venv").readlink() == Path("releases") / digest[:16]


def _earlier_install(tmp_path: Path) -> Path:
    """An agent installed before (an older build's venv, switched in)."""
    prefix = tmp_path / "root" / "opt" / "hyperpod-recovery-agent"
    (prefix / "releases" / "0123456789abcdef").mkdir(parents=True)
    (prefix / "venv").symlink_to("releases/0123456789abcdef")
    return prefix


def test_given_the_ledger_table_then_the_configuration_names_it_even_an_earlier_one(bundle: tuple[Path, str], tmp_path: Path) -> None:
    # Given an agent installed by a release that took no ledger table (its configuration has none)
    folder, digest = bundle
    assert _install(tmp_path, folder, digest).returncode == 0
    path = tmp_path / "root" / "etc" / "hyperpod-recovery" / "agent.toml"
    assert load_config(path).ledger_table is None
    # When the installer runs again with the stack's LedgerTableName
    done = _install(tmp_path, folder, digest, ledger="stack-LedgerTable-1A2B")
    # Then the configuration names it as a top-level key the agent reads, the rest as it was
    assert done.returncode == 0, done.stderr
    config = load_config(path)
    assert config.ledger_table == "stack-LedgerTable-1A2B" and config.command_queue_url == QUEUE
    assert config.unreachable_retry.attempts == 6


def test_given_a_ledger_table_that_would_break_the_config_then_usage_exit_2(bundle: tuple[Path, str], tmp_path: Path) -> None:
    done = subprocess.run(
        ["bash", str(SCRIPT), QUEUE, "llm-train", str(bundle[0]), bundle[1], 'x"\ncluster_name = "other'],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "DESTDIR": str(tmp_path)},
    )
    assert done.returncode == 2 and "LedgerTableName" in done.stderr


def test_given_a_wheel_that_is_not_the_one_built_then_it_is_refused_and_the_earlier_agent_stays(copy_of: Path, tmp_path: Path) -> None:
    # Given the bundle with the agent's wheel altered after make dists wrote requirements.txt
    wheel = next(copy_of.glob("hyperpod_recovery_agent-*.whl"))
    wheel.write_bytes(wheel.read_bytes() + b"tampered")
    prefix = _earlier_install(tmp_path)
    digest = hashlib.sha256((copy_of / "requirements.txt").read_bytes()).hexdigest()
    # When it is installed
    done = _install(tmp_path, copy_of, digest)
    # Then pip refuses it, the script says why, and the earlier agent is still the one switched in
    _refused(done, "is not the one make dists built")
    assert (prefix / "venv").readlink() == Path("releases/0123456789abcdef")
    assert sorted(p.name for p in (prefix / "releases").iterdir()) == ["0123456789abcdef"]


def test_given_a_preferred_build_of_our_name_beside_the_wheels_then_it_is_refused(copy_of: Path, tmp_path: Path) -> None:
    # Given a file slipped into the bundle that pip would prefer (a build tag) under our agent's name
    _fake_wheel(copy_of, f"hyperpod_recovery_agent-{__version__}-1-py3-none-any.whl")
    digest = hashlib.sha256((copy_of / "requirements.txt").read_bytes()).hexdigest()
    done = _install(tmp_path, copy_of, digest)
    # Then it is not installed: only the file whose sha256 is pinned would be
    _refused(done, "is not the one make dists built")


def test_given_a_missing_wheel_then_it_is_refused_naming_the_requirement(copy_of: Path, tmp_path: Path) -> None:
    next(copy_of.glob("hyperpod_recovery_contract-*.whl")).unlink()
    digest = hashlib.sha256((copy_of / "requirements.txt").read_bytes()).hexdigest()
    done = _install(tmp_path, copy_of, digest)
    _refused(done, "lacks a wheel")
    assert "hyperpod-recovery-contract" in done.stderr.splitlines()[-1]


def test_given_a_requirements_file_that_is_not_the_pinned_one_then_nothing_is_installed(
    copy_of: Path, bundle: tuple[Path, str], tmp_path: Path
) -> None:
    # Given the bundle's requirements.txt rewritten (a wheel of one's own, its hash beside it)
    requirements = copy_of / "requirements.txt"
    requirements.write_text(requirements.read_text() + "evil==1.0 --hash=sha256:" + "0" * 64 + "\n")
    # When the lifecycle script installs it with the hash make dists printed for the real build
    done = _install(tmp_path, copy_of, bundle[1])
    _refused(done, f"not the {bundle[1]} your lifecycle script pins")
    assert not (tmp_path / "root" / "opt").exists()


def _stub(folder: Path, name: str, body: str) -> None:
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(f"#!/bin/sh\n{body}\n")
    (folder / name).chmod(0o755)


def test_given_no_python_the_bundle_was_built_for_then_it_stops_naming_what_to_install(bundle: tuple[Path, str], tmp_path: Path) -> None:
    # Given a node whose every python answers 3.10 (HyperPod's Ubuntu 22.04 DLAMI)
    stubs = tmp_path / "bin"
    for name in (f"python{PYTHON}", "python3.13", "python3.12", "python3.11", "python3"):
        _stub(stubs, name, "echo 3.10")
    done = _install(tmp_path, bundle[0], bundle[1], python=None, path=f"{stubs}:/usr/bin:/bin")
    # Then nothing is downloaded or installed, and the line says what to install
    _refused(done, f"no Python {PYTHON} on this node")
    assert "apt-get install -y python3.11 python3.11-venv" in done.stderr and "curl" not in SCRIPT.read_text()
    assert not (tmp_path / "root" / "opt").exists()


def test_given_a_python_too_old_named_then_it_is_refused(bundle: tuple[Path, str], tmp_path: Path) -> None:
    _stub(tmp_path / "bin", "python3", "echo 3.10")
    done = _install(tmp_path, bundle[0], bundle[1], python=str(tmp_path / "bin" / "python3"))
    _refused(done, "is Python 3.10")


def test_given_an_s3_bundle_without_the_aws_cli_then_it_is_refused(bundle: tuple[Path, str], tmp_path: Path) -> None:
    assert shutil.which("aws", path="/usr/bin:/bin") is None, "this test needs a PATH without the aws CLI"
    done = _install(tmp_path, "s3://lifecycle-scripts/hyperpod-recovery/agent-bundle/", bundle[1])
    _refused(done, "the aws CLI is not installed")


def test_given_an_s3_bundle_then_it_is_copied_with_the_aws_cli_and_checked_like_a_folder(bundle: tuple[Path, str], tmp_path: Path) -> None:
    # Given an aws CLI that serves s3://lifecycle-scripts/agent-bundle/ from the bundle folder
    calls = tmp_path / "aws-calls"
    expected = "s3 cp --recursive --only-show-errors s3://lifecycle-scripts/agent-bundle/"
    body = f'echo "$@" >> {calls}\n[ "$1 $2 $3 $4 $5" = "{expected}" ] || exit 1\ncp -r {bundle[0]}/. "$6"'
    _stub(tmp_path / "bin", "aws", body)
    # When it is installed with another build's hash (the copy is what is under test, not pip)
    other = "f" * 64
    done = _install(tmp_path, "s3://lifecycle-scripts/agent-bundle", other, path=f"{tmp_path / 'bin'}:/usr/bin:/bin")
    # Then the bundle was copied from S3, and its requirements.txt (the real one) checked against the pin
    assert calls.read_text().startswith("s3 cp --recursive --only-show-errors s3://lifecycle-scripts/agent-bundle/ ")
    _refused(done, f"has sha256 {bundle[1]}, not the {other}")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ("hyperpod-recovery-agent @ https://example.com/a.whl", "hyperpod-recovery-contract @ https://example.com/c.whl"),
            "4 arguments",
        ),
        (("./agent-bundle",), "4 arguments"),
        (("./agent-bundle", "e43c333d"), "sha256: the 64 hex digits"),
    ],
    ids=["pip specs", "no hash", "short hash"],
)
def test_given_the_old_arguments_or_a_short_hash_then_usage_exit_2(args: tuple[str, ...], says: str, tmp_path: Path) -> None:
    done = subprocess.run(
        ["bash", str(SCRIPT), QUEUE, "llm-train", *args],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "DESTDIR": str(tmp_path)},
    )
    _refused(done, says, code=2)


def test_given_a_queue_url_that_would_break_the_config_then_usage_exit_2(bundle: tuple[Path, str], tmp_path: Path) -> None:
    done = subprocess.run(
        ["bash", str(SCRIPT), 'https://sqs.x/1"\ncluster_name = "other', "llm-train", str(bundle[0]), bundle[1]],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "DESTDIR": str(tmp_path)},
    )
    assert done.returncode == 2 and "CommandQueueUrl" in done.stderr


def test_given_a_node_that_is_not_the_controller_then_nothing_happens(bundle: tuple[Path, str], tmp_path: Path) -> None:
    # Without DESTDIR, a node whose slurm.conf does not name it as SlurmctldHost does nothing
    done = subprocess.run(
        ["bash", str(SCRIPT), QUEUE, "llm-train", str(bundle[0]), bundle[1]],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "SLURM_CONF": str(tmp_path / "no-slurm.conf")},
    )
    assert done.returncode == 0 and "not the Slurm controller" in done.stdout, done.stderr
