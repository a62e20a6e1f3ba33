"""Wheels by who runs them (issue 17): each ships an explicit list of modules, so that a training
script's or a controller node's ``pip install`` brings what it runs and none of the Lambda functions'
code (steps, runtime, the DynamoDB and SageMaker adapters, Powertools).

    python tools/build_dists.py contract [--out dist]      # hyperpod-recovery-contract: what the others share
    python tools/build_dists.py checkpoints [--out dist]   # hyperpod-recovery-checkpoints: training scripts
    python tools/build_dists.py agent [--out dist]         # hyperpod-recovery-agent: the controller node
    python tools/build_dists.py agent-bundle [--out dist]  # dist/agent-bundle/: what install_agent.sh installs

The wheel is written here (PEP 427: a zip of the modules and a .dist-info folder) rather than by a
build backend: the modules come from several source roots (the layer's, training/, agent/), the
project's venv has no setuptools, and the build must run offline. Install the wheel with
``pip install <wheel> <the contract wheel>`` (their other dependencies are boto3 and pydantic). The
contract (the package's ``__init__``, errors, commands, common fields, job events, the manifest) is a
wheel of its own that the other two require, so no file belongs to two distributions and both can
go into one environment (docs/decisions.md, 2026-11-26).

tests/contract/test_distributions.py builds each wheel, installs it alone, and checks that what it
imports is exactly what it ships.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import shutil
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Where the modules live in a checkout: the layer's package, the training scripts' library, the agent.
SOURCE_ROOTS = (ROOT / "layers" / "recovery_core", ROOT / "training", ROOT / "agent", ROOT / "cli")

# The contract: what the controller agent and the operator's tools may import from hyperpod_recovery.
# The commands, their replies and their dispatch, the job events the agent sends, the error taxonomy, and the
# vocabulary they are written in (common fields, Kubernetes names and marks, the manifest's
# job-name rule), the redactor the evidence model applies to every text, and the job nodes snapshot
# the agent writes to the ledger. Modules stay where they are for now (the layer's functions import
# them too); this list is what holds them apart.
CONTRACT_MODULES = frozenset(
    {
        "hyperpod_recovery",
        "hyperpod_recovery.redact",
        "hyperpod_recovery.errors",
        "hyperpod_recovery.models",
        "hyperpod_recovery.models.command_dispatch",
        "hyperpod_recovery.models.commands",
        "hyperpod_recovery.models.common",
        "hyperpod_recovery.models.job_spec",
        "hyperpod_recovery.models.elastic",
        "hyperpod_recovery.models.job_events",
        "hyperpod_recovery.models.job_nodes",
        "hyperpod_recovery.models.job_nodes_item",
        "hyperpod_recovery.models.kubernetes",
        "hyperpod_recovery.models.manifest",
        "hyperpod_recovery.models.progress",
    }
)

# The training scripts' checkpoint library and what it reads and writes with: the manifest model,
# discovery's verification (the writer's limits are the reader's), the S3 store and its port; and
# the progress reporter with the report's model (what the hang detector reads).
CHECKPOINT_MODULES = frozenset(
    {
        "hyperpod_recovery.checkpointing",
        "hyperpod_recovery.checkpointing.commit",
        "hyperpod_recovery.checkpointing.progress",
        "hyperpod_recovery.models.progress",
        "hyperpod_recovery",
        "hyperpod_recovery.errors",
        "hyperpod_recovery.ports",
        "hyperpod_recovery.sdk_contract",
        "hyperpod_recovery.models",
        "hyperpod_recovery.models.commands",
        "hyperpod_recovery.models.common",
        "hyperpod_recovery.models.job_spec",
        "hyperpod_recovery.models.elastic",
        "hyperpod_recovery.models.kubernetes",
        "hyperpod_recovery.models.manifest",
        "hyperpod_recovery.domain",
        "hyperpod_recovery.domain.checkpoints",
        "hyperpod_recovery.domain.checkpoints.discovery",
        "hyperpod_recovery.domain.checkpoints.resharding",
        "hyperpod_recovery.redact",
        "hyperpod_recovery.adapters",
        "hyperpod_recovery.adapters.aws",
        "hyperpod_recovery.adapters.checkpoints",
    }
)
DEPENDENCIES = ("boto3>=1.35", "pydantic>=2.7,<3")
# The controller agent's bundle (install_agent.sh): the CPython versions and the machine its
# dependencies' wheels are downloaded for. HyperPod's controller instance types are x86_64
# (ml.c5/m5/t3/...); pydantic-core is the one compiled wheel, manylinux2014 (glibc 2.17+).
BUNDLE_PYTHONS = ("3.11", "3.12", "3.13")
BUNDLE_PLATFORM = "manylinux2014_x86_64"
BUNDLE_MACHINE = "x86_64"
# The versions the Lambda functions run and the tests run with: the agent's bundle takes the same.
LAYER_PINS = ROOT / "layers" / "recovery_core" / "requirements.txt"


@dataclass(frozen=True)
class Distribution:
    name: str
    summary: str
    modules: frozenset[str]
    packages: tuple[str, ...] = ()  # shipped whole: every module under them
    scripts: dict[str, str] = field(default_factory=dict)
    needs: tuple[str, ...] = ()  # other distributions of this checkout (keys of DISTRIBUTIONS) it requires


DISTRIBUTIONS = {
    "contract": Distribution(
        name="hyperpod-recovery-contract",
        summary="What the HyperPod recovery pipeline's parts share: commands, job events, errors, the manifest model",
        modules=CONTRACT_MODULES,
    ),
    "checkpoints": Distribution(
        name="hyperpod-recovery-checkpoints",
        summary="Checkpoint manifests for training scripts the HyperPod recovery pipeline resumes (hyperpod_recovery.checkpointing)",
        modules=CHECKPOINT_MODULES - CONTRACT_MODULES,
        needs=("contract",),
    ),
    "agent": Distribution(
        name="hyperpod-recovery-agent",
        summary="The HyperPod recovery pipeline's controller agent (Slurm commands, job events)",
        modules=frozenset(),
        packages=("hyperpod_recovery_agent",),
        scripts={"hyperpod-recovery-agent": "hyperpod_recovery_agent.cli:main"},
        needs=("contract",),
    ),
}


def version() -> str:
    """The project's version (pyproject.toml): every wheel of one checkout carries the same."""
    return str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])


def source_of(module: str) -> Path:
    """The file of ``module`` in the checkout: ``a/b.py`` or ``a/b/__init__.py`` under a source root."""
    parts = module.split(".")
    for root in SOURCE_ROOTS:
        for candidate in (root.joinpath(*parts).with_suffix(".py"), root.joinpath(*parts, "__init__.py")):
            if candidate.is_file():
                return candidate
    raise ValueError(f"{module}: no such module under {', '.join(str(r.relative_to(ROOT)) for r in SOURCE_ROOTS)}")


def modules_of(dist: Distribution) -> set[str]:
    """Every module the wheel ships; refuses a module whose package would be missing from it."""
    names = set(dist.modules)
    for package in dist.packages:
        folder = source_of(package).parent
        for path in folder.rglob("*.py"):
            parts = path.relative_to(folder).with_suffix("").parts
            names.add(".".join((package, *parts[:-1])) if parts[-1] == "__init__" else ".".join((package, *parts)))
    provided = names | {module for kind in dist.needs for module in modules_of(DISTRIBUTIONS[kind])}
    orphans = sorted(name for name in names if "." in name and name.rpartition(".")[0] not in provided)
    if orphans:
        raise ValueError(f"{dist.name}: modules without their package: {', '.join(orphans)}")
    return names


def archive_path(module: str) -> str:
    source = source_of(module)
    return "/".join(module.split(".")) + ("/__init__.py" if source.name == "__init__.py" else ".py")


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def _metadata(dist: Distribution, release: str) -> str:
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {dist.name}",
        f"Version: {release}",
        f"Summary: {dist.summary}",
        "Requires-Python: >=3.11",
        *(f"Requires-Dist: {requirement}" for requirement in DEPENDENCIES),
        *(f"Requires-Dist: {DISTRIBUTIONS[kind].name}=={release}" for kind in dist.needs),
    ]
    return "\n".join(lines) + "\n"


def _write(archive: zipfile.ZipFile, files: Iterable[tuple[str, bytes]]) -> None:
    for path, data in files:
        # A fixed timestamp: the same checkout builds the same bytes.
        info = zipfile.ZipInfo(path, date_time=(1980, 1, 1, 0, 0, 0))
        info.external_attr = 0o644 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        archive.writestr(info, data)


def build(kind: str, out: Path) -> Path:
    """Write the ``kind`` wheel (a key of DISTRIBUTIONS) into ``out``; returns its path."""
    dist = DISTRIBUTIONS[kind]
    release = version()
    stem = f"{dist.name.replace('-', '_')}-{release}"
    info = f"{stem}.dist-info"
    files = [(archive_path(module), source_of(module).read_bytes()) for module in sorted(modules_of(dist))]
    files.append((f"{info}/METADATA", _metadata(dist, release).encode()))
    files.append((f"{info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: tools/build_dists.py\nRoot-Is-Purelib: true\nTag: py3-none-any\n"))
    if dist.scripts:
        entry_points = "[console_scripts]\n" + "".join(f"{name} = {target}\n" for name, target in sorted(dist.scripts.items()))
        files.append((f"{info}/entry_points.txt", entry_points.encode()))
    record = "".join(_record_line(path, data) + "\n" for path, data in files) + f"{info}/RECORD,,\n"
    files.append((f"{info}/RECORD", record.encode()))

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        _write(archive, files)
    out.mkdir(parents=True, exist_ok=True)
    wheel = out / f"{stem}-py3-none-any.whl"
    wheel.write_bytes(buffer.getvalue())
    return wheel


def _pin(wheel: Path) -> tuple[str, str]:
    """(normalized project name, version) of a wheel file (PEP 427: ``{name}-{version}(-{build})?-…``)."""
    name, version = wheel.name.split("-")[:2]
    return name.replace("_", "-").lower(), version


def bundle_agent(out: Path, pythons: Iterable[str] = BUNDLE_PYTHONS) -> tuple[Path, str]:
    """Write ``out/agent-bundle/``: the agent's and the contract's wheels, their dependencies' wheels
    for CPython ``pythons`` on x86_64 Linux, and ``requirements.txt`` pinning every one of them by
    version and sha256 (what install_agent.sh gives pip with --require-hashes --no-index). Returns
    the folder and the requirements file's own sha256, the one value the lifecycle script pins.

    The dependencies are downloaded once, here, by name (boto3, pydantic and what they require) at the
    versions the Lambda layer pins (its requirements.txt as constraints): the cluster never asks an
    index for anything, and our own names are never asked of one at all."""
    pythons = tuple(pythons)
    folder = out / "agent-bundle"
    shutil.rmtree(folder, ignore_errors=True)  # a wheel left from an older build would be pinned too
    folder.mkdir(parents=True)
    for kind in ("contract", "agent"):
        build(kind, folder)
    for python in pythons:
        target = ["--python-version", python, "--implementation", "cp", "--platform", BUNDLE_PLATFORM]
        subprocess.run(  # noqa: S603 - an argument list of our own, never a shell
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--dest",
                str(folder),
                "--only-binary=:all:",
                *target,
                "--constraint",
                str(LAYER_PINS),
                *DEPENDENCIES,
            ],
            check=True,
        )
    pins: dict[tuple[str, str], list[str]] = {}
    for wheel in sorted(folder.glob("*.whl")):
        pins.setdefault(_pin(wheel), []).append(hashlib.sha256(wheel.read_bytes()).hexdigest())
    names = [name for name, _ in pins]
    if len(names) != len(set(names)):
        twice = sorted({name for name in names if names.count(name) > 1})
        raise ValueError(f"the Pythons {', '.join(pythons)} resolved different versions of {', '.join(twice)}: bundle them apart")
    lines = [
        "# The controller agent's bundle, written by tools/build_dists.py (make dists): the agent, the contract",
        "# it requires, and their dependencies' wheels. install_agent.sh installs exactly these files:",
        "# pip --require-hashes --no-index --only-binary=:all: -r requirements.txt.",
        f"# python: {' '.join(pythons)}",
        f"# machine: {BUNDLE_MACHINE}",
    ]
    for (name, version), digests in sorted(pins.items()):
        lines.append(f"{name}=={version} " + " ".join(f"--hash=sha256:{digest}" for digest in sorted(digests)))
    requirements = folder / "requirements.txt"
    requirements.write_text("\n".join(lines) + "\n")
    return folder, hashlib.sha256(requirements.read_bytes()).hexdigest()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kinds", nargs="+", choices=[*sorted(DISTRIBUTIONS), "agent-bundle"])
    parser.add_argument("--out", type=Path, default=ROOT / "dist")
    parser.add_argument(
        "--python",
        action="append",
        help=f"agent-bundle: a CPython version the controller may run (repeat; default {' '.join(BUNDLE_PYTHONS)})",
    )
    args = parser.parse_args(argv)
    for kind in args.kinds:
        if kind == "agent-bundle":
            folder, digest = bundle_agent(args.out, args.python or BUNDLE_PYTHONS)
            print(f"{folder}/ ({len(list(folder.glob('*.whl')))} wheels, requirements.txt sha256 {digest})")
            print(f"  install_agent.sh <CommandQueueUrl> <cluster> <{folder.name}/ or its s3:// copy> {digest}")
            continue
        wheel = build(kind, args.out)
        with zipfile.ZipFile(wheel) as archive:
            count = sum(1 for name in archive.namelist() if name.endswith(".py"))
        print(f"{wheel} ({count} modules, {wheel.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
