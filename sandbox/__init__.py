"""The local drill sandbox: the real state machine and handlers on an in-memory AWS.

See docs/sandbox.md. Entry point: ``python -m sandbox run [--scenario FILE]`` (``make drill``).
"""

import os
import sys
from pathlib import Path

# What template.yaml's Globals give every function; Powertools reads them when the package is
# first imported, before the sandbox has read the template (tests/contract checks they match).
os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "hyperpod-recovery")
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "HyperPodRecovery")

# The handlers import the shared package the Lambda layer ships; make it importable here too, with
# the training scripts' checkpoint library (training/), which the sandbox's jobs commit with.
_ROOT = Path(__file__).resolve().parent.parent
for _source_root in (str(_ROOT / "training"), str(_ROOT / "layers" / "recovery_core")):
    if _source_root not in sys.path:
        sys.path.insert(0, _source_root)
