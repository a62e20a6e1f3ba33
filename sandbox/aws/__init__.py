"""The sandbox's in-memory AWS: moto built from template.yaml, with the real handlers in-process.

stack.py: SandboxAWS, the world a drill runs in (and what is patched, and why); patches.py: moto
and botocore as a drill needs them; stepfunctions.py: the Step Functions interpreter on the virtual
clock; lambdas.py: a function's handler, its context and its calls counted; once.py: what moto
would redo for every drill, done once per process; names.py: the names they share."""

from sandbox.aws.lambdas import ApiCalls, load_handler
from sandbox.aws.names import FAKE_CREDENTIALS, REGION, RETRY_BACKOFF
from sandbox.aws.stack import SandboxAWS

__all__ = ["FAKE_CREDENTIALS", "REGION", "RETRY_BACKOFF", "ApiCalls", "SandboxAWS", "load_handler"]
