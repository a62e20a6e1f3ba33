"""AWS list prices (us-east-1, on-demand, no free tier) the fleet report prices its run with, each
with where it was read and when: a price here is a dated quotation, not a live figure. To refresh,
read each ``source`` again, change ``usd`` and set ``TAKEN`` to that day.

``confirmed`` says whether the figure was read on AWS's own pricing page (True) or only on a
third-party page that quotes it (False: the AWS page's table did not render in the stored copy
searched); a price read nowhere is not here, it is an ASSUMPTION in the report.
"""

from __future__ import annotations

from dataclasses import dataclass

TAKEN = "2026-11-27"  # the day every price below was read
REGION = "us-east-1"


@dataclass(frozen=True)
class Price:
    key: str
    what: str
    usd: float  # for ``per`` units
    per: int
    unit: str
    source: str
    confirmed: bool
    quoted_by: str = ""  # the third-party page the figure was read on, when ``confirmed`` is False

    @property
    def usd_each(self) -> float:
        return self.usd / self.per


def _s3_requests(key: str, what: str, usd: float) -> Price:
    """An S3 Standard request price, per 1,000 requests (read where a third party quotes AWS's page)."""
    return Price(
        key,
        f"S3 Standard: {what}",
        usd,
        1_000,
        "requests",
        "https://aws.amazon.com/s3/pricing/",
        confirmed=False,
        quoted_by="https://c3x.dev/blog/s3-request-fees-explained",
    )


PRICES: dict[str, Price] = {
    p.key: p
    for p in (
        Price(
            "stepfunctions_transition",
            "Step Functions Standard: state transition",
            0.025,
            1_000,
            "state transitions",
            "https://aws.amazon.com/step-functions/pricing/",
            confirmed=True,
        ),
        Price(
            "lambda_request",
            "Lambda: request",
            0.20,
            1_000_000,
            "requests",
            "https://aws.amazon.com/lambda/pricing/",
            confirmed=False,
            quoted_by="https://cloudchipr.com/blog/aws-lambda-pricing",
        ),
        Price(
            "lambda_arm_gb_second",
            "Lambda arm64: duration (first 7.5 billion GB-s a month)",
            0.0000133334,
            1,
            "GB-seconds",
            "https://aws.amazon.com/lambda/pricing/",
            confirmed=False,
            quoted_by="https://cloudchipr.com/blog/aws-lambda-pricing",
        ),
        Price(
            "dynamodb_write_unit",
            "DynamoDB on-demand: write request unit (after the November 2024 cut)",
            0.625,
            1_000_000,
            "write request units",
            "https://aws.amazon.com/dynamodb/pricing/",
            confirmed=False,
            quoted_by="https://airbyte.com/data-engineering-resources/dynamodb-pricing",
        ),
        Price(
            "dynamodb_read_unit",
            "DynamoDB on-demand: read request unit (after the November 2024 cut)",
            0.125,
            1_000_000,
            "read request units",
            "https://aws.amazon.com/dynamodb/pricing/",
            confirmed=False,
            quoted_by="https://airbyte.com/data-engineering-resources/dynamodb-pricing",
        ),
        Price(
            "sqs_request",
            "SQS standard queue: request (up to 64 KB)",
            0.40,
            1_000_000,
            "requests",
            "https://aws.amazon.com/sqs/pricing/",
            confirmed=False,
            quoted_by="https://cloudburn.io/blog/amazon-sqs-pricing",
        ),
        Price(
            "sns_publish",
            "SNS standard topic: publish",
            0.50,
            1_000_000,
            "publishes",
            "https://aws.amazon.com/sns/pricing/",
            confirmed=False,
            quoted_by="https://www.factualminds.com/blog/amazon-sns-pricing-publishes-fanout-protocols/",
        ),
        _s3_requests("s3_get", "GET, HEAD", 0.0004),
        _s3_requests("s3_list", "PUT, COPY, POST, LIST", 0.005),
        Price(
            "eventbridge_aws_event",
            "EventBridge: an AWS service's event to the default bus",
            0.0,
            1,
            "events",
            "https://aws.amazon.com/eventbridge/pricing/",
            confirmed=False,
            quoted_by="https://www.wring.co/blog/aws-eventbridge-pricing-guide",
        ),
    )
}

# Calls that cost nothing by themselves, and why (a call not here and not priced is listed as unpriced).
FREE_CALLS = {
    "sagemaker": "SageMaker's control-plane API calls are not billed (ASSUMPTION: no source read; HyperPod bills its instances)",
    "stepfunctions": "Step Functions bills state transitions, not its API calls",
    "lambda": "Lambda bills requests and duration (priced from the invocations)",
}
