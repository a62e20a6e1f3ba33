"""A job's id is a Slurm job id or, on EKS, its object's 36-character uid: every model field that
carries a job of either orchestrator holds both. (A field of 32 characters once dropped an EKS
resubmission's failure from the state, and the incident was recorded "recovered".)"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from typing import Annotated

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, TypeAdapter, ValidationError

import hyperpod_recovery.models as models_package

# Fields that name a Slurm job only (requeue is Slurm's; the preflight's check runs on Slurm).
SLURM_ONLY = {("RequeueJob", "job_id"), ("RequeueResult", "job_id"), ("RunningJob", "job_id"), ("CheckpointProbe", "job_id")}


def _job_id_fields() -> list[tuple[str, str, object]]:
    found = []
    for module_info in pkgutil.iter_modules(models_package.__path__):
        module = importlib.import_module(f"hyperpod_recovery.models.{module_info.name}")
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if not issubclass(cls, BaseModel) or cls.__module__ != module.__name__:
                continue
            for field_name, field in cls.model_fields.items():
                if field_name.endswith("job_id") and (name, field_name) not in SLURM_ONLY:
                    # (the field's constraints: its annotation's metadata, as the model validates it)
                    found.append((name, field_name, Annotated[field.annotation, *field.metadata] if field.metadata else field.annotation))
    return sorted(found, key=lambda f: (f[0], f[1]))


FIELDS = _job_id_fields()


def test_the_job_id_fields_are_found() -> None:
    assert {("ResubmitFailure", "job_id"), ("ResubmitResult", "new_job_id"), ("JobSpec", "job_id")} <= {(c, f) for c, f, _ in FIELDS}


@pytest.mark.parametrize(("model", "field", "annotation"), FIELDS, ids=[f"{c}.{f}" for c, f, _ in FIELDS])
@settings(max_examples=50, deadline=None)
@given(uid=st.uuids().map(str), slurm=st.integers(min_value=1, max_value=9_999_999_999).map(str))
def test_every_job_id_field_holds_a_slurm_job_id_and_a_kubernetes_uid(
    model: str, field: str, annotation: object, uid: str, slurm: str
) -> None:
    adapter: TypeAdapter[object] = TypeAdapter(annotation)
    for job_id in (uid, slurm):
        try:
            assert adapter.validate_python(job_id) == job_id
        except ValidationError as exc:
            pytest.fail(f"{model}.{field} refuses {job_id!r}: {exc}")
