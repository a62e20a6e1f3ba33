"""The Kubernetes API port under test, as tests/contract/test_kube_api.py and test_kube_api_wire.py share it:
the in-memory API server (sandbox/kube/ FakeKube) and the real adapter (adapters/kubernetes.py
KubernetesApi) talking HTTPS to a local server (pytest-httpserver, with sandbox/eks.py's CA, so the CA
handling is the production one) that serves the same FakeKube, and what reached that server."""

from __future__ import annotations

import json
import ssl
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, urlparse

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from hyperpod_recovery.adapters.eks import KubeEndpoint
from hyperpod_recovery.adapters.kubernetes import KubernetesApi
from sandbox.eks import tls_material
from sandbox.kube import FakeKube, serve

NODE = "hyperpod-i-0123456789abcdef0"


# --- a local TLS API server (sandbox/eks.py's CA and certificate, as the EKS drills use) -----------
_tls_material = tls_material


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, ssl.SSLContext]:
    return _tls_material(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def _running_server(tls: tuple[str, ssl.SSLContext]) -> Iterator[HTTPServer]:
    httpserver = HTTPServer(host="127.0.0.1", port=0, ssl_context=tls[1])
    httpserver.start()
    yield httpserver
    if httpserver.is_running():
        httpserver.stop()


@pytest.fixture
def server(_running_server: HTTPServer) -> Iterator[HTTPServer]:
    yield _running_server
    _running_server.clear()


class Wire:
    """What reached the server: each request's method, path, query, headers and body."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.status_override: list[tuple[int, dict[str, Any]]] = []

    def handler(self, fake: FakeKube):  # type: ignore[no-untyped-def]
        def handle(request: Request) -> Response:
            body = json.loads(request.get_data() or b"null")
            self.requests.append(
                {
                    "method": request.method,
                    "path": request.path,
                    "query": dict(parse_qsl(urlparse(request.url).query)),
                    "headers": dict(request.headers),
                    "body": body,
                }
            )
            if self.status_override:
                status, answer = self.status_override.pop(0)
            else:
                status, answer = serve(fake, request.method, request.path, dict(parse_qsl(urlparse(request.url).query)), body)
            if isinstance(answer, str):  # (a log: text/plain, as the API server sends it)
                return Response(answer, status=status, content_type="text/plain")
            return Response(json.dumps(answer), status=status, content_type="application/json")

        return handle


class Api:
    """One implementation of the port under test, with its FakeKube (the state behind it)."""

    def __init__(self, fake: FakeKube, port: Any, wire: Wire | None = None) -> None:
        self.fake, self.port, self.wire = fake, port, wire


def real_api(server: HTTPServer, ca_pem: str, fake: FakeKube, tokens: list[str] | None = None, clock: list[float] | None = None) -> Api:
    wire = Wire()
    server.expect_request(__import__("re").compile(".*")).respond_with_handler(wire.handler(fake))
    minted = tokens if tokens is not None else []
    ticks = clock if clock is not None else [0.0]

    def token(cluster: str) -> str:
        minted.append(cluster)
        return f"k8s-aws-v1.token-{len(minted)}"

    endpoint = KubeEndpoint(cluster_name="llm-eks", url=server.url_for("").rstrip("/"), ca_pem=ca_pem)
    return Api(fake, KubernetesApi(endpoint=lambda: endpoint, token=token, monotonic=lambda: ticks[0]), wire)


@pytest.fixture(params=["fake", "real"])
def api(request: pytest.FixtureRequest, tls: tuple[str, ssl.SSLContext]) -> Iterator[Api]:
    fake = FakeKube()
    if request.param == "fake":
        yield Api(fake, fake)
        return
    server = request.getfixturevalue("server")
    yield real_api(server, tls[0], fake)


def seeded(api: Api) -> Api:
    api.fake.add_hyperpod_node("i-0123456789abcdef0")
    api.fake.add_hyperpod_node("i-0123456789abcdef1", group="spares")
    api.fake.add_job("PyTorchJob", "kubeflow", "llama", nodes=[NODE])
    return api
