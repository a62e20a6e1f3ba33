"""What a training script imports besides this project, for the docs' runnable snippets: PyTorch's
distributed checkpointing (DCP) and s3torchconnector's DCP storage, reduced to what the snippets call
(``dcp.save``/``dcp.load`` with ``S3StorageWriter``/``S3StorageReader(region, path)``, as in
s3torchconnector's README; ``torch.distributed.get_rank``), and ``my_training.build``, the reader's own
model, optimizer and batches. They write and read real objects in the
S3 the snippet runs against (moto), so the checkpoint library commits and discovers real folders.

ASSUMPTION, stricter than DCP: a save into a step folder that already holds a committed manifest is
refused. DCP would overwrite the shards in place, under a manifest that no longer describes them; a
snippet that resumes at the checkpoint's own step (not the one after) does exactly that."""

from __future__ import annotations

import itertools
import types
from collections.abc import Iterator
from typing import Any

import boto3

from hyperpod_recovery.domain.checkpoints.discovery import split_s3_uri

SHARDS = ("__0_0.distcp", ".metadata")


class CommittedCheckpointOverwritten(RuntimeError):
    """A save into the folder of a checkpoint already committed: the run repeated a saved step."""


class S3StorageWriter:
    def __init__(self, region: str, path: str, **_: Any) -> None:
        self.region, self.path = region, path


class S3StorageReader:
    def __init__(self, region: str, path: str, **_: Any) -> None:
        self.region, self.path = region, path


def save(state_dict: dict[str, Any], *, storage_writer: S3StorageWriter, **_: Any) -> None:
    bucket, folder = split_s3_uri(storage_writer.path)
    s3 = boto3.client("s3", region_name=storage_writer.region)
    if s3.list_objects_v2(Bucket=bucket, Prefix=folder + "manifest.json").get("KeyCount"):
        raise CommittedCheckpointOverwritten(f"{storage_writer.path} is committed already: this step was saved before")
    body = repr(sorted(state_dict)).encode()
    for key in SHARDS:
        s3.put_object(Bucket=bucket, Key=folder + key, Body=body)


def load(state_dict: dict[str, Any], *, storage_reader: S3StorageReader, **_: Any) -> None:
    bucket, folder = split_s3_uri(storage_reader.path)
    boto3.client("s3", region_name=storage_reader.region).head_object(Bucket=bucket, Key=folder + ".metadata")


class _Loss:
    def __truediv__(self, _: float) -> _Loss:
        return self

    def backward(self) -> None: ...


class _Model:
    def __call__(self, _: object) -> _Loss:
        return _Loss()

    def state_dict(self) -> dict[str, Any]:
        return {}


class _Optimizer:
    def step(self) -> None: ...

    def zero_grad(self) -> None: ...

    def state_dict(self) -> dict[str, Any]:
        return {}


def build(**_: int) -> tuple[_Model, _Optimizer, Iterator[int]]:
    return _Model(), _Optimizer(), itertools.count()


def modules() -> dict[str, types.ModuleType]:
    """``sys.modules`` entries: torch, torch.distributed, torch.distributed.checkpoint,
    s3torchconnector, s3torchconnector.dcp, my_training."""
    checkpoint = types.ModuleType("torch.distributed.checkpoint")
    checkpoint.save, checkpoint.load = save, load  # type: ignore[attr-defined]
    distributed = types.ModuleType("torch.distributed")
    distributed.get_rank = lambda: 0  # type: ignore[attr-defined]
    distributed.checkpoint = checkpoint  # type: ignore[attr-defined]
    torch = types.ModuleType("torch")
    torch.distributed = distributed  # type: ignore[attr-defined]
    connector_dcp = types.ModuleType("s3torchconnector.dcp")
    connector_dcp.S3StorageWriter, connector_dcp.S3StorageReader = S3StorageWriter, S3StorageReader  # type: ignore[attr-defined]
    connector = types.ModuleType("s3torchconnector")
    connector.dcp = connector_dcp  # type: ignore[attr-defined]
    training = types.ModuleType("my_training")
    training.build = build  # type: ignore[attr-defined]
    return {
        "my_training": training,
        "torch": torch,
        "torch.distributed": distributed,
        "torch.distributed.checkpoint": checkpoint,
        "s3torchconnector": connector,
        "s3torchconnector.dcp": connector_dcp,
    }
