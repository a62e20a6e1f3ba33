"""The README's sample drill output and docs/images/drill-report-default.png are what the default
drill prints and draws today: `make readme-sample` (tools/readme_sample.py) writes both, and these
tests fail the moment the drill's output moves away from them."""

from __future__ import annotations

import pytest

from tests.conftest import ROOT
from tools.readme_sample import (
    PICTURE,
    PREFLIGHT_BEGIN,
    PREFLIGHT_END,
    README,
    DrillRun,
    normalise,
    picture_digest,
    readme_sample,
    report_digest,
    run_default_drill,
    run_preflight_sample,
    stamp,
    with_sample,
)

REGENERATE = "run `make readme-sample` (it needs chromium for the picture) and commit README.md and the picture"


@pytest.fixture(scope="module")
def default_drill(tmp_path_factory: pytest.TempPathFactory) -> DrillRun:
    return run_default_drill(tmp_path_factory.mktemp("readme") / "out")


@pytest.mark.sandbox
def test_the_readme_shows_exactly_what_the_default_drill_prints(default_drill: DrillRun) -> None:
    # Given the README's sample and When the default drill runs (events/drills/default.json, as `make drill`)
    shown = readme_sample(README.read_text())
    # Then the README shows its output line for line; only the wall-clock seconds may differ
    assert normalise(shown).splitlines() == normalise(default_drill.printed).splitlines(), REGENERATE


@pytest.mark.sandbox
def test_the_readme_shows_exactly_what_the_preflight_prints_for_the_default_drills_stack() -> None:
    shown = readme_sample(README.read_text(), PREFLIGHT_BEGIN, PREFLIGHT_END)
    assert normalise(shown).splitlines() == normalise(run_preflight_sample()).splitlines(), REGENERATE


@pytest.mark.sandbox
def test_the_report_picture_was_rendered_from_the_default_drills_report(default_drill: DrillRun) -> None:
    # Given the picture the README links, stamped with the digest of the page it was rendered from
    stamped = picture_digest(PICTURE.read_bytes())
    # Then that page is the report the default drill writes today
    assert stamped is not None, f"{PICTURE.relative_to(ROOT)} has no report digest: {REGENERATE}"
    assert stamped == report_digest(default_drill.html), f"{PICTURE.relative_to(ROOT)} shows another report: {REGENERATE}"


def test_normalising_forgives_the_wall_clock_and_nothing_else() -> None:
    printed = "executions: 1   state transitions: 53   virtual time: 12m 43.8s   pipeline overhead: 30.0s   wall time: 4.8s\n"
    assert normalise(printed) == normalise(printed.replace("wall time: 4.8s", "wall time: 12.3s"))
    assert normalise(printed) != normalise(printed.replace("transitions: 53", "transitions: 54"))
    assert normalise(printed) != normalise(printed.replace("virtual time: 12m 43.8s", "virtual time: 12m 44.8s"))
    line = "  PASS   sdk   the functions run botocore 1.44.5 (boto3 1.44.5, Python 3.11.7): every call"
    assert normalise(line) == normalise(line.replace("3.11.7", "3.13.0"))
    assert normalise(line) != normalise(line.replace("1.44.5 (", "1.44.6 ("))
    key = "topic arn:t: CloudWatch alarms may use its key 4fa3b9b3-ace4-40b9-9001-0b6dac314b6f"
    assert normalise(key) == normalise(key.replace("4fa3b9b3", "0000aaaa"))
    page = "<p>91 API calls · wall time 2.5s</p>"
    assert report_digest(page) == report_digest(page.replace("2.5s", "7.0s"))
    assert report_digest(page) != report_digest(page.replace("91 API", "74 API"))


def test_the_sample_block_round_trips_and_the_stamp_is_readable_back() -> None:
    readme = README.read_text()
    assert readme_sample(with_sample(readme, "line one\nline two\n")) == "line one\nline two\n"
    assert with_sample(readme, readme_sample(readme)) == readme
    png = PICTURE.read_bytes()
    assert picture_digest(stamp(png, "abc")) == "abc"
    assert picture_digest(stamp(stamp(png, "abc"), "def")) == "def"
