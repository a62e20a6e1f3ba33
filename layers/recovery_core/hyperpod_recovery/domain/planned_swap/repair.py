"""Which repair a planned swap asks of the node it takes out: a reboot where the signal is fixed by a GPU
reset, a replacement where the hardware itself is failing. Pure.

NVIDIA: row-remap *pending* means "row-remapping will happen at the next GPU reset", and the NVML recovery
actions DRAIN_P2P / DRAIN_AND_RESET ask for a drain and a GPU reset (DCGM maps both to RESET); HyperPod
offers no GPU reset of its own, a reboot (BatchRebootClusterNodes) resets the GPUs. A row-remap *failure*
is NVIDIA's RMA criterion, and every other precursor (ECC rates, PCIe replays, NVLink errors, Xid warnings,
heat, a node that failed before) says the hardware is wearing: a replacement. A rebooted node that does
not come back healthy is replaced by NodeRecovery's ladder (its reboot deadline and health gate).
"""

from __future__ import annotations

from typing import Literal

Repair = Literal["reboot", "replace"]
RESET_FIXES = frozenset({"row_remap_pending", "recovery_action"})


def repair_for(signal: str) -> tuple[Repair, str]:
    """The repair and why, for a verdict's signal (a user's own signal name: a replacement)."""
    if signal in RESET_FIXES:
        return "reboot", f"{signal} is cleared by a GPU reset: the node is rebooted (replaced if it does not come back healthy)"
    if signal == "row_remap_failure":
        return "replace", "row_remap_failure is NVIDIA's RMA criterion: the node is replaced"
    return "replace", f"{signal} says the hardware is wearing: the node is replaced"
