"""The planner's defaults for the phases a stack has no parameter for are the pipeline's drills' own
timings, from a checked-in file that tools/planner_defaults.py regenerates from the drill goldens."""

from __future__ import annotations

from hyperpod_recovery_cli.planner import defaults
from tests.conftest import ROOT
from tools.planner_defaults import MEASUREMENTS, TARGET, render


def test_regenerating_the_measured_defaults_from_the_drill_goldens_gives_the_checked_in_file() -> None:
    # Given the drill goldens as checked in
    # When tools/planner_defaults.py renders the defaults file again
    # Then it is the file checked in (a drill's timings changed: run the tool, commit its file)
    assert TARGET.read_text() == render(), "run: python tools/planner_defaults.py"


def test_every_default_phase_says_whether_a_drill_measured_it_or_what_else_it_is() -> None:
    # Given the planner's default phases
    measured = {m.phase: m.drill for m in MEASUREMENTS}
    for phase, figure in defaults.PHASES.items():
        # Then a drill-measured one names its drill and golden, and every other one its parameter or assumption
        if phase in measured:
            assert figure.source.startswith(f"measured in drill {measured[phase]}:")
            assert (ROOT / "tests" / "golden" / "drills" / f"{measured[phase]}.json").is_file()
        else:
            assert figure.source.startswith(("template.yaml", "assumption:")), (phase, figure.source)
        assert figure.provenance == "default"


def test_the_default_detection_is_what_the_drills_measure_not_an_nccl_timeout() -> None:
    # Given the pipeline's drills: a health event in seconds, a silent hang in about two minutes
    # Then the default detection is within that, not ByteRobust's 10 minutes without active inspection
    assert 5 <= defaults.PHASES["detect"].value <= 180


def test_no_default_cites_a_source_users_do_not_have() -> None:
    sources = [f.source for f in defaults.PHASES.values()] + [defaults.CHECKPOINT_INTERVAL.source, defaults.CHECKPOINT_COST.source]
    assert not [s for s in sources if "research note" in s or "§" in s]
