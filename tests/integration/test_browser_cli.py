"""`python -m sandbox.browser`: what someone without Chromium, or with a wrong path, is told."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from sandbox.browser import EXIT_NO_CHROMIUM, EXIT_USAGE
from tests.conftest import ROOT


def _browser(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    empty = tmp_path / "empty-bin"
    empty.mkdir(exist_ok=True)
    # Only an empty directory on PATH: no chromium, chromium-browser or google-chrome anywhere
    env = {**os.environ, "PATH": str(empty)}
    return subprocess.run(
        [sys.executable, "-m", "sandbox.browser", *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_given_no_chromium_when_rendering_a_report_then_one_line_says_how_to_install_it_and_exit_3(tmp_path: Path) -> None:
    # Given a report page
    page = tmp_path / "drill-default.html"
    page.write_text("<html><body>report</body></html>")
    # When it is rendered on a machine without Chromium
    done = _browser(tmp_path, str(page))
    # Then one line says so and how to install it, exit 3, and no screenshot is claimed
    assert done.returncode == EXIT_NO_CHROMIUM
    assert (
        done.stderr
        == "sandbox.browser: chromium not found on PATH (looked for chromium, chromium-browser, google-chrome): apt-get install chromium\n"
    )
    assert done.stdout == "" and not page.with_suffix(".png").exists()


def test_given_a_page_that_does_not_exist_then_exit_2_names_it(tmp_path: Path) -> None:
    done = _browser(tmp_path, str(tmp_path / "nope.html"))
    assert done.returncode == EXIT_USAGE and "no such report page" in done.stderr and "Traceback" not in done.stderr


def test_given_no_arguments_then_usage_and_exit_2(tmp_path: Path) -> None:
    done = _browser(tmp_path)
    assert done.returncode == EXIT_USAGE and done.stderr.startswith("usage: python -m sandbox.browser") and "Traceback" not in done.stderr
