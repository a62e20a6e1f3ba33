"""Where the operator's commands reach AWS: the region and profile found as the AWS CLI v2 finds them,
and boto3 clients made on first use.

botocore itself reads only AWS_DEFAULT_REGION; the AWS CLI v2, CloudShell and most CI systems set
AWS_REGION, which the CLI v2 prefers. Order: --region, $AWS_REGION, $AWS_DEFAULT_REGION, then the
profile's region (--profile, else $AWS_PROFILE, else default), which botocore reads itself.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any, TextIO

from hyperpod_recovery_cli import PROG, aws_calls

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
        self.region = region_from(region, environ)
        self.profile = profile or None
        self._made = {service: made for service, made in (given or {}).items() if made is not None}
        self._session: Any = None
        self._err = err

    def __call__(self, service: str) -> Any:
        if service not in self._made:
            import boto3  # only commands that reach AWS pay for it

            if self._session is None:
                self._session = boto3.session.Session(region_name=self.region, profile_name=self.profile)
            limits = aws_calls.limits_for(service)
            made = self._session.client(service, config=limits.config())
            self._made[service] = aws_calls.SlowCallNotice(self._err or sys.stderr, PROG, limits).watch(made)
        return self._made[service]
