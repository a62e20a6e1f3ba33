"""Check Deployment: what the preflight cannot see from outside the stack's functions.

* the SDK the functions really run with (the layer's, unless the layer did not take), and what of
  the calls and fields the code needs it lacks;
* each running job's checkpoints, read with the pipeline's S3 permissions (this function's role has
  Find Newest Checkpoint's S3 statements: tests/contract/test_template.py keeps them equal) and the
  same discovery, so "readable" means readable to the recovery, not to the operator's credentials.

Read-only: it lists and reads objects, never writes.
"""

from __future__ import annotations

import platform
from typing import TYPE_CHECKING

import boto3
import botocore

from hyperpod_recovery import __version__
from hyperpod_recovery.domain.checkpoints.discovery import find_newest_verified
from hyperpod_recovery.errors import CheckpointStoreUnavailable, CheckpointUnreadable
from hyperpod_recovery.models.preflight import CheckDeploymentInput, CheckpointProbe, DeploymentReport, SdkReport
from hyperpod_recovery.sdk_contract import MINIMUM_BOTOCORE, missing_in_installed_sdk

if TYPE_CHECKING:
    from hyperpod_recovery.ports import CheckpointReader


def sdk_report() -> SdkReport:
    return SdkReport(
        python=platform.python_version(),
        boto3=boto3.__version__,
        botocore=botocore.__version__,
        minimum_botocore=MINIMUM_BOTOCORE,
        missing=missing_in_installed_sdk(),
        package_version=__version__,
    )


def probe_checkpoints(step: CheckDeploymentInput, *, reader: CheckpointReader) -> list[CheckpointProbe]:
    probes = []
    for job in step.jobs:
        probe = CheckpointProbe(job_id=job.job_id, name=job.name, checkpoint_uri=job.checkpoint_uri, readable=False)
        if not job.checkpoint_uri:
            probe.detail = "no checkpoint location in the job's comment or environment"
            probes.append(probe)
            continue
        try:
            discovery = find_newest_verified(reader, job.checkpoint_uri, job=job.name or None)
        except (CheckpointUnreadable, CheckpointStoreUnavailable, ValueError) as exc:
            probe.detail = str(exc)[:1024]
            probe.store_unavailable = isinstance(exc, CheckpointStoreUnavailable)
            probes.append(probe)
            continue
        probe.readable = True
        if discovery.checkpoint is not None:
            probe.step = discovery.checkpoint.step
            probe.detail = f"newest verified: {discovery.checkpoint.uri}"
        else:
            rejected = f" (rejected: {'; '.join(discovery.rejected[:3])})" if discovery.rejected else ""
            probe.detail = f"readable, but no checkpoint verifies yet{rejected}"[:1024]
        probes.append(probe)
    return probes


def check_deployment(step: CheckDeploymentInput, *, reader: CheckpointReader) -> DeploymentReport:
    return DeploymentReport(sdk=sdk_report(), checkpoints=probe_checkpoints(step, reader=reader))
