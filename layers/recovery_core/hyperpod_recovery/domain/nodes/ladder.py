"""The escalation ladder: which repair to try first for a node, from what reported the fault.

HyperPod's health agent names the fault and recommends a repair ("fault type NvidiaErrorReboot ...
Recommendation: Please Reboot ..."; NvidiaErrorTerminate recommends a replacement). An alarm opts
in to a reboot by its name (``hyperpod-recovery:<cluster>:reboot-...``). A reboot is cheaper and
keeps the instance; a node that does not come back from it by RebootDeadlineSeconds is replaced,
and one that does not come back from the replacement escalates (RejoinDeadlineExceeded).
Anything that does not clearly ask for a reboot (a manual request, a failed job, an unknown
reason) is replaced: the repair that fixes the most.

A hang's suspect (a node whose ranks stopped first: a signal, not a diagnosis) is first *checked*:
nothing is rebooted or replaced, the node goes through the health gate (Resume Nodes), and only a
node that fails it is replaced (Replace Unhealthy Nodes). A node suspected again is replaced.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from hyperpod_recovery.models.requests import Trigger

Repair = Literal["reboot", "replace", "check"]
_REBOOT = re.compile(r"NvidiaErrorReboot|Please Reboot|Action:\s*Reboot|hyperpod-recovery:.+:reboot-", re.IGNORECASE)
_REPLACE = re.compile(r"NvidiaErrorTerminate|Please Replace|Action:\s*Replace", re.IGNORECASE)


def recommended_repair(text: str) -> Repair | None:
    """What a signal's text asks for, read when the signal arrives (before its reason is shortened)."""
    if _REPLACE.search(text):
        return "replace"
    if _REBOOT.search(text):
        return "reboot"
    return None


def first_repair(node_id: str, triggers: list[Trigger]) -> Repair:
    """Reboot only when some signal for the node asks for a reboot and none asks for a replacement;
    check only when every signal for it is a hang's suspicion (any other signal says it is bad)."""
    asked = {t.recommends for t in triggers if node_id in t.node_ids}
    if "replace" in asked:
        return "replace"
    if "reboot" in asked:
        return "reboot"
    return "check" if asked == {"check"} else "replace"
