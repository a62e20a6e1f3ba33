"""The goodput planner (docs/goodput.md): pure models of a training job's effective
training time ratio under failures, from measured recovery phases."""

from hyperpod_recovery_cli.planner.plan import plan_goodput

__all__ = ["plan_goodput"]
