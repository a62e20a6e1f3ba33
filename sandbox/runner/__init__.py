"""Run one scenario end to end (drill.py)."""

from sandbox.runner.drill import HANG_DETECTOR_FUNCTION, POLLER_FUNCTION, Delivery, DrillRunner

__all__ = ["HANG_DETECTOR_FUNCTION", "POLLER_FUNCTION", "Delivery", "DrillRunner"]
