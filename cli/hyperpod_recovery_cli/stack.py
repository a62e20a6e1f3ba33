"""A deployed hyperpod-recovery stack as the operator's tools (drill, preflight) find it: its
parameters and outputs, from CloudFormation's DescribeStacks."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from hyperpod_recovery_cli.inputs import InputRefused, one_line

# CloudFormation's stack names (its API reference), or a stack's ARN (DescribeStacks takes either).
STACK_NAME = re.compile(
    r"^[A-Za-z][A-Za-z0-9-]{0,127}$|^arn:aws[a-z-]*:cloudformation:[a-z0-9-]+:[0-9]{12}:stack/[A-Za-z][A-Za-z0-9-]{0,127}/[A-Za-z0-9-]{1,64}$"
)


class NotOurStack(Exception):
    """The stack exists but is not a hyperpod-recovery stack (exit code 2)."""


class StackTooOld(Exception):
    """The stack lacks an output this release's tools need: it was deployed from an older release."""

    def __init__(self, output: str) -> None:
        super().__init__(f"the stack has no output {output}: it was deployed from an older release (redeploy with `make deploy`)")


@dataclass(frozen=True)
class Stack:
    name: str
    parameters: dict[str, str]
    outputs: dict[str, str]

    @property
    def cluster(self) -> str:
        return self.parameters["ClusterName"]

    def output(self, key: str) -> str:
        if key not in self.outputs:
            raise StackTooOld(key)
        return self.outputs[key]

    def groups(self, parameter: str) -> list[str]:
        """A comma-separated list parameter (ControllerGroups, LoginGroups)."""
        return [g.strip() for g in self.parameters.get(parameter, "").split(",") if g.strip()]


def read_stack(cloudformation: Any, name: str) -> Stack:
    """DescribeStacks; AWS errors (no such stack, no credentials) propagate to the CLI's handler."""
    if not STACK_NAME.fullmatch(name):
        raise InputRefused(
            f"--stack {one_line(name)[:80]!r}: a CloudFormation stack name (a letter, then letters, digits and '-', at most 128)"
        )
    (description,) = cloudformation.describe_stacks(StackName=name)["Stacks"]
    outputs = {o["OutputKey"]: o["OutputValue"] for o in description.get("Outputs", [])}
    parameters = {p["ParameterKey"]: p.get("ParameterValue", "") for p in description.get("Parameters", [])}
    if "StateMachineArn" not in outputs or "ClusterName" not in parameters:
        raise NotOurStack(f"stack {name!r} is not a hyperpod-recovery stack (no StateMachineArn output / ClusterName parameter)")
    return Stack(name, parameters, outputs)
