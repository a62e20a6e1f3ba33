"""The command an operator installs, run as they run it: `make install` (pipx, or without pipx a venv of
its own) from a copy of the checkout, into places of its own, then the installed `hyperpod-recovery`
with nothing of the dev venv around it.

The installs download the package's dependencies from the package index (pip's cache makes it quick
after `make setup`); nothing here needs AWS: the one command that reaches AWS is answered by a moto
server, found through AWS_ENDPOINT_URL as any boto3 client finds it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from moto.server import ThreadedMotoServer

from hyperpod_recovery import __version__
from tests.conftest import ROOT

INSTALL_TIMEOUT = 600  # a cold pip cache downloads boto3, botocore, pydantic and Powertools
REGION = "eu-central-1"  # not the suite's us-west-2: the command must find it where the operator set it
# The variables an operator's shell may hold that would reach the command from the dev environment.
DEV_ONLY = ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PIP_REQUIRE_VIRTUALENV", "COVERAGE_PROCESS_START")


def _base_python() -> str:
    """The interpreter `python3` runs on this machine (a pyenv shim resolved), as make install's TOOLS_PYTHON."""
    found = shutil.which("python3") or sys.executable
    return subprocess.run([found, "-c", "import sys; print(sys.executable)"], capture_output=True, text=True, check=True).stdout.strip()


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_") and k not in DEV_ONLY}
    env.update(AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull, AWS_EC2_METADATA_DISABLED="true")
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The files a fresh clone has (tracked, and new ones not ignored), copied away from the dev tree: pip
    builds in the source folder, and its leftovers must not meet the other tests."""
    copy = tmp_path_factory.mktemp("clone")
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / name)
    return copy


def _make_install(checkout: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        ["make", "-s", "install", *args], cwd=checkout, env=env, capture_output=True, text=True, timeout=INSTALL_TIMEOUT, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


@pytest.fixture(scope="module")
def installed_with_venv(checkout: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`make install` where pipx is not on PATH: a venv of its own, the command linked into BIN_DIR."""
    place = tmp_path_factory.mktemp("install-venv")
    env = _clean_env(PATH="/usr/bin:/bin")
    if shutil.which("pipx", path=env["PATH"]):
        pytest.skip("pipx is installed system-wide: make install takes the pipx path (tested below)")
    home, bin_dir = place / "share", place / "bin"
    done = _make_install(checkout, env, f"TOOLS_PYTHON={_base_python()}", f"INSTALL_HOME={home}", f"BIN_DIR={bin_dir}")
    assert f'export PATH="{bin_dir}:$PATH"' in done.stdout
    return bin_dir / "hyperpod-recovery"


@pytest.fixture(scope="module")
def installed_with_pipx(checkout: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`make install` with pipx on PATH (the real pipx, its home and bin folders in a temporary place)."""
    place = tmp_path_factory.mktemp("install-pipx")
    pipx = Path(sys.executable).parent / "pipx"
    assert pipx.exists(), "pipx is a dev requirement (requirements-dev.txt): make setup installs it"
    tools = place / "tools"
    tools.mkdir()
    (tools / "pipx").symlink_to(pipx)
    bin_dir = place / "bin"
    env = _clean_env(
        PATH=f"{tools}:/usr/bin:/bin", PIPX_HOME=str(place / "pipx"), PIPX_BIN_DIR=str(bin_dir), PIPX_MAN_DIR=str(place / "man")
    )
    _make_install(checkout, env)
    return bin_dir / "hyperpod-recovery"


@pytest.fixture(params=["installed_with_venv", "installed_with_pipx"], ids=["venv", "pipx"])
def command(request: pytest.FixtureRequest) -> Path:
    installed: Path = request.getfixturevalue(request.param)
    return installed


def _run(command: Path, *argv: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(command), *argv],
        cwd=cwd,
        env=_clean_env(PATH="/usr/bin:/bin", **env),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_installed_command_answers_help_and_version(command: Path, tmp_path: Path) -> None:
    # When the installed command is asked for its help and version, far from any checkout
    helped = _run(command, "--help", cwd=tmp_path)
    versioned = _run(command, "--version", cwd=tmp_path)
    # Then both answer, with no import error
    assert helped.returncode == 0 and "checkpoint manifests" in helped.stdout, helped.stderr
    assert (versioned.returncode, versioned.stdout, versioned.stderr) == (0, f"hyperpod-recovery {__version__}\n", "")


def test_the_installed_command_runs_the_offline_planner(command: Path, tmp_path: Path) -> None:
    # When the goodput planner runs on its built-in defaults (no AWS, no region)
    done = _run(command, "goodput", "--nodes", "64", cwd=tmp_path)
    # Then it prints its plan
    assert done.returncode == 0, done.stderr
    assert "ETTR" in done.stdout and "Traceback" not in done.stderr


def test_the_installed_command_says_the_sandbox_comes_with_a_clone(command: Path, tmp_path: Path) -> None:
    # When `drills` (the sandbox's) is asked of an install, outside a clone
    done = _run(command, "drills", str(tmp_path), cwd=tmp_path)
    # Then one line says where it runs, with the usage exit code
    assert done.returncode == 2 and "comes with a clone of hyperpod-recovery" in done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


@pytest.fixture(scope="module")
def moto_stack() -> Iterator[str]:
    """A moto server holding a hyperpod-recovery stack (its ledger table and the outputs the CLI reads) in REGION only."""
    server = ThreadedMotoServer(port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    try:
        dynamodb = boto3.client("dynamodb", region_name=REGION, endpoint_url=url)
        dynamodb.create_table(
            TableName="hpr-ledger",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        template = {
            "Parameters": {"ClusterName": {"Type": "String"}},
            "Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
            "Outputs": {
                "StateMachineArn": {"Value": f"arn:aws:states:{REGION}:123456789012:stateMachine:hpr-node-recovery"},
                "LedgerTableName": {"Value": "hpr-ledger"},
            },
        }
        boto3.client("cloudformation", region_name=REGION, endpoint_url=url).create_stack(
            StackName="hpr", TemplateBody=json.dumps(template), Parameters=[{"ParameterKey": "ClusterName", "ParameterValue": "llm-train"}]
        )
        yield url
    finally:
        server.stop()


def test_the_installed_command_finds_the_region_in_aws_region_alone(command: Path, tmp_path: Path, moto_stack: str) -> None:
    # Given only AWS_REGION, as the AWS CLI v2, CloudShell and most CI systems set it
    credentials = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_ENDPOINT_URL": moto_stack}
    # When a --stack command runs
    done = _run(command, "locks", "--stack", "hpr", cwd=tmp_path, AWS_REGION=REGION, **credentials)
    # Then it reads the stack in that region
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("llm-train (stack hpr): 0 node lock(s)")
