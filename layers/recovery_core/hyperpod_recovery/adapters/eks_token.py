"""A bearer token for an EKS cluster's Kubernetes API, made as `aws eks get-token` makes it.

The token is a presigned STS GetCallerIdentity URL whose signature covers the header
``x-k8s-aws-id: <EKS cluster name>``, base64url-encoded without padding behind ``k8s-aws-v1.``.
The API server's authenticator (aws-iam-authenticator, EKS access entries) calls STS with it and
so learns who signed it, for this cluster only. The URL is valid 60 s for the first use, the
token about 15 minutes: one is minted per invocation, never cached across executions.

Nothing is sent here: signing is local (botocore's signer), so it is tested offline. Source of
the recipe: https://github.com/aws/aws-cli/blob/develop/awscli/customizations/eks/get_token.py
(TokenGenerator, STSClientFactory).
"""

from __future__ import annotations

import base64
from typing import Any

TOKEN_PREFIX = "k8s-aws-v1."  # noqa: S105 - the format's version marker, not a secret
CLUSTER_ID_HEADER = "x-k8s-aws-id"
URL_EXPIRES_SECONDS = 60


def mint_token(session: Any, cluster_name: str, region: str) -> str:
    """``session``: a boto3 Session (its credentials sign the URL); ``cluster_name``: the EKS
    cluster's name (the last part of HyperPod's Orchestrator.Eks.ClusterArn)."""
    if not cluster_name:
        raise ValueError("an EKS cluster name is required: the token is bound to it")
    # The regional endpoint of the region's partition, as botocore resolves it (regional is its
    # default for STS; a fixed amazonaws.com domain would be wrong in the cn and iso partitions).
    sts = session.client("sts", region_name=region)
    sts.meta.events.register("provide-client-params.sts.GetCallerIdentity", _keep_cluster_id)
    sts.meta.events.register("before-sign.sts.GetCallerIdentity", _sign_cluster_id)
    url: str = sts.generate_presigned_url(
        "get_caller_identity", Params={CLUSTER_ID_HEADER: cluster_name}, ExpiresIn=URL_EXPIRES_SECONDS, HttpMethod="GET"
    )
    return TOKEN_PREFIX + base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")


def _keep_cluster_id(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
    # GetCallerIdentity takes no parameter: the cluster id rides in the request context to the signer.
    if CLUSTER_ID_HEADER in params:
        context[CLUSTER_ID_HEADER] = params.pop(CLUSTER_ID_HEADER)


def _sign_cluster_id(request: Any, **_: Any) -> None:
    if CLUSTER_ID_HEADER in request.context:
        request.headers[CLUSTER_ID_HEADER] = request.context[CLUSTER_ID_HEADER]
