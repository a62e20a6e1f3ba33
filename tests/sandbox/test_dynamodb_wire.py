"""The sandbox writes a DynamoDB item's plain values straight into moto's answers (sandbox/dynamodb_wire.py):
the answer must be moto's own, byte for byte, for every kind of value an item can hold."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any
from unittest import mock

import boto3
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto import mock_aws

from sandbox.dynamodb_wire import plain_value, plain_values_written_through

TABLE = "wire"
texts = st.text(max_size=12)
numbers = st.one_of(st.integers(-(10**12), 10**12).map(str), st.decimals(-1000, 1000, places=3, allow_nan=False).map(str))
scalars = st.one_of(
    texts.map(lambda s: {"S": s}),
    numbers.map(lambda n: {"N": n}),
    st.booleans().map(lambda b: {"BOOL": b}),
    st.just({"NULL": True}),
    st.binary(min_size=1, max_size=8).map(lambda b: {"B": b}),  # (moto's own path)
    st.sets(st.text(min_size=1, max_size=6), min_size=1, max_size=3).map(lambda s: {"SS": sorted(s)}),
    st.sets(st.integers(-99, 99), min_size=1, max_size=3).map(lambda s: {"NS": [str(n) for n in sorted(s)]}),
    st.sets(st.binary(min_size=1, max_size=4), min_size=1, max_size=2).map(lambda s: {"BS": sorted(s)}),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(lambda items: {"L": items}),
        # (a member may be named "": moto takes it, and its own answer is what the sandbox must give)
        st.dictionaries(st.text(max_size=6), inner, max_size=3).map(lambda members: {"M": members}),
    ),
    max_leaves=8,
)
items = st.dictionaries(st.text(min_size=1, max_size=8).filter(lambda n: n != "pk"), values, max_size=4)


@pytest.fixture(scope="module")
def table() -> Iterator[Any]:
    with mock.patch.dict(os.environ, {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}), mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        yield client


def raw_answers(client: Any, key: dict[str, Any]) -> list[bytes]:
    """The bytes moto answers a Scan, a Query, a GetItem and a BatchGetItem of the table with."""
    bodies: list[bytes] = []

    def keep(response_dict: dict[str, Any], **_: Any) -> None:
        bodies.append(response_dict["body"])

    calls = (
        lambda: client.scan(TableName=TABLE),
        lambda: client.query(TableName=TABLE, KeyConditionExpression="pk = :pk", ExpressionAttributeValues={":pk": key["pk"]}),
        lambda: client.get_item(TableName=TABLE, Key=key),
        lambda: client.batch_get_item(RequestItems={TABLE: {"Keys": [key]}}),
    )
    client.meta.events.register("before-parse.dynamodb.*", keep)
    try:
        for call in calls:
            # (moto's own answer for a map member named "" is one botocore cannot parse: its bytes are kept)
            with contextlib.suppress(AttributeError):
                call()
    finally:
        client.meta.events.unregister("before-parse.dynamodb.*", keep)
    return bodies


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(item=items)
def test_every_answer_is_motos_own_byte_for_byte(table: Any, item: dict[str, Any]) -> None:
    # Given an item of any values DynamoDB takes (it replaces the last example's)
    key = {"pk": {"S": "JOB#1001"}}
    table.put_item(TableName=TABLE, Item={**key, **item})
    # When it is read back with moto's serializer, and with plain values written through
    motos = raw_answers(table, key)
    with plain_values_written_through():
        written_through = raw_answers(table, key)
    # Then every answer is the same bytes
    assert written_through == motos


def test_a_value_of_any_other_form_takes_motos_path() -> None:
    # Given values that are not plain attribute values (a binary, two kinds in one, a number as a number)
    # When they are looked at, Then none is written through
    others = ({"B": b"x"}, {"S": "a", "N": "1"}, {"N": 1}, {"L": [{"S": "a"}, {"B": b"x"}]}, {"M": {"a": {"BS": [b"x"]}}}, {"NULL": "yes"})
    others += ({"M": {"": {"S": "x"}}},)  # (a member named "")
    for value in others:
        assert plain_value(value) is None, value


def test_a_plain_value_is_copied_not_shared() -> None:
    # Given a nested plain value, When it is written through, Then the copy shares no list or map with moto's item
    value = {"M": {"a": {"L": [{"SS": ["x"]}]}}}
    copy = plain_value(value)
    assert copy == value
    copy["M"]["a"]["L"][0]["SS"].append("y")
    assert value == {"M": {"a": {"L": [{"SS": ["x"]}]}}}
