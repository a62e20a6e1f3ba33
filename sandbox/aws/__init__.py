"""The sandbox's in-memory AWS: moto built from template.yaml, with the real handlers in-process (stack.py)."""

from sandbox.aws.stack import FAKE_CREDENTIALS, REGION, RETRY_BACKOFF, ApiCalls, SandboxAWS, load_handler

__all__ = ["FAKE_CREDENTIALS", "REGION", "RETRY_BACKOFF", "ApiCalls", "SandboxAWS", "load_handler"]
