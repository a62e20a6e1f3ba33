"""The escalation ladder: which repair to try first for a node, from what reported the fault.

HyperPod's health agent names the fault and recommends a repair ("fault type NvidiaErrorReboot ...
Recommendation: Please Reboot ..."; NvidiaErrorTerminate recommends a replacement). An alarm opts
in to a reboot by its name (``hyperpod-recovery-<cluster>-reboot-...``). A reboot is cheaper and
keeps the instance; a node that does not come back from it by RebootDeadlineSeconds is replaced,
and one that does not come back from the replacement escalates (RejoinDeadlineExceeded).
Anything that does not clearly ask for a reboot (a manual request, a failed job, an unknown
reason) is replaced: the repair that fixes the most.
"""

from __future__ import annotations

import re
from typing import Literal

from hyperpod_recovery.models.requests import Trigger

Repair = Literal["reboot", "replace"]
_REBOOT = re.compile(r"NvidiaErrorReboot|Please Reboot|Action:\s*Reboot|hyperpod-recovery-.+-reboot-", re.IGNORECASE)
_REPLACE = re.compile(r"NvidiaErrorTerminate|Please Replace|Action:\s*Replace", re.IGNORECASE)


def first_repair(node_id: str, triggers: list[Trigger]) -> Repair:
    reasons = [t.reason for t in triggers if t.node_id == node_id]
    if reasons and any(_REBOOT.search(r) for r in reasons) and not any(_REPLACE.search(r) for r in reasons):
        return "reboot"
    return "replace"
