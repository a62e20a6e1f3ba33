"""Where the operator's commands reach AWS: the region and profile found as the AWS CLI v2 finds them,
and boto3 clients made on first use.

botocore itself reads only AWS_DEFAULT_REGION; the AWS CLI v2, CloudShell and most CI systems set
AWS_REGION, which the CLI v2 prefers. Order: --region, $AWS_REGION, $AWS_DEFAULT_REGION, then the
profile's region (--profile, else $AWS_PROFILE, else default), which botocore reads itself.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from typing import Any, TextIO

from hyperpod_recovery_cli import PROG

REGION_VARIABLES = ("AWS_REGION", "AWS_DEFAULT_REGION")  # the AWS CLI v2's order
NO_REGION = (
    "no AWS region configured: give --region REGION, or set AWS_REGION (or AWS_DEFAULT_REGION), "
    "or a region in your AWS profile (aws configure set region REGION)"
)
NO_CREDENTIALS = (
    "no AWS credentials found: run `aws configure` or `aws sso login`, or set AWS_PROFILE (or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)"
)


def region_from(given: str | None, environ: Mapping[str, str] | None = None) -> str | None:
    """The region a command names before any profile is read; None leaves it to the profile.

    An empty value counts as unset, as it does for the AWS CLI."""
    environ = os.environ if environ is None else environ
    for candidate in (given, *(environ.get(name) for name in REGION_VARIABLES)):
        if candidate and candidate.strip():
            return candidate.strip()
    return None


class AwsClients:
    """boto3 clients made on first use, in the region and profile the command line or environment names.

    Made inside main()'s error handling: no region (NoRegionError) or an unknown profile
    (ProfileNotFound) is the operator's one-line message, not a traceback. They wait for AWS as long
    as aws_calls.py says (not the Lambdas' settings), and a call still unanswered after a few seconds
    is said on ``err``."""

    def __init__(
        self,
        region: str | None,
        given: Mapping[str, Any] | None = None,
        *,
        err: TextIO | None = None,
        profile: str | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self._environ = os.environ if environ is None else environ
        self.region = region_from(region, environ)
        self.given_region = region
        self.profile = profile or None
        self._made = {service: made for service, made in (given or {}).items() if made is not None}
        self._session: Any = None
        self._err = err

    def __call__(self, service: str) -> Any:
        if service not in self._made:
            import boto3  # only commands that reach AWS pay for it

            from hyperpod_recovery_cli import aws_calls

            if self._session is None:
                self._session = boto3.session.Session(region_name=self.region, profile_name=self.profile)
            limits = aws_calls.limits_for(service)
            made = self._session.client(service, config=limits.config())
            self._made[service] = aws_calls.SlowCallNotice(self._err or sys.stderr, PROG, limits).watch(made)
        return self._made[service]

    def where(self, service: str = "cloudformation") -> str:
        """The region and the credentials a call of ``service`` used, and where each came from, as a
        message names them: "us-west-2 (from $AWS_REGION) with profile ops (from $AWS_PROFILE)"."""
        if self.given_region and self.given_region.strip():
            source = "--region"
        else:
            source = next((f"${name}" for name in REGION_VARIABLES if (self._environ.get(name) or "").strip()), "the profile's region")
        made = self._made.get(service)
        region = getattr(getattr(made, "meta", None), "region_name", None) or self.region or "no region"
        if self.profile:
            who = f"profile {self.profile} (from --profile)"
        elif (self._environ.get("AWS_PROFILE") or "").strip():
            who = f"profile {self._environ['AWS_PROFILE'].strip()} (from $AWS_PROFILE)"
        else:
            who = "the default credentials chain (no --profile, no $AWS_PROFILE)"
        return f"{region} (from {source}) with {who}"


# CloudFormation's DescribeStacks answer for a stack that is not there (a ValidationError, not a 404).
STACK_MISSING = re.compile(r"Stack with id (?P<name>\S+) does not exist")


def missing_stack(error: BaseException, clients: AwsClients | None) -> str | None:
    """The operator's message for DescribeStacks' "Stack with id X does not exist": the stack, the
    region and the credentials it was looked for with, and how to look elsewhere; None for another error."""
    response = getattr(error, "response", None)
    details = response.get("Error", {}) if isinstance(response, dict) else {}
    found = STACK_MISSING.search(str(details.get("Message", ""))) if details.get("Code") == "ValidationError" else None
    if found is None:
        return None
    where = clients.where() if clients is not None else "the configured region"
    return (
        f"no stack {found['name']} in {where}: check its name (--stack, or $HYPERPOD_RECOVERY_STACK), "
        "or look where it was deployed with --region REGION and --profile NAME (or AWS_REGION and AWS_PROFILE)"
    )
