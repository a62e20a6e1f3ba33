"""`make security` (part of `make test`) runs checkov locally: no request to its vendor's API or to
PyPI, so an offline `make test` is quiet and a CI without egress is not slowed by retries."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT

CHECKOV = ROOT / ".venv-checkov" / "bin" / "checkov"
# Loaded by every Python process checkov starts (PYTHONPATH): records each attempt to reach a host.
RECORDER = """
import os, socket, sys

def _record(event, args):
    if event == "socket.getaddrinfo" or (event == "socket.connect" and args[0].family != socket.AF_UNIX):
        with open(os.environ["NETWORK_LOG"], "a") as log:
            log.write(f"{event} {args[1] if event == 'socket.connect' else args[0]}\\n")

sys.addaudithook(_record)
"""


@pytest.mark.skipif(not CHECKOV.exists(), reason="checkov is installed by `make security` (.venv-checkov)")
def test_make_security_reaches_no_network_and_prints_no_traceback(tmp_path: Path) -> None:
    # Given a recorder of every name lookup and connection checkov's processes make
    (tmp_path / "sitecustomize.py").write_text(RECORDER)
    log = tmp_path / "network.log"
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "NETWORK_LOG": str(log)}
    # When the security target runs, as `make test` runs it
    done = subprocess.run(["make", "-s", "security"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    # Then it passed, looked nothing up and connected nowhere, and said nothing on stderr
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Passed checks" in done.stdout and "Failed checks: 0" in done.stdout
    assert not log.exists(), log.read_text()
    assert "Traceback" not in done.stderr and done.stderr == ""
