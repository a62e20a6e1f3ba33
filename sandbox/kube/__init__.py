"""The in-memory Kubernetes API server the EKS drills and contract tests use (api.py says what it
models): its API (api.py), the controllers that act after every write (controllers.py, kueue.py),
what reaches the cluster from outside the API (outside.py), the schemas every stored object is
checked against (schemas.py), its objects (objects.py) and its wire (wire.py: ``serve``)."""

from sandbox.kube.api import FakeKube
from sandbox.kube.objects import DNS1035_LABEL, HYPERPOD_TAINT_KEY, RESUBMITTED_FROM, _controller_uid, _name_order
from sandbox.kube.wire import serve

__all__ = ["DNS1035_LABEL", "HYPERPOD_TAINT_KEY", "RESUBMITTED_FROM", "FakeKube", "_controller_uid", "_name_order", "serve"]
