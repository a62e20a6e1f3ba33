"""What every at-risk source is read into, before it is judged: which signal, which node, when the
sender says the episode began, and what it said (its evidence)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from hyperpod_recovery.models.at_risk import SIGNAL_NAME_PATTERN, AtRiskSource
from hyperpod_recovery.models.common import NODE_ID_PATTERN

_SIGNAL = re.compile(SIGNAL_NAME_PATTERN)
_INSTANCE = re.compile(NODE_ID_PATTERN)
# An EKS node HyperPod names after its instance (models/kubernetes.py node_name_for_instance).
_EKS_NODE = re.compile(r"^hyperpod-(i-[a-f0-9]{8}(?:[a-f0-9]{9})?)$")


class UnreadableSignal(ValueError):
    """A message the convention cannot read (plain text, truncated, not JSON, no signal): refused
    with why, never guessed at."""


@dataclass(frozen=True)
class SignalReport:
    """One sender's word that one node is at risk."""

    signal: str
    source: AtRiskSource
    # The node as the sender names it: an instance id, or a hostname / Kubernetes node name that
    # the cluster's nodes resolve (steps/at_risk.py).
    instance_id: str | None
    hostname: str | None
    # When the sender says this episode began (Alertmanager startsAt, the alarm's state change, the
    # condition's transition): the same episode repeated (Alertmanager's repeat_interval, SNS's
    # at-least-once delivery) has the same moment, so it is one verdict.
    episode_at: datetime
    # The sender's cluster where it names one (label or dimension); None: not named.
    cluster: str | None
    # What the sender said, as "key=value" lines (redacted and cut when the verdict is made).
    evidence: str
    where: str = ""

    @property
    def node_ref(self) -> str:
        return self.instance_id or self.hostname or "?"


def signal_name(value: str, where: str) -> str:
    """A signal name by the convention (lower case, digits, underscores), or UnreadableSignal."""
    name = value.strip().lower()
    if not _SIGNAL.fullmatch(name):
        raise UnreadableSignal(f"{where}: signal {value[:60]!r} is not a signal name (lower case letters, digits, _; up to 48)")
    return name


def node_identity(value: str) -> tuple[str | None, str | None]:
    """(instance id, hostname) from what a sender names a node by: an instance id, HyperPod's EKS
    node name (hyperpod-<instance id>), or a hostname (a Prometheus ``instance`` label's port cut)."""
    value = value.strip()
    if _INSTANCE.fullmatch(value):
        return value, None
    eks = _EKS_NODE.fullmatch(value)
    if eks:
        return eks[1], None
    host = value.rsplit(":", 1)[0] if re.fullmatch(r"[^:]+:[0-9]{1,5}", value) else value
    return None, (host.split(".", 1)[0] or None) if host else None


def evidence_lines(pairs: dict[str, str]) -> str:
    return "\n".join(f"{key}={value}" for key, value in sorted(pairs.items()))
