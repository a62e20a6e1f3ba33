"""What moto would do again for every drill, done once per process: botocore's data loader, the parse
tree of each state machine definition, the SNS signing key and KMS's unused private keys."""

from __future__ import annotations

import functools
import threading
from typing import Any

import boto3
from cryptography.hazmat.primitives.asymmetric import rsa
from moto.kms import models as moto_kms_models
from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser
from moto.stepfunctions.parser.asl.parse.preprocessor import Preprocessor
from moto.stepfunctions.parser.models import StepFunctionsParserBackend

from sandbox.aws.names import REGION

# Every sandbox in a process reads the same botocore data files (service models, endpoint rules,
# partitions: a megabyte of JSON per client otherwise), so the runner's sessions share one loader.
# Only the data is shared: each sandbox gets its own session, credentials and clients.
_SHARED_LOADER: Any = None
_SHARED_LOADER_LOCK = threading.Lock()


def _session() -> boto3.session.Session:
    global _SHARED_LOADER
    session = boto3.session.Session(region_name=REGION)
    with _SHARED_LOADER_LOCK:
        if _SHARED_LOADER is None:
            _SHARED_LOADER = session._session.get_component("data_loader")
        else:
            session._session.register_component("data_loader", _SHARED_LOADER)
    return session


# moto parses a state machine's ASL with its ANTLR grammar at CreateStateMachine and again at every
# StartExecution (a fifth of a second each: most of a drill's set-up). The parse tree of one
# definition never changes; the program built from it does (it holds the execution's state), so
# the tree is kept and the program is built afresh from it every time, as moto would.
_ASL_TREES: dict[str, Any] = {}
_moto_asl_parse = AmazonStateLanguageParser.parse


def _parse_asl_once(definition: str) -> tuple[Any, Any]:
    tree = _ASL_TREES.get(definition)
    if tree is None:
        _, tree = _moto_asl_parse(definition)  # a syntax error raises here, and is not kept
        if len(_ASL_TREES) >= 64:  # definitions differ by the stack's names: a few per process
            _ASL_TREES.clear()
        _ASL_TREES[definition] = tree
    return Preprocessor().visit(tree), tree


_moto_validate_definition = StepFunctionsParserBackend._validate_definition


@functools.lru_cache(maxsize=1)
def _sns_signing_key() -> Any:
    """moto signs each SNS delivery with a fresh 2048-bit RSA key per subscription (a tenth of a
    second per drill, for a signature no drill checks): one key per process signs them all."""
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


_moto_kms_private_key = moto_kms_models.generate_private_key


@functools.lru_cache(maxsize=1)
def _kms_unused_private_key() -> Any:
    return _moto_kms_private_key("SYMMETRIC_DEFAULT")


def _kms_private_key(key_spec: str) -> Any:
    """moto gives every KMS key an RSA private key, a symmetric one too, where it is never used
    (the stack's keys are all symmetric): those share one. Asymmetric keys get their own, as in moto."""
    if key_spec == "SYMMETRIC_DEFAULT":
        return _kms_unused_private_key()
    return _moto_kms_private_key(key_spec)


def _validate_definition_once(definition: str) -> None:
    """CreateStateMachine's check: a definition that parsed and built before is valid."""
    if definition not in _ASL_TREES:
        _moto_validate_definition(definition)
