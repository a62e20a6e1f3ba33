"""DynamoDB item values on the wire, written straight through in the sandbox's moto (a speed-up, not a behaviour).

moto serializes every response through the service model, member by member: an item's attribute
value (``{"S": "..."}``) is a structure of eight members, each looked up under two names. A
Detect Hung Jobs tick scans one item per training node: at 2,048 nodes, 1.7 s of the tick's
time went to writing out values that are already in DynamoDB's wire form (issue 34: a tick of the
fleet drill). This writes such a value as it is when it holds only strings, numbers, booleans,
nulls, string and number sets, lists and maps of those (what the pipeline and its tables store);
anything else (a binary, a value moto keeps in another form) takes moto's own path. The answer is
the same, byte for byte: tests/sandbox/test_dynamodb_wire.py holds it to moto's own serializer.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

from moto.core.serialize import BaseJSONSerializer

_ATTRIBUTE_VALUE = "AttributeValue"  # (botocore's DynamoDB model: the shape of every item value)
_moto_structure = BaseJSONSerializer._serialize_type_structure


def plain_value(value: Any) -> Any:
    """A copy of ``value`` when it is an attribute value of plain types only, else None (moto's path)."""
    if type(value) is not dict or len(value) != 1:
        return None
    ((kind, inner),) = value.items()
    if kind in ("S", "N"):
        return {kind: inner} if type(inner) is str else None
    if kind in ("BOOL", "NULL"):
        return {kind: inner} if type(inner) is bool else None
    if kind in ("SS", "NS"):
        return {kind: list(inner)} if type(inner) is list and all(type(v) is str for v in inner) else None
    if kind == "L":
        if type(inner) is not list:
            return None
        items = [plain_value(v) for v in inner]
        return None if any(v is None for v in items) else {"L": items}
    if kind == "M":
        # (a member named "" takes moto's path: its map serializer writes such a member's value into the map itself)
        if type(inner) is not dict or not all(type(k) is str and k for k in inner):
            return None
        members = {k: plain_value(v) for k, v in inner.items()}
        return None if any(v is None for v in members.values()) else {"M": members}
    return None


def _serialize_structure(serializer: Any, serialized: Any, value: Any, shape: Any, key: str) -> None:
    if key and shape.name == _ATTRIBUTE_VALUE:
        plain = plain_value(value)
        if plain is not None:
            serializer._default_serialize(serialized, plain, shape, key)
            return
    _moto_structure(serializer, serialized, value, shape, key)


@contextmanager
def plain_values_written_through() -> Iterator[None]:
    with mock.patch.object(BaseJSONSerializer, "_serialize_type_structure", _serialize_structure):
        yield
