"""The HyperPod double (sandbox/hyperpod.py) served to the code under test: moto's SageMaker answers
the cluster-node calls from the double, written as moto's JSON serializer writes them."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import datetime
from typing import TYPE_CHECKING
from unittest import mock

from moto.core.serialize import TimestampSerializer
from moto.sagemaker.responses import SageMakerResponse

if TYPE_CHECKING:
    from sandbox.hyperpod import HyperPodDouble

SERVED_OPERATIONS = (
    "describe_cluster",
    "list_cluster_nodes",
    "describe_cluster_node",
    "batch_replace_cluster_nodes",
    "batch_reboot_cluster_nodes",
    "batch_delete_cluster_nodes",
)


def _unix_timestamp(value: object) -> int | float:
    """A timestamp as moto's JSON serializer writes one (epoch seconds, milliseconds kept)."""
    if not isinstance(value, datetime):
        raise TypeError(f"{type(value).__name__} is not JSON serializable")
    return TimestampSerializer._timestamp_unixtimestamp(value)


@contextmanager
def serve(double: HyperPodDouble) -> Iterator[None]:
    """Inside an active moto mock: answer SageMaker's cluster-node calls from ``double``. The answer is
    written as moto's JSON serializer would write it (the API's shapes, epoch-second timestamps), but
    directly: moto's model-driven serializer took most of a 2,048-node fleet drill's time, 21 pages
    of 100 node summaries for each ListClusterNodes listing. Errors still go through moto."""

    def action_for(operation: str) -> Callable[[SageMakerResponse], str]:
        method = getattr(double, operation)
        return lambda response: json.dumps(method(json.loads(response.body or "{}")), default=_unix_timestamp)

    with ExitStack() as stack:
        for operation in SERVED_OPERATIONS:
            stack.enter_context(mock.patch.object(SageMakerResponse, operation, action_for(operation), create=True))
        yield
