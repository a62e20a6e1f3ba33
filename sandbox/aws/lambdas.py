"""The Lambda side of the sandbox: a function's handler loaded from functions/<name>/app.py, the
context it is given, and the calls it makes, counted (by the pipeline's part that made them, and
against its time)."""

from __future__ import annotations

import importlib.util
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sandbox.aws.names import ROOT, SERVICE_NAMES

_local = threading.local()


class ApiCalls:
    """Counts calls made by the pipeline: handlers, the state machine, the controller agent.

    The runner's own calls (creating resources, injecting events, reading results) happen on the
    main thread and are not counted unless wrapped in ``counting()``.
    """

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        # Lambda function logical id -> the (botocore service id, operation) pairs its handler called.
        self.by_function: dict[str, set[tuple[str, str]]] = {}

    @staticmethod
    def active() -> bool:
        default = threading.current_thread() is not threading.main_thread()
        return getattr(_local, "counting", default)

    @staticmethod
    @contextmanager
    def counting(enabled: bool = True) -> Iterator[None]:
        previous = getattr(_local, "counting", None)
        _local.counting = enabled
        try:
            yield
        finally:
            if previous is None:
                del _local.counting
            else:
                _local.counting = previous

    def record(self, service: str, action: str) -> None:
        with self._lock:
            self.counts[f"{SERVICE_NAMES.get(service, service)}.{action}"] += 1

    # --- which function made a call (the IAM contract test compares them with its policy) ---
    @contextmanager
    def inside(self, function: str) -> Iterator[None]:
        """Calls made in this block are ``function``'s (a Lambda handler running)."""
        previous = getattr(_local, "function", None)
        _local.function = function
        with self._lock:
            self.by_function.setdefault(function, set())  # it ran, with or without AWS calls
        try:
            yield
        finally:
            _local.function = previous

    def record_by_function(self, service: str, action: str) -> None:
        function = getattr(_local, "function", None)
        if function is not None:
            with self._lock:
                self.by_function.setdefault(function, set()).add((service, action))


# What each call a handler makes costs its function's time (ASSUMPTION: an in-region API call over a
# kept-alive connection, AWS's or the Kubernetes API's, about 30 ms): the remaining time a handler
# reads is its timeout less its calls so far. Nothing sleeps: the drill stays as fast and repeatable.
CALL_MILLIS = 30


def calls_made() -> int:
    """The calls this thread's handler made so far (every HTTP attempt, AWS's and the Kubernetes API's)."""
    return int(getattr(_local, "calls_made", 0))


SANDBOX_KUBE_READ_SECONDS = 120.0  # real seconds (see where it is patched in)


def _count_call() -> None:
    _local.calls_made = calls_made() + 1


class FakeContext:
    def __init__(self, function_name: str, function_arn: str, timeout_seconds: int = 30) -> None:
        self.function_name = function_name
        self.function_version = "$LATEST"
        self.invoked_function_arn = function_arn
        self.memory_limit_in_mb = 256
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{function_name}"
        self.log_stream_name = "sandbox"
        self._budget_ms = timeout_seconds * 1000
        self._calls_at_start = calls_made()

    def get_remaining_time_in_millis(self) -> int:
        return max(0, self._budget_ms - CALL_MILLIS * (calls_made() - self._calls_at_start))


def load_handler(code_uri: str) -> Callable[..., Any]:
    """Import functions/<name>/app.py under a unique module name (every function's file is app.py)."""
    path = ROOT / code_uri / "app.py"
    spec = importlib.util.spec_from_file_location(f"functions.{path.parent.name}.app", path)
    assert spec and spec.loader, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.lambda_handler  # type: ignore[no-any-return]
