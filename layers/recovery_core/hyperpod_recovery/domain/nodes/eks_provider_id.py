"""A Kubernetes node's EC2 instance, read from its ``spec.providerID``.

Two forms name an instance (every other form, or none, names none):

| form     | spec.providerID                                                       | written by                 |
|----------|-----------------------------------------------------------------------|----------------------------|
| HyperPod | ``aws:///<zone>/sagemaker/cluster/hyperpod-<cluster id>-<instance id>`` | HyperPod, for its nodes    |
| EC2      | ``aws:///<zone>/<instance id>``                                         | cloud-provider-aws (EKS)   |

HyperPod's form: aws/amazon-vpc-cni-k8s@894e4cb ``test/integration/ipamd/hyperpod_common.go``
("HyperPod node providerID: aws:///<az>/sagemaker/cluster/hyperpod-<clusterID>-<instanceID>"); seen on
a live cluster as ``aws:///use1-az4/sagemaker/cluster/hyperpod-tqci9uwuwqiz-i-00f3cbe8dfee6b675`` (a
zone id; the cluster id is the last part of the cluster's ARN). The instance id is anchored at the end:
a cluster id may hold hex and dashes (even ``-i-``), an instance id never holds a dash, so the
instance is the ``i-`` and 8 or 17 hex digits that end the text, after a dash.
"""

from __future__ import annotations

import re
from typing import Literal

INSTANCE_ID = r"i-(?:[0-9a-f]{17}|[0-9a-f]{8})"
_ZONE = r"[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?"
_CLUSTER = r"[a-z0-9](?:[a-z0-9-]{0,126}[a-z0-9])?"
_HYPERPOD = re.compile(rf"aws:///{_ZONE}/sagemaker/cluster/hyperpod-{_CLUSTER}-(?P<instance>{INSTANCE_ID})")
_EC2 = re.compile(rf"aws:///{_ZONE}/(?P<instance>{INSTANCE_ID})")
# A providerID is the kubelet's word (anything a node registers with): only so much of it is read or repeated.
PROVIDER_ID_MAX = 512

ProviderForm = Literal["hyperpod", "ec2"]


def parse_provider_id(provider_id: object) -> tuple[ProviderForm, str] | None:
    """(form, instance id) of a node's providerID; None when it names no instance in either form."""
    if not isinstance(provider_id, str) or len(provider_id) > PROVIDER_ID_MAX:
        return None
    for form, pattern in (("hyperpod", _HYPERPOD), ("ec2", _EC2)):
        found = pattern.fullmatch(provider_id)
        if found is not None:
            return form, found.group("instance")  # type: ignore[return-value]
    return None


def instance_of_provider_id(provider_id: object) -> str | None:
    """The instance id a node's providerID names (None: it names none)."""
    parsed = parse_provider_id(provider_id)
    return parsed[1] if parsed is not None else None


def unreadable_provider_id(provider_id: object) -> str:
    """Why a providerID names no instance, in words for a human."""
    if provider_id in (None, ""):
        return "it has no spec.providerID"
    shown = str(provider_id)[:120]
    return (
        f"its spec.providerID {shown!r} is neither HyperPod's aws:///<zone>/sagemaker/cluster/hyperpod-<cluster>-<instance> "
        "nor EC2's aws:///<zone>/<instance>"
    )
