"""What the AWS-limits tests share (tests/contract/test_aws_limits.py, test_workflow_limits.py, test_aws_policies.py):
the template, its resources and parameters, and the template resolved with its longest values."""

from __future__ import annotations

from typing import Any

from sandbox.template import Resolver, load_template
from tests.conftest import ROOT

TEMPLATE = load_template(ROOT / "template.yaml")
RESOURCES = TEMPLATE["Resources"]
PARAMETERS = TEMPLATE["Parameters"]


# --- helpers: the template resolved with the longest values its parameters accept ---------------
def longest_value(parameter: str) -> str:
    spec = PARAMETERS[parameter]
    if "AllowedValues" in spec:
        return max(spec["AllowedValues"], key=len)
    if parameter == "ClusterArn":
        return "arn:aws-iso-b:sagemaker:us-isob-east-1:111122223333:cluster/" + "a" * spec.get("MaxLength", 63)
    return "x" * spec.get("MaxLength", 255)


def stack_resolver(stack_name: str, values: dict[str, str] | None = None) -> Resolver:
    parameters = {name: longest_value(name) for name in PARAMETERS}
    parameters.update(values or {})
    resolver = Resolver(
        TEMPLATE,
        parameters,
        pseudo={
            "AWS::Region": "us-isob-east-1",
            "AWS::AccountId": "111122223333",
            "AWS::StackName": stack_name,
            "AWS::Partition": "aws-iso-b",
        },
    )
    # Any resource's name or ARN: as long as CloudFormation makes one (255).
    resolver.refs = dict.fromkeys(RESOURCES, "r" * 255)
    resolver.attrs = AsLongAsAllowed()  # type: ignore[assignment]
    return resolver


class AsLongAsAllowed(dict):  # type: ignore[type-arg]
    def __missing__(self, key: object) -> str:
        return "r" * 255


def resources_of_type(kind: str) -> list[tuple[str, dict[str, Any]]]:
    return [(logical, r) for logical, r in RESOURCES.items() if r["Type"] == kind]
