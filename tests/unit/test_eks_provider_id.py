"""A node's instance from its spec.providerID (domain/nodes/eks_provider_id.py): HyperPod's form and EC2's
name one, anchored on the instance id that ends the text; anything else names none, and a node that
names none is never taken for a missing one (adapters/eks_node_lookup.py), and the answer says so."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from hyperpod_recovery.adapters.eks_orchestrator import EksOrchestrator
from hyperpod_recovery.domain.nodes.eks_nodes import hyperpod_name
from hyperpod_recovery.domain.nodes.eks_provider_id import instance_of_provider_id, parse_provider_id
from hyperpod_recovery.models.commands import CordonNodes, NodeStates
from sandbox.kube import FakeKube

AT = datetime(2026, 3, 14, 9, 5, tzinfo=UTC)
HEX = "0123456789abcdef"
instance_ids = st.one_of(st.text(HEX, min_size=17, max_size=17), st.text(HEX, min_size=8, max_size=8)).map(lambda h: f"i-{h}")
# A cluster id: lowercase letters, digits and dashes, which may look like an instance's tail (hex, "-i-").
cluster_ids = st.lists(
    st.one_of(st.text("abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=12), instance_ids, st.just("i")),
    min_size=1,
    max_size=4,
).map("-".join)
zones = st.sampled_from(["use1-az4", "usw2-az1", "us-west-2a", "us-west-2-lax-1a", "euc1-az2"])


@given(zone=zones, cluster=cluster_ids, instance=instance_ids)
def test_hyperpods_provider_id_names_the_instance_that_ends_it_whatever_the_cluster_id_holds(
    zone: str, cluster: str, instance: str
) -> None:
    provider_id = f"aws:///{zone}/sagemaker/cluster/hyperpod-{cluster}-{instance}"
    assert parse_provider_id(provider_id) == ("hyperpod", instance)


@given(zone=zones, instance=instance_ids)
def test_ec2s_provider_id_names_its_instance(zone: str, instance: str) -> None:
    assert parse_provider_id(f"aws:///{zone}/{instance}") == ("ec2", instance)


def test_the_provider_id_seen_on_a_live_hyperpod_cluster_names_its_instance() -> None:
    assert instance_of_provider_id("aws:///use1-az4/sagemaker/cluster/hyperpod-tqci9uwuwqiz-i-00f3cbe8dfee6b675") == "i-00f3cbe8dfee6b675"


@given(
    provider_id=st.one_of(
        st.none(),
        st.just(""),
        st.text(max_size=80),
        instance_ids.map(lambda i: f"gce://project/zone/{i}"),
        instance_ids.map(lambda i: f"aws:///use1-az4/sagemaker/cluster/hyperpod-{i}"),  # no cluster id
        instance_ids.map(lambda i: f"aws:///use1-az4/sagemaker/cluster/hyperpod-abc-{i}x"),  # not at the end
        instance_ids.map(lambda i: f"aws:///use1-az4/{i.upper()}"),
        st.text(HEX, min_size=9, max_size=16).map(lambda h: f"aws:///use1-az4/i-{h}"),  # no instance id is that long
        instance_ids.map(lambda i: f"aws:///use1-az4/fargate-{i}"),
    )
)
def test_any_other_provider_id_names_no_instance(provider_id: str | None) -> None:
    assert instance_of_provider_id(provider_id) is None


def test_a_node_named_otherwise_is_known_by_its_instance_and_one_whose_provider_id_names_none_by_its_own_name() -> None:
    fake = FakeKube(now=lambda: AT)
    hyperpod = fake.add_node("ip-10-1-0-7.us-west-2.compute.internal", instance_id="i-0123456789abcdef0")
    plain = fake.add_node("ip-10-1-0-8.us-west-2.compute.internal", provider_id="aws:///us-west-2a/i-0123456789abcdef1")
    unknown = fake.add_node("ip-10-1-0-9.us-west-2.compute.internal")
    assert hyperpod["spec"]["providerID"] == f"aws:///usw2-az1/sagemaker/cluster/hyperpod-{fake.cluster_id}-i-0123456789abcdef0"
    assert [hyperpod_name(n) for n in (hyperpod, plain, unknown)] == [
        "hyperpod-i-0123456789abcdef0",
        "hyperpod-i-0123456789abcdef1",
        "ip-10-1-0-9.us-west-2.compute.internal",
    ]


def test_a_node_whose_provider_id_names_no_instance_is_never_taken_for_a_missing_one_and_the_answer_says_so() -> None:
    # Given an ip-named node whose providerID names no instance (and none named hyperpod-i-...2)
    fake = FakeKube(now=lambda: AT)
    fake.add_node("ip-10-1-0-9.us-west-2.compute.internal", provider_id="kind://docker/kind/ip-10-1-0-9")
    orchestrator = EksOrchestrator(fake, None, lambda: AT)  # type: ignore[arg-type]
    missing = "hyperpod-i-0123456789abcdef2"
    # When the workflow asks for the node of instance ...2
    (state,) = orchestrator.execute(NodeStates(nodes=[missing])).nodes
    # Then it is not found (never the unmatched node in its stead), and the reason names the node that could not be matched
    assert state.state == "down" and "cannot be matched to an instance: ip-10-1-0-9.us-west-2.compute.internal" in state.reason
    assert "kind://docker/kind/ip-10-1-0-9" in state.reason
    # And a cordon of it writes nothing
    assert orchestrator.cordon(CordonNodes(nodes=[missing], reason="hyperpod-recovery:hpr-a"), with_jobs=False).absent == [missing]
    assert not fake.nodes["ip-10-1-0-9.us-west-2.compute.internal"]["spec"].get("unschedulable")
