"""Read template.yaml and resolve the CloudFormation intrinsics it uses, so the sandbox builds its
in-memory AWS from the same file `sam deploy` uses: table keys, queue settings, EventBridge
patterns, the functions' environment, the state machine's definition substitutions.

Only the intrinsics template.yaml uses are supported; anything else raises, so a template change
that the sandbox cannot follow fails loudly instead of drilling something else.
"""

from __future__ import annotations

import copy
import functools
import re
from pathlib import Path
from typing import Any

import yaml

_SHORT_TAGS = {
    "!Ref": "Ref",
    "!Sub": "Fn::Sub",
    "!GetAtt": "Fn::GetAtt",
    "!Join": "Fn::Join",
    "!If": "Fn::If",
    "!Equals": "Fn::Equals",
    "!Not": "Fn::Not",
    "!Select": "Fn::Select",
    "!Split": "Fn::Split",
}


class _CfnLoader(yaml.SafeLoader):
    pass


def _construct(tag: str):  # type: ignore[no-untyped-def]
    def construct(loader: yaml.SafeLoader, node: yaml.Node) -> dict[str, Any]:
        if isinstance(node, yaml.ScalarNode):
            value: Any = loader.construct_scalar(node)
            if tag == "Fn::GetAtt":
                value = value.split(".", 1)
        elif isinstance(node, yaml.SequenceNode):
            value = loader.construct_sequence(node, deep=True)
        else:
            value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
        return {tag: value}

    return construct


for _short, _long in _SHORT_TAGS.items():
    _CfnLoader.add_constructor(_short, _construct(_long))


def load_template(path: Path) -> dict[str, Any]:
    """The template as a dict of its own: callers may change it. Parsed once per file version (the
    YAML parse is a fifth of a sandbox's deploy; every drill deploys the same template)."""
    stat = path.stat()
    return copy.deepcopy(_parsed(path.resolve(), stat.st_mtime_ns, stat.st_size))


@functools.lru_cache(maxsize=8)
def _parsed(path: Path, mtime_ns: int, size: int) -> dict[str, Any]:
    return yaml.load(path.read_text(), Loader=_CfnLoader)  # noqa: S506 - SafeLoader subclass


class UnsupportedIntrinsic(Exception):
    pass


# What Ref AWS::NoValue resolves to: the list item or property holding it is left out.
_NO_VALUE = object()


class Resolver:
    """Resolves intrinsics against parameter values, pseudo parameters and known resource values.

    ``refs`` maps a logical id to what ``Ref`` returns; ``attrs`` maps (logical id, attribute)
    to what ``Fn::GetAtt`` returns.
    """

    def __init__(self, template: dict[str, Any], parameters: dict[str, str], pseudo: dict[str, str]) -> None:
        self.template = template
        self.parameters = {name: str(spec.get("Default", "")) for name, spec in template.get("Parameters", {}).items()}
        unknown = set(parameters) - set(self.parameters)
        if unknown:
            raise UnsupportedIntrinsic(f"unknown template parameters: {sorted(unknown)}")
        self.parameters.update(parameters)
        self.pseudo = pseudo
        self.refs: dict[str, str] = {}
        self.attrs: dict[tuple[str, str], str] = {}

    def condition(self, name: str) -> bool:
        return bool(self.resolve(self.template.get("Conditions", {})[name]))

    def resolve(self, node: Any) -> Any:
        if isinstance(node, list):
            return [resolved for resolved in map(self.resolve, node) if resolved is not _NO_VALUE]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            ((key, value),) = node.items()
            if key == "Ref":
                return _NO_VALUE if value == "AWS::NoValue" else self._ref(value)
            if key == "Fn::GetAtt":
                return self.attrs[(value[0], value[1])]
            if key == "Fn::Sub":
                return self._sub(value)
            if key == "Fn::Equals":
                left, right = self.resolve(value)
                return str(left) == str(right)
            if key == "Fn::Not":
                return not self.resolve(value[0])
            if key == "Fn::And":
                return all(self.resolve(v) for v in value)
            if key == "Fn::Or":
                return any(self.resolve(v) for v in value)
            if key == "Condition":
                return self.condition(value)
            if key == "Fn::If":
                return self.resolve(value[1] if self.condition(value[0]) else value[2])
            if key == "Fn::Join":
                return value[0].join(str(v) for v in self.resolve(value[1]))
            if key.startswith("Fn::"):
                raise UnsupportedIntrinsic(key)
        resolved = {k: self.resolve(v) for k, v in node.items()}
        return {k: v for k, v in resolved.items() if v is not _NO_VALUE}

    def _ref(self, name: str) -> str:
        if name in self.parameters:
            return self.parameters[name]
        if name in self.pseudo:
            return self.pseudo[name]
        if name in self.refs:
            return self.refs[name]
        raise UnsupportedIntrinsic(f"Ref to {name!r} is not known to the sandbox")

    def _sub(self, value: Any) -> str:
        text, variables = (value, {}) if isinstance(value, str) else (value[0], self.resolve(value[1]))

        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name in variables:
                return str(variables[name])
            if "." in name and not name.startswith("AWS::"):
                logical, attribute = name.split(".", 1)
                return self.attrs[(logical, attribute)]
            return self._ref(name)

        return re.sub(r"\$\{([^}!][^}]*)\}", replace, text)
