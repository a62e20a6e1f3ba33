"""What EKS support costs a Lambda: layer size and cold start, against the Slurm-only layer.

* Layer size: the RecoveryCoreLayer's packages as installed (the distributions of
  layers/recovery_core/requirements.txt and their dependencies, read from this venv's RECORD files)
  plus our package, with and without the EKS modules. The Kubernetes adapter is ours over urllib3,
  which botocore already brings: the alternative, the ``kubernetes`` client, is measured the same
  way when ``--with-client`` can download it from PyPI (its wheel and dependencies, unpacked).
* Cold start: fresh interpreters (as bench/cold_import.py) import the Cordon Nodes handler and build
  its dependencies as a cold Lambda does (build_dependencies), with ORCHESTRATOR=slurm and =eks; and
  ``-X importtime`` gives the import time of the EKS modules themselves.

    python bench/eks_footprint.py [--samples 9] [--with-client]

Figures are this machine's (x86_64, Python of the venv); read them relative to each other.
"""

from __future__ import annotations

import argparse
import importlib.metadata as metadata
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYER = ROOT / "layers" / "recovery_core"
sys.path[:0] = [str(ROOT), str(LAYER)]

from tests.fakes import settings_env  # noqa: E402

PACKAGE = LAYER / "hyperpod_recovery"
EKS_MODULES = (
    "adapters/eks.py",
    "adapters/eks_token.py",
    "adapters/kubernetes.py",
    "adapters/eks_orchestrator/__init__.py",
    "adapters/eks_orchestrator/evidence.py",
    "adapters/eks_orchestrator/jobs.py",
    "adapters/eks_orchestrator/lookups.py",
    "adapters/eks_orchestrator/nodes.py",
    "domain/nodes/eks_nodes.py",
    "domain/jobs/eks_jobs.py",
    "models/kubernetes.py",
)
# The functions' environment as the tests give it (tests/fakes.py: one copy of what Settings reads).
ENV = {
    **settings_env(),
    "AWS_DEFAULT_REGION": "us-west-2",
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "POWERTOOLS_SERVICE_NAME": "hyperpod-recovery",
    "POWERTOOLS_METRICS_NAMESPACE": "HyperPodRecovery",
    "PATH": "/usr/bin:/bin",
}
PROBE = """
import sys, time
sys.path[:0] = [{code!r}, {layer!r}]
start = time.perf_counter()
import app
from hyperpod_recovery.config import get_settings
from hyperpod_recovery.runtime import build_dependencies
build_dependencies(get_settings())
print(time.perf_counter() - start)
"""


def _requirements() -> list[str]:
    names = []
    for line in (LAYER / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            names.append(re.split(r"[=<>\[ ]", line, maxsplit=1)[0])
    return names


def _closure(names: list[str]) -> set[str]:
    """The distributions ``names`` need, installed here, by their requirements (no extras)."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop().lower().replace("_", "-")
        if name in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        seen.add(name)
        for requirement in dist.requires or []:
            if "extra ==" in requirement:
                continue
            todo.append(re.split(r"[=<>!~;\[ (]", requirement, maxsplit=1)[0])
    return seen


def _installed_bytes(name: str) -> int:
    dist = metadata.distribution(name)
    total = 0
    for file in dist.files or []:
        path = Path(str(dist.locate_file(file)))
        if path.is_file() and "__pycache__" not in path.parts and not str(file).endswith(".dist-info/RECORD"):
            total += path.stat().st_size
    return total


def _ours(*, eks: bool) -> int:
    files = [p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts]
    return sum(p.stat().st_size for p in files if eks or str(p.relative_to(PACKAGE)) not in EKS_MODULES)


def _client_bytes() -> int | None:
    """The ``kubernetes`` client and what it needs beyond the layer, unpacked (None: PyPI unreachable)."""
    with tempfile.TemporaryDirectory() as target:
        run = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--target", target, "kubernetes"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if run.returncode != 0:
            return None
        layer = {n.lower().replace("_", "-") for n in _closure(_requirements())}
        total = 0
        for entry in Path(target).iterdir():
            name = entry.name.split("-")[0].lower().replace("_", "-")
            if name in layer or (entry.name.endswith(".dist-info") and entry.name.split("-")[0].lower().replace("_", "-") in layer):
                continue
            total += (
                sum(p.stat().st_size for p in entry.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
                if entry.is_dir()
                else entry.stat().st_size
            )
        return total


def _cold(orchestrator: str, samples: int) -> list[float]:
    env = dict(ENV, ORCHESTRATOR=orchestrator, EKS_CLUSTER_NAME="llm-eks" if orchestrator == "eks" else "")
    code = ROOT / "functions" / "cordon_nodes"
    times = []
    for _ in range(samples):
        out = subprocess.run(
            [sys.executable, "-c", PROBE.format(code=str(code), layer=str(LAYER))], capture_output=True, text=True, check=True, env=env
        )
        times.append(float(out.stdout.strip()) * 1000)
    return times


def _eks_import_ms() -> float:
    """The EKS modules' own import time (-X importtime's self time), in a cold interpreter."""
    code = ROOT / "functions" / "cordon_nodes"
    run = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import sys; sys.path[:0] = [{str(code)!r}, {str(LAYER)!r}]; import app"],
        capture_output=True,
        text=True,
        check=True,
        env=dict(ENV, ORCHESTRATOR="slurm"),
    )
    wanted = {"hyperpod_recovery." + m.removesuffix(".py").removesuffix("/__init__").replace("/", ".") for m in EKS_MODULES}
    total = 0
    for line in run.stderr.splitlines():
        parts = [p.strip() for p in line.removeprefix("import time:").split("|")]
        if len(parts) == 3 and parts[2] in wanted:
            total += int(parts[0])
    return total / 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=9)
    parser.add_argument("--with-client", action="store_true", help="also download the kubernetes client from PyPI and measure it")
    args = parser.parse_args()

    third_party = sum(_installed_bytes(n) for n in sorted(_closure(_requirements())))
    slurm_only, with_eks = third_party + _ours(eks=False), third_party + _ours(eks=True)
    print("RecoveryCoreLayer, unpacked (its distributions from this venv, and our package)")
    print(f"  Slurm-only layer         {slurm_only / 1e6:8.2f} MB")
    print(f"  with EKS (ours, urllib3) {with_eks / 1e6:8.2f} MB  (+{(with_eks - slurm_only) / 1e3:.1f} kB: {len(EKS_MODULES)} modules)")
    if args.with_client:
        client = _client_bytes()
        if client is None:
            print("  with the kubernetes client: not measured (PyPI not reachable)")
        else:
            print(f"  with the kubernetes client instead {(slurm_only + client) / 1e6:8.2f} MB  (+{client / 1e6:.1f} MB)")

    slurm, eks = _cold("slurm", args.samples), _cold("eks", args.samples)
    print(f"\ncold start of Cordon Nodes (import + build_dependencies), median of {args.samples}, Python {sys.version.split()[0]}")
    print(f"  ORCHESTRATOR=slurm {statistics.median(slurm):7.1f} ms (min {min(slurm):.1f}, max {max(slurm):.1f})")
    print(f"  ORCHESTRATOR=eks   {statistics.median(eks):7.1f} ms (min {min(eks):.1f}, max {max(eks):.1f})")
    print(f"  the EKS modules' own import time: {_eks_import_ms():.1f} ms (loaded by every function, -X importtime)")


if __name__ == "__main__":
    main()
