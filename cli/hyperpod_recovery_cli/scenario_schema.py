"""What a drill scenario file says that both readers of it read: its name, its node references, its
``expect`` block and how the file itself is read. ``hyperpod-recovery drill --scenario`` checks a
scenario with these before it starts anything; the sandbox's full Scenario (sandbox/scenario.py)
is built on them, so the two can never take different files.

The CLI ships in the wheel and the sandbox comes with a clone only: the sandbox imports this module,
never the other way round.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StringConstraints

from hyperpod_recovery.vocabulary import Outcome

# A scenario's name: it goes into a drill's request reason and its report's file names.
SCENARIO_NAME = re.compile(r"[a-z0-9][a-z0-9\-]{0,62}")
SCENARIO_NAME_LIMIT = 63
# A node by its instance group and its index in launch order: ``workers:7``.
NODE_REF = re.compile(r"^(?P<group>[A-Za-z0-9][A-Za-z0-9\-]*):(?P<index>[0-9]+)$")

Phrase = Annotated[str, StringConstraints(min_length=1, strip_whitespace=True)]
HangRule = Literal["stall", "slow", "hyperpod_hang", "hpto_hang", "hpto_slow"]
Count = Annotated[int, Field(ge=0)]


def _kind(words: str) -> dict[str, Any]:
    """What a value of the field is, in the words the CLI's refusal uses."""
    return {"kind": words}


class ExpectSpec(BaseModel):
    """What the scenario is for. Unset fields are not asserted; the safety ones default on."""

    # strict: "within_cap": "no" would read as false in lax mode and quietly turn a safety check off
    model_config = ConfigDict(extra="forbid", strict=True)
    outcomes: list[Outcome] | None = Field(
        default=None, description="every incident's outcome, in any order", json_schema_extra=_kind("list of outcomes")
    )
    no_human_needed: StrictBool = Field(
        default=False, description="no incident escalated, capped, stale, aborted or failed", json_schema_extra=_kind("bool")
    )
    resubmissions: int | None = Field(
        default=None, ge=0, description="copies made of jobs (Slurm submissions, EKS re-creations)", json_schema_extra=_kind("count")
    )
    checkpoint_step: int | None = Field(
        default=None, ge=0, description="the step every resubmission resumed from", json_schema_extra=_kind("count")
    )
    node_repairs: int | None = Field(
        default=None, ge=0, description="nodes HyperPod replaced or rebooted", json_schema_extra=_kind("count")
    )
    max_job_downtime_seconds: float | None = Field(
        default=None, gt=0, allow_inf_nan=False, description="each affected job's downtime at most", json_schema_extra=_kind("seconds")
    )
    within_cap: StrictBool = Field(default=True, json_schema_extra=_kind("bool"))
    one_copy_per_job: StrictBool = Field(default=True, json_schema_extra=_kind("bool"))
    messages_match_record: StrictBool = Field(default=True, json_schema_extra=_kind("bool"))
    # An empty phrase is in every message: it could never pass as never_say, nor fail as always_say.
    never_say: list[Phrase] = Field(
        default_factory=list, description="phrases no notification may contain", json_schema_extra=_kind("phrases")
    )
    verdicts: dict[HangRule, Count] | None = Field(
        default=None,
        description="hang and slowdown verdicts kept, per rule (ours, and HyperPod's own detectors')",
        json_schema_extra=_kind(f"count per rule ({', '.join(get_args(HangRule))})"),
    )
    at_risk_verdicts: dict[Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,47}$")], Count] | None = Field(
        default=None,
        description="at-risk verdicts kept, per signal, each with the outcome the drill's last tick settled",
        json_schema_extra=_kind("count per signal"),
    )
    at_risk_outcomes: dict[Literal["pending", "failed", "not_failed", "swapped"], Count] | None = Field(
        default=None, description="the at-risk verdicts' outcomes, counted", json_schema_extra=_kind("count per outcome")
    )
    planned_swaps: dict[Annotated[str, StringConstraints(pattern=r"^[a-z_]{1,32}$")], Count] | None = Field(
        default=None,
        description="the planned swaps' outcomes (moved, left, dry_run, yielded, ...), counted",
        json_schema_extra=_kind("count per outcome"),
    )
    swap_work_lost_within_seconds: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description="each moved job's training past its checkpoint's commit until its old copy stopped",
        json_schema_extra=_kind("seconds"),
    )
    swap_running_again_within_seconds: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description="each moved job's new copy running at most this long after the checkpoint's commit",
        json_schema_extra=_kind("seconds"),
    )
    verdict_suspects: list[Phrase] | None = Field(
        default=None, description="the nodes the verdicts blamed", json_schema_extra=_kind("list of node names")
    )
    hang_detected_within_seconds: float | None = Field(default=None, gt=0, allow_inf_nan=False, json_schema_extra=_kind("seconds"))
    running_again_within_seconds: float | None = Field(default=None, gt=0, allow_inf_nan=False, json_schema_extra=_kind("seconds"))
    always_say: list[Phrase] = Field(
        default_factory=list, description="phrases some notification must contain", json_schema_extra=_kind("phrases")
    )
    shrunk_to: int | None = Field(
        default=None, ge=1, description="some copy of each hit job ran on this many nodes", json_schema_extra=_kind("node count")
    )
    grown_back_to: int | None = Field(
        default=None, ge=1, description="each hit job's newest copy runs on this many nodes", json_schema_extra=_kind("node count")
    )
    steps_monotone: StrictBool = Field(default=True, json_schema_extra=_kind("bool"))
    no_secret_kept: StrictBool = Field(
        default=False,
        description="no secret the hung job printed in any channel, record, ledger item or state; the evidence redacted",
        json_schema_extra=_kind("bool"),
    )


# Each expectation and what its value is, in the order the model declares them.
EXPECT_KINDS: dict[str, str] = {
    name: str(field.json_schema_extra["kind"])
    for name, field in ExpectSpec.model_fields.items()
    if isinstance(field.json_schema_extra, dict)
}


class JsonFileError(Exception):
    """The file cannot be read as JSON; the message names the file and why, each reader prefixes its own words."""


def read_json(path: Path, *, missing: str, directory: str, unreadable: str = "") -> Any:
    """The JSON document in ``path``. ``missing``, ``directory`` and ``unreadable`` are the reader's
    words for a file that is not there, a folder in its place, and one the system would not read."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise JsonFileError(f"{path}: {missing}") from exc
    except IsADirectoryError as exc:
        raise JsonFileError(f"{path} is a directory; {directory}") from exc
    except OSError as exc:
        raise JsonFileError(f"{path}: {unreadable}{exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise JsonFileError(f"{path}: not a UTF-8 text file") from exc
    except json.JSONDecodeError as exc:
        raise JsonFileError(f"{path}: not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from exc
    except RecursionError as exc:
        raise JsonFileError(f"{path}: JSON nested too deeply") from exc
