"""What every part of a scenario shares (sandbox/scenario.py): its models' strictness, the node
range syntax, and the longest virtual time it may name."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

NODE_RANGE = re.compile(r"^(?P<group>[A-Za-z0-9][A-Za-z0-9\-]*):(?P<start>\d+)(?:-(?P<end>\d+))?$")

# The longest virtual time a scenario may name (a fault's time, an event's age, a replacement's
# length): beyond any drill's, a fleet drill's 54 days included (sandbox/fleet), and far inside what
# the runner's datetimes can add.
MAX_VIRTUAL_SECONDS = 400 * 86_400


class Strict(BaseModel):
    # NaN and infinity are not times: JSON files written by Python may carry them (NaN, Infinity).
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
