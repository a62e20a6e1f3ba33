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

# The handlers import the shared package the Lambda layer ships; make it importable here too.
_LAYER = str(Path(__file__).resolve().parent.parent / "layers" / "recovery_core")
if _LAYER not in sys.path:
    sys.path.insert(0, _LAYER)
