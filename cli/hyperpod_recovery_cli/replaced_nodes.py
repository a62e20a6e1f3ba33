"""A node named by what it was before HyperPod replaced it: an escalation names the node it was
about (``hold hyperpod-i-<old>``), and by the time a human pastes the command that name may be gone
from the cluster. The ledger's records say what replaced it; a later replacement of that one is
followed too."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hyperpod_recovery.models.records import IncidentRecord

MAX_HOPS = 10  # replacements followed from one name (a record naming its own replacement is not a loop)


@dataclass(frozen=True)
class Replacement:
    """What replaced a node: its instance id, its name as the record saw it, and the incident that said so."""

    instance: str
    name: str | None
    incident: str


def replacement_of(node: str, records: Sequence[IncidentRecord]) -> Replacement | None:
    """The newest node that stands where ``node`` (an instance id or the orchestrator's name) stood,
    by the records' node fates (``records`` newest first); None when no record says it was replaced."""
    found: Replacement | None = None
    seen = {node}
    current = node
    for _ in range(MAX_HOPS):
        step = next(
            (
                Replacement(fate.replacement, fate.replacement_node, record.incident_id)
                for record in records
                for fate in record.node_fates
                if fate.replacement and current in (fate.node, fate.instance)
            ),
            None,
        )
        if step is None or step.instance in seen:
            break
        found, current = step, step.instance
        seen |= {step.instance, step.name or step.instance}
    return found
