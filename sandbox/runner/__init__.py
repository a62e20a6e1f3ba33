"""Run one scenario end to end (drill.py says how): build the world, inject the faults (faults.py),
let the pipeline work while AWS delivers what it delivers on its own (aws_delivers.py) and the
jobs report their progress to the scheduled functions (jobs.py, functions.py), then report."""

from sandbox.runner.drill import DrillRunner
from sandbox.runner.functions import HANG_DETECTOR_FUNCTION, POLLER_FUNCTION, Delivery

__all__ = ["HANG_DETECTOR_FUNCTION", "POLLER_FUNCTION", "Delivery", "DrillRunner"]
