"""What the pipeline would cost a month at AWS's public list prices (sandbox/fleet/prices.py, each
with its date and source): the run's counts per day (the report's ``cost_per_day``) times 30, times
the price. The report's ``monthly_cost`` section:

* ``lines``: per priced item, its ``service``, ``what``, ``per_30_days`` (the count), ``unit``,
  ``usd_each`` and ``usd`` (count x price);
* ``by_service`` and ``total_usd``: the sums of ``usd``; ``assumed_usd``: the part of the total from
  lines whose count is an ASSUMPTION (``assumed``), not the run's;
* ``free``: calls counted but not billed, and why; ``unpriced``: calls per 30 days no price here
  covers (left out of the total, not hidden);
* ``assumptions``: every figure the run did not measure; ``prices_taken``, ``region``.

Free tiers are ignored (a cluster's account runs other things), as are CloudWatch Logs and metrics,
data transfer and storage: requests only.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from sandbox.fleet.prices import FREE_CALLS, PRICES, REGION, TAKEN

DAYS_A_MONTH = 30
# ASSUMPTION: a handler's mean billed duration. The sandbox's wall time is not Lambda's (moto answers in
# microseconds, a real AWS call takes 10-100 ms); a handler makes a few calls: 0.5 s is a round guess.
LAMBDA_MEAN_SECONDS = 0.5
# ASSUMPTION: idle long polls the sandbox does not count. The controller's agent long-polls its command
# queue every 20 s (agent config poll_wait_seconds); Lambda's SQS event source mappings (3 queues in
# template.yaml) poll with 5 pollers each at 20 s while idle.
IDLE_POLLERS = 1 + 3 * 5
LONG_POLL_SECONDS = 20
DYNAMODB_WRITES = {"PutItem": 1, "UpdateItem": 1, "DeleteItem": 1, "TransactWriteItems": 2, "BatchWriteItem": 1}
DYNAMODB_READS = {"GetItem", "Query", "BatchGetItem", "Scan", "TransactGetItems"}
S3_GET_TIER = {"GetObject", "HeadObject"}
S3_LIST_TIER = {"ListObjectsV2", "ListObjects", "PutObject", "CopyObject"}


def lambda_memory_mb(template: Path) -> int | None:
    """MemorySize under template.yaml's Globals: Function: (read as text: the template's !Ref tags are not plain YAML)."""
    text = template.read_text()
    globals_block = re.search(r"^Globals:\n(?:[ \t].*\n|\n)*", text, re.MULTILINE)
    if globals_block is None:
        return None
    memory = re.search(r"^\s+MemorySize:\s*(\d+)", globals_block.group(0), re.MULTILINE)
    return int(memory.group(1)) if memory else None


def monthly_cost(report: dict[str, Any], memory_mb: int, item_bytes: int | None = None) -> dict[str, Any]:
    """``report`` needs ``cost_per_day`` (``state_transitions``, ``lambda_invocations``,
    ``aws_calls_by_call``) and, unless ``item_bytes`` is given, ``limits.largest_dynamodb_item_bytes``."""
    per_day = report["cost_per_day"]
    calls: dict[str, float] = per_day["aws_calls_by_call"]
    item = item_bytes if item_bytes is not None else report["limits"]["largest_dynamodb_item_bytes"]
    write_units = max(1, math.ceil(item / 1024))
    read_units = max(1, math.ceil(item / 4096))
    month = float(DAYS_A_MONTH)
    lines: list[dict[str, Any]] = []

    def add(service: str, key: str, count_per_day: float) -> None:
        price = PRICES[key]
        count = count_per_day * month
        lines.append(
            {
                "service": service,
                "what": price.what,
                "per_30_days": round(count, 1),
                "unit": price.unit,
                "usd_each": round(price.usd_each, 12),
                "usd": round(count * price.usd_each, 4),
                "assumed": False,  # True: the count is not the run's, it is an ASSUMPTION
            }
        )

    by_api: dict[str, dict[str, float]] = defaultdict(dict)
    for call, n in calls.items():
        service, _, api = call.partition(".")
        by_api[service][api] = n
    add("stepfunctions", "stepfunctions_transition", per_day["state_transitions"])
    invocations = per_day["lambda_invocations"]
    add("lambda", "lambda_request", invocations)
    add("lambda", "lambda_arm_gb_second", invocations * LAMBDA_MEAN_SECONDS * memory_mb / 1024)
    dynamodb = by_api.pop("dynamodb", {})
    add("dynamodb", "dynamodb_write_unit", sum(n * DYNAMODB_WRITES[a] * write_units for a, n in dynamodb.items() if a in DYNAMODB_WRITES))
    # (Detect Hung Jobs' scans read the whole progress table: priced by the table's size when the run measured it)
    scan_units = per_day.get("progress_scan_read_units")
    counted = [a for a in DYNAMODB_READS if a != "Scan" or scan_units is None]
    add("dynamodb", "dynamodb_read_unit", sum(n * read_units for a, n in dynamodb.items() if a in counted))
    if scan_units is not None:
        add("dynamodb", "dynamodb_read_unit", scan_units)
        lines[-1]["what"] += ": Detect Hung Jobs' scans of the progress table, its rows' size (a lower bound)"
    sqs = by_api.pop("sqs", {})
    add("sqs", "sqs_request", sum(sqs.values()))
    add("sqs", "sqs_request", IDLE_POLLERS * 86_400 / LONG_POLL_SECONDS)
    lines[-1]["what"] += ": idle long polls (ASSUMPTION, not counted by the sandbox)"
    lines[-1]["assumed"] = True
    sns = by_api.pop("sns", {})
    add("sns", "sns_publish", sns.pop("Publish", 0))
    s3 = by_api.pop("s3", {})
    add("s3", "s3_get", sum(n for a, n in s3.items() if a in S3_GET_TIER))
    add("s3", "s3_list", sum(n for a, n in s3.items() if a in S3_LIST_TIER))
    unpriced = {f"dynamodb.{a}": n for a, n in dynamodb.items() if a not in DYNAMODB_WRITES and a not in DYNAMODB_READS}
    unpriced |= {f"sns.{a}": n for a, n in sns.items()}
    unpriced |= {f"s3.{a}": n for a, n in s3.items() if a not in S3_GET_TIER and a not in S3_LIST_TIER}
    free = {service: FREE_CALLS[service] for service in by_api if service in FREE_CALLS}
    unpriced |= {f"{service}.{a}": n for service, apis in by_api.items() if service not in FREE_CALLS for a, n in apis.items()}
    free["events"] = (
        "EventBridge: AWS services' events (HyperPod's, Step Functions') to the default bus are free; the controller agent's "
        "job-failed events are custom PutEvents ($1.00 per million): the sandbox delivers them to the queue directly, so they "
        "are not counted here (one per job failure: cents a year)"
    )
    by_service: dict[str, float] = defaultdict(float)
    for line in lines:
        by_service[line["service"]] += line["usd"]
    return {
        "prices_taken": TAKEN,
        "region": REGION,
        "days": DAYS_A_MONTH,
        "lines": lines,
        "by_service": {k: round(v, 4) for k, v in by_service.items()},
        "total_usd": round(sum(line["usd"] for line in lines), 4),
        "assumed_usd": round(sum(line["usd"] for line in lines if line["assumed"]), 4),
        "free": free,
        "unpriced": {k: round(v * month, 1) for k, v in sorted(unpriced.items())},
        "assumptions": [
            f"Lambda memory {memory_mb} MB (template.yaml Globals) on arm64; mean billed duration {LAMBDA_MEAN_SECONDS:g} s per "
            "invocation (ASSUMPTION: the sandbox's wall time is not Lambda's)",
            f"DynamoDB: every write of an item as large as the run's largest ({item:,} B: {write_units} WRU), every read "
            f"strongly consistent of one such item ({read_units} RRU), a batch read as one item (ASSUMPTION: an upper bound "
            "for writes, a lower one for batch reads)",
            f"SQS: {IDLE_POLLERS} idle long pollers at {LONG_POLL_SECONDS} s (the agent, and 5 per Lambda event source "
            "mapping on 3 queues) (ASSUMPTION)",
            "SageMaker's control-plane API calls are not billed (ASSUMPTION)",
            "no free tier; no CloudWatch Logs or metrics, data transfer or storage: requests only",
            "prices: us-east-1 list prices read on the day stated; those not read on AWS's own page say where they were read",
        ],
    }


def price_table() -> list[dict[str, Any]]:
    """The prices as the reports show them, with their sources."""
    return [
        {
            "what": p.what,
            "usd": p.usd,
            "per": p.per,
            "unit": p.unit,
            "source": p.source,
            "confirmed": p.confirmed,
            "quoted_by": p.quoted_by,
            "taken": TAKEN,
        }
        for p in PRICES.values()
    ]
