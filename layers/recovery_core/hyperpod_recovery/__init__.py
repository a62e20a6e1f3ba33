"""hyperpod-recovery: the shared package shipped in the RecoveryCoreLayer.

Layout (see docs/architecture.md):
    models/    pydantic shapes: outside events, requests, controller commands, workflow payloads, records
    domain/    pure decisions (no boto3, no os.environ)
    steps/     one service function per workflow step: domain decisions + ports
    adapters/  one per outside system; SDK errors become errors.py classes
"""

__version__ = "0.1.0"
