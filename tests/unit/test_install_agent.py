"""The lifecycle snippet that installs the agent (agent/install/install_agent.sh): what it refuses
before it touches the node."""

from __future__ import annotations

import subprocess

from tests.conftest import ROOT

SCRIPT = ROOT / "agent" / "install" / "install_agent.sh"
AGENT = "hyperpod-recovery-agent @ https://example.com/hyperpod_recovery_agent-0.1.0-py3-none-any.whl"
CONTRACT = "hyperpod-recovery-contract @ https://example.com/hyperpod_recovery_contract-0.1.0-py3-none-any.whl"


def _run(*packages: str, tmp_path) -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
    # SLURM_CONF names no file: a node that gets past the checks stops at "not the Slurm controller"
    env = {"PATH": "/usr/bin:/bin", "SLURM_CONF": str(tmp_path / "no-slurm.conf")}
    return subprocess.run(["bash", str(SCRIPT), "https://sqs/queue", "llm-train", *packages], capture_output=True, text=True, env=env)


def test_given_the_agents_wheel_without_the_contracts_then_nothing_is_installed(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # When the agent's wheel is given alone (pip would look for its contract on the package index)
    result = _run(AGENT, tmp_path=tmp_path)
    # Then the script stops before anything, saying why
    assert result.returncode == 2 and "needs the contract wheel beside it" in result.stderr


def test_given_both_wheels_then_the_script_goes_on(tmp_path) -> None:  # type: ignore[no-untyped-def]
    result = _run(AGENT, CONTRACT, tmp_path=tmp_path)
    assert result.returncode == 0 and "not the Slurm controller" in result.stdout
