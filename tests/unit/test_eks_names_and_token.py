"""EKS foundations (issue 19): Kubernetes names validated as Kubernetes defines them, and the
Kubernetes API token minted as `aws eks get-token` mints it, checked offline."""

from __future__ import annotations

import base64
from urllib.parse import parse_qs, urlparse

import boto3
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from hyperpod_recovery.adapters.eks_token import CLUSTER_ID_HEADER, TOKEN_PREFIX, mint_token
from hyperpod_recovery.models.kubernetes import (
    DNS1123_LABEL_MAX,
    DNS1123_SUBDOMAIN_MAX,
    KubeNamespace,
    KubeNodeName,
    is_dns1123_label,
    is_dns1123_subdomain,
    node_name_for_instance,
)


class _Names(BaseModel):
    namespace: KubeNamespace | None = None
    node: KubeNodeName | None = None


# --- names ------------------------------------------------------------------------------------------
labels = st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")


@settings(max_examples=300, deadline=None)
@given(label=labels, more=st.lists(labels, max_size=3))
def test_every_name_kubernetes_accepts_is_accepted(label: str, more: list[str]) -> None:
    subdomain = ".".join([label, *more])
    assert is_dns1123_label(label) and _Names(namespace=label).namespace == label
    if len(subdomain) <= DNS1123_SUBDOMAIN_MAX:
        assert is_dns1123_subdomain(subdomain) and _Names(node=subdomain).node == subdomain


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "Upper",
        "-leading",
        "trailing-",
        "under_score",
        "dot.in.namespace",
        "a" * (DNS1123_LABEL_MAX + 1),
        "../kube-system",
        "ns/secrets",
        "ns%2Fsecrets",
        "ns?watch=true",
        "ns\n",
        "ñ",
    ],
)
def test_a_namespace_kubernetes_would_refuse_or_that_could_change_the_path_is_refused(bad: str) -> None:
    assert not is_dns1123_label(bad)
    with pytest.raises(ValidationError):
        _Names(namespace=bad)


@pytest.mark.parametrize("bad", ["", "a..b", ".a", "a.", "A.b", "a/b", "a b", "a" * (DNS1123_SUBDOMAIN_MAX + 1), "hyperpod-i-0A"])
def test_a_node_name_kubernetes_would_refuse_is_refused(bad: str) -> None:
    assert not is_dns1123_subdomain(bad)
    with pytest.raises(ValidationError):
        _Names(node=bad)


@settings(max_examples=200, deadline=None)
@given(suffix=st.from_regex(r"\A[0-9a-f]{8}([0-9a-f]{9})?\Z"))
def test_a_hyperpod_node_is_named_after_its_instance_and_the_name_is_valid(suffix: str) -> None:
    name = node_name_for_instance(f"i-{suffix}")
    assert name == f"hyperpod-i-{suffix}" and is_dns1123_subdomain(name)


# --- the token ---------------------------------------------------------------------------------------
def _url_of(token: str) -> str:
    assert token.startswith(TOKEN_PREFIX) and "=" not in token
    body = token.removeprefix(TOKEN_PREFIX)
    return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()


def test_the_token_is_a_presigned_get_caller_identity_bound_to_the_cluster() -> None:
    # Given credentials (the test environment's dummy ones) and an EKS cluster name
    session = boto3.Session(region_name="us-west-2")
    # When a token is minted
    url = urlparse(_url_of(mint_token(session, "llm-train-eks", "us-west-2")))
    query = {k: v[0] for k, v in parse_qs(url.query).items()}
    # Then it is STS's regional GetCallerIdentity, presigned for 60 s, signing the cluster id header
    assert (url.scheme, url.netloc, url.path) == ("https", "sts.us-west-2.amazonaws.com", "/")
    assert (query["Action"], query["Version"], query["X-Amz-Expires"]) == ("GetCallerIdentity", "2011-06-15", "60")
    assert query["X-Amz-Algorithm"] == "AWS4-HMAC-SHA256" and "/us-west-2/sts/aws4_request" in query["X-Amz-Credential"]
    assert set(query["X-Amz-SignedHeaders"].split(";")) == {"host", CLUSTER_ID_HEADER}
    # And the cluster name itself never travels in the URL: only its signature does
    assert "llm-train-eks" not in url.geturl()


def test_a_token_for_another_cluster_is_another_signature() -> None:
    session = boto3.Session(region_name="us-west-2")
    signatures = [parse_qs(urlparse(_url_of(mint_token(session, name, "us-west-2"))).query)["X-Amz-Signature"][0] for name in "ab"]
    assert signatures[0] != signatures[1]


def test_a_token_without_a_cluster_name_is_refused() -> None:
    with pytest.raises(ValueError, match="cluster name"):
        mint_token(boto3.Session(region_name="us-west-2"), "", "us-west-2")


@pytest.mark.parametrize(
    ("region", "host"), [("us-west-2", "sts.us-west-2.amazonaws.com"), ("cn-north-1", "sts.cn-north-1.amazonaws.com.cn")]
)
def test_the_token_is_signed_for_the_regional_sts_of_the_regions_partition(region: str, host: str) -> None:
    url = urlparse(_url_of(mint_token(boto3.Session(region_name=region), "llm-train-eks", region)))
    assert url.netloc == host and f"/{region}/sts/aws4_request" in parse_qs(url.query)["X-Amz-Credential"][0]
