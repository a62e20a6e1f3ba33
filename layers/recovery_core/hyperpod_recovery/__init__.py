"""hyperpod-recovery: the shared package shipped in the RecoveryCoreLayer.

Layout (see docs/architecture.md):
    models/    pydantic shapes: outside events, requests, controller commands, workflow payloads, records
    domain/    pure decisions (no boto3, no os.environ)
    steps/     one service function per workflow step: domain decisions + ports
    adapters/  one per outside system; SDK errors become errors.py classes

``hyperpod_recovery.checkpointing`` (the training scripts' library) lives outside the layer, in
``training/`` (docs/decisions.md, 2026-11-26): in a checkout the package spans both folders.
"""

from pkgutil import extend_path

# A no-op where the package is in one folder (the layer, an installed wheel); in a checkout it adds
# training/hyperpod_recovery/ when that folder's root is on sys.path (pytest's pythonpath).
__path__ = extend_path(__path__, __name__)

__version__ = "0.1.0"
