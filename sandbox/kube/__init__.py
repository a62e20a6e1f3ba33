"""The in-memory Kubernetes API server the EKS drills and contract tests use (api.py)."""

from sandbox.kube.api import DNS1035_LABEL, HYPERPOD_TAINT_KEY, RESUBMITTED_FROM, FakeKube, _controller_uid, _name_order, serve

__all__ = ["DNS1035_LABEL", "HYPERPOD_TAINT_KEY", "RESUBMITTED_FROM", "FakeKube", "_controller_uid", "_name_order", "serve"]
