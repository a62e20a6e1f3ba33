"""Each at-risk signal's mode, prior failure chance and horizon: template parameter AtRiskSignals.

Format: entries separated by commas, each ``<signal>=<mode>[:<prior>[:<horizon>]]``; ``mode`` is
observe, enforce or off; ``prior`` the chance (0-1) the node fails within the horizon, used until
the signal has MIN_OUTCOMES settled outcomes in the ledger; ``horizon`` how long after the verdict
a failure counts as the signal's hit, ``<n>m``, ``<n>h`` or ``<n>d`` (1 minute to 90 days).
``*`` sets what any signal not listed gets. Example::

    row_remap_failure=enforce:0.8:3d, row_remap_pending=observe:0.5:7d, *=observe:0.1:7d

What is not listed keeps DEFAULTS: every signal observed, with priors that are design guesses
(../shared/reference/at-risk-signals.md §6: no published study gives a precursor's precision), to
be replaced by the ledger's own measure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hyperpod_recovery.models.at_risk import SIGNAL_NAME_PATTERN, SignalMode

MIN_HORIZON_SECONDS = 60
MAX_HORIZON_SECONDS = 90 * 86400
_ENTRY = re.compile(
    r"^(?P<signal>\*|[a-z][a-z0-9_]{0,47})=(?P<mode>observe|enforce|off)(?::(?P<prior>[0-9.]+)(?::(?P<horizon>[0-9]+[mhd]))?)?$"
)
_UNIT = {"m": 60, "h": 3600, "d": 86400}
ANY = "*"


@dataclass(frozen=True)
class SignalSetting:
    mode: SignalMode
    prior: float
    horizon_seconds: int


_DAY = 86400
# Our signals (plan: docs/runbook.md "At-risk signals"), all observed until a user enforces one.
DEFAULTS: dict[str, SignalSetting] = {
    "row_remap_pending": SignalSetting("observe", 0.5, 7 * _DAY),
    "row_remap_failure": SignalSetting("observe", 0.8, 3 * _DAY),
    "recovery_action": SignalSetting("observe", 0.7, 3 * _DAY),
    "xid_warning": SignalSetting("observe", 0.2, 7 * _DAY),
    "ecc_sbe_rate": SignalSetting("observe", 0.1, 14 * _DAY),
    "pcie_replay_rate": SignalSetting("observe", 0.1, 7 * _DAY),
    "nvlink_errors": SignalSetting("observe", 0.2, 7 * _DAY),
    "thermal": SignalSetting("observe", 0.05, 7 * _DAY),
    "node_history": SignalSetting("observe", 0.2, 14 * _DAY),
    ANY: SignalSetting("observe", 0.1, 7 * _DAY),
}


@dataclass(frozen=True)
class SignalSettings:
    table: dict[str, SignalSetting]

    def of(self, signal: str) -> SignalSetting:
        return self.table.get(signal) or self.table[ANY]

    @property
    def longest_horizon_seconds(self) -> int:
        return max(s.horizon_seconds for s in self.table.values())


def parse_signal_settings(text: str) -> SignalSettings:
    """The table AtRiskSignals sets over DEFAULTS; ValueError naming the entry that does not parse."""
    table = dict(DEFAULTS)
    seen: set[str] = set()
    for raw in (part.strip() for part in text.split(",")):
        if not raw:
            continue
        entry = _ENTRY.fullmatch(raw)
        if entry is None:
            raise ValueError(
                f"AtRiskSignals entry {raw[:80]!r}: write <signal>=<observe|enforce|off>[:<prior 0-1>[:<horizon like 7d, 12h, 30m>]]"
            )
        signal = entry["signal"]
        if signal in seen:
            raise ValueError(f"AtRiskSignals: signal {signal!r} is set twice")
        seen.add(signal)
        base = table.get(signal) or table[ANY]
        prior = float(entry["prior"]) if entry["prior"] is not None else base.prior
        if not 0.0 <= prior <= 1.0:
            raise ValueError(f"AtRiskSignals entry {raw[:80]!r}: the prior is a chance, between 0 and 1")
        horizon = base.horizon_seconds
        if entry["horizon"] is not None:
            horizon = int(entry["horizon"][:-1]) * _UNIT[entry["horizon"][-1]]
            if not MIN_HORIZON_SECONDS <= horizon <= MAX_HORIZON_SECONDS:
                raise ValueError(f"AtRiskSignals entry {raw[:80]!r}: the horizon is 1 minute to 90 days")
        table[signal] = SignalSetting(entry["mode"], prior, horizon)  # type: ignore[arg-type]
    assert all(re.fullmatch(SIGNAL_NAME_PATTERN, s) for s in table if s != ANY)
    return SignalSettings(table)
