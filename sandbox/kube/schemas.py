"""Every stored object checked against Kubernetes' own schema: kubernetes-validate's OpenAPI for the
core kinds, the CRDs' schemas (tests/kube_schemas) for the training jobs and Kueue's Workloads."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import kubernetes_validate.utils
from referencing import Registry, Resource

from hyperpod_recovery.models.kubernetes import (
    JOB_KINDS,
    KUEUE_GROUP,
    WORKLOAD_PLURAL,
)
from sandbox.kube.objects import (
    Invalid,
    _meta_probe,
    _pod_templates,
)

KUBERNETES_VERSION = "1.33"  # the newest minor the HyperPod EKS prerequisites list
SCHEMAS = Path(__file__).resolve().parents[2] / "tests" / "kube_schemas"


@functools.cache
def _strict_validator(kind: str, api_version: str, version: str) -> jsonschema.protocols.Validator:
    """kubernetes-validate's strict check of one kind (its utils.validate, step by step), with its
    schema files read once per kind rather than at every write (a storm writes thousands)."""
    utils = kubernetes_validate.utils
    newest = [v for v in utils.all_versions() if utils.major_minor(v) <= utils.major_minor(version)][-1]
    directory = f"v{newest}-local-strict"
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    schema = utils.schema_contents(f"kubernetes-json-schema/{directory}/{kind.lower()}-{group_version}.json", version)
    definitions = utils.schema_contents(f"kubernetes-json-schema/{directory}/_definitions.json", version)
    registry = Resource.from_contents(definitions) @ (Resource.from_contents(schema) @ Registry())
    return jsonschema.Draft202012Validator(schema, registry=registry)


class SchemaChecks:
    """Mixed into FakeKube: refuses (422 Invalid) an object its schema does not allow."""

    def _validate(self, obj: dict[str, Any]) -> None:
        try:
            _strict_validator(str(obj["kind"]), str(obj["apiVersion"]), self.version).validate(obj)
        except jsonschema.ValidationError as exc:
            where = "/".join(str(p) for p in exc.path)
            raise Invalid(f"{obj.get('kind')} {obj['metadata'].get('name')}: 422 Invalid at {where or '/'}: {exc.message}") from exc

    def _validate_job(self, job: dict[str, Any]) -> None:
        kind = job["kind"]
        schema = self._job_schema(kind)
        if schema is not None:
            errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(job), key=lambda e: list(e.path))
            if errors:
                where = "/".join(str(p) for p in errors[0].path)
                raise Invalid(f"{kind} {job['metadata'].get('name')}: 422 Invalid at {where or '/'}: {errors[0].message}")
        self._validate(_meta_probe(job))
        for index, template in enumerate(_pod_templates(job, kind)):
            self._validate({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": f"template-{index}"}, "template": template})

    def _validate_workload(self, workload: dict[str, Any]) -> None:
        """A Workload against Kueue's CRD schema at each version it is served at (tests/kube_schemas),
        its pod templates as PodTemplates."""
        for version in self.kueue_versions:
            schema = self._schema(f"Workload/{version}", WORKLOAD_PLURAL, KUEUE_GROUP, version)
            assert schema is not None
            served = self._served_as(workload, version)
            errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(served), key=lambda e: list(e.path))
            if errors:
                where = "/".join(str(p) for p in errors[0].path)
                name = workload["metadata"].get("name")
                raise Invalid(f"Workload {name} ({version}): 422 Invalid at {where or '/'}: {errors[0].message}")
        self._validate(_meta_probe(workload))
        for index, pod_set in enumerate(workload["spec"]["podSets"]):
            template = pod_set["template"]
            self._validate({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": f"template-{index}"}, "template": template})

    def _job_schema(self, kind: str) -> dict[str, Any] | None:
        # No CRD schema of HyperPodPyTorchJob is published (tests/kube_schemas/README.md): its pod
        # templates and metadata are still checked.
        info = JOB_KINDS[kind]
        return self._schema(kind, info.plural, info.group, info.version)

    def _schema(self, kind: str, plural: str, group: str, version: str) -> dict[str, Any] | None:
        if kind not in self._job_schemas:
            path = SCHEMAS / f"{plural[:-1]}-{group}-{version}.json"
            self._job_schemas[kind] = json.loads(path.read_text()) if path.exists() else {}
        return self._job_schemas[kind] or None
