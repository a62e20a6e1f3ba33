"""The planner's words, one source for each sentence: the terminal table (``hyperpod-recovery goodput``)
and the fleet drill's report (sandbox/fleet/report.py) print a plan with these."""

from __future__ import annotations

from hyperpod_recovery_cli.planner.model import Change, EttrEstimate

WHAT_TO_CHANGE = "what to change (each alone; the ETTR it buys):"
NOTHING_TO_CHANGE = "what to change: nothing the planner models buys 0.01 points or more"


def pct(ratio: float) -> str:
    return f"{100 * ratio:.2f} %"


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


def ettr_line(ettr: EttrEstimate) -> str:
    """The headline: Daly's ETTR, and the first-order split beside it."""
    return (
        f"ETTR {pct(ettr.ettr)} (Daly)   first order {pct(ettr.first_order_ettr)}: checkpoint {pct(ettr.checkpoint_loss)} | "
        f"rework {pct(ettr.rework_loss)} | recovery {pct(ettr.recovery_loss)}"
    )


def change_sentence(change: Change) -> str:
    return f"{change.now} -> {change.to}: ETTR {pct(change.ettr)} ({change.gain_points:+.2f} pts); {change.how}"


def change_lines(changes: list[Change]) -> list[str]:
    """The "what to change" block: its heading, then one line per change, the most ETTR first."""
    if not changes:
        return [NOTHING_TO_CHANGE]
    width = max(len(c.kind) for c in changes)
    return [WHAT_TO_CHANGE] + [f"  {c.kind.replace('_', ' '):<{width}}  {change_sentence(c)}" for c in changes]
