"""The Kubernetes side of an EKS-orchestrated HyperPod cluster in a drill.

The drill's functions use the real Kubernetes adapter (adapters/kubernetes.py): a token minted from
the sandbox's credentials, the endpoint and CA read from EKS (moto's DescribeCluster, pointed here),
HTTPS to a local API server with its own CA. That server serves the schema-checked in-memory API
server (sandbox/kube/ FakeKube), kept in step with the HyperPod double (sandbox/hyperpod.py) at the
caller's virtual time, the way HyperPod keeps a real cluster's Node objects:

* each instance HyperPod shows Running has a Node ``hyperpod-<instance id>`` (or, on a scenario whose
  cluster.kubernetes.node_names is ``ip``, the instance's private DNS name, as older clusters named
  them), whose providerID is HyperPod's form naming the cluster and the instance (a replacement's
  appears when HyperPod shows it Running: ASSUMPTION, HyperPod's docs do not say when kubelet registers);
* Ready while its host agent answers (the double's slurmd timeline stands for the kubelet), with a
  new boot id after each boot;
* HyperPod's health label and taint: UnschedulablePendingReplacement on a node a health event
  reported, and on a replacement the scenario says comes back sick; Schedulable otherwise;
* a replaced instance's Node goes with it, its pods too (pod garbage collection).
Our marks (cordon, taint, annotations) are left as the pipeline wrote them: HyperPod reconciles
only what it declares (ASSUMPTION, hyperpod-eks.md §8).

Jobs: each scenario job is a PyTorchJob (or HyperPodPyTorchJob) with one pod per node.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import json
import ssl
import threading
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack, nullcontext
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from hyperpod_recovery.domain.jobs.eks_jobs import (
    CHECKPOINT_ANNOTATION,
    ELASTIC_ANNOTATION,
    JOB_NAME_ANNOTATION,
    RESUBMITTED_FROM_ANNOTATION,
)
from hyperpod_recovery.errors import KubeAccessDenied, KubeConflict, KubeThrottled, KubeUnavailable
from hyperpod_recovery.models.kubernetes import HEALTH_STATUS_LABEL, KUEUE_QUEUE_LABEL, OPT_IN_ANNOTATION, node_name_for_instance
from hyperpod_recovery.models.progress import PROGRESS_TABLE_ENV
from sandbox.hyperpod import ACCOUNT, HyperPodDouble
from sandbox.hyperpod_nodes import SimNode
from sandbox.kube import HYPERPOD_TAINT_KEY, FakeKube, _controller_uid, _name_order, serve
from sandbox.kube.scheduling import gpus_of
from sandbox.planted import SECRET_LOG
from sandbox.scenario import Scenario, expand_range

PENDING_REPLACEMENT = "UnschedulablePendingReplacement"
# settle's bound: each round starts the pods due next (a pod started may free nothing: one or two suffice)
SETTLE_ROUNDS = 8


def tls_material(directory: Path) -> tuple[str, ssl.SSLContext]:
    """A CA, and a certificate for 127.0.0.1 it signed: (the CA in PEM, the server's TLS context)."""
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubernetes")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        # (Python 3.13 verifies strictly: an issued certificate must name its issuer's key)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    (directory / "server.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (directory / "server.key").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(directory / "server.pem", directory / "server.key")
    return ca.public_bytes(serialization.Encoding.PEM).decode(), context


class KubeApiServer:
    """FakeKube over HTTPS on 127.0.0.1 (a thread): what the real adapter talks to in a drill.
    ``before``: called before each request (the simulated cluster catches up with the drill's time)."""

    def __init__(
        self,
        fake: FakeKube,
        directory: Path,
        before: Callable[[], None] | None = None,
        scope: Callable[[], AbstractContextManager[Any]] = nullcontext,
    ) -> None:
        self.fake = fake
        self.ca_pem, context = tls_material(directory)
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                if server.drop_next > 0:  # (a test's dropped connection: no answer at all)
                    server.drop_next -= 1
                    self.close_connection = True
                    return
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"null")
                if not str(self.headers.get("Authorization", "")).startswith("Bearer k8s-aws-v1."):
                    status, answer = 401, {"kind": "Status", "reason": "Unauthorized", "code": 401}
                else:
                    # (on the caller's virtual time: the request is served on this server's thread)
                    with server.lock, scope():
                        if before is not None:
                            before()
                        status, answer = serve(fake, self.command, parts.path, dict(parse_qsl(parts.query)), body)
                text = isinstance(answer, str)  # (a log: text/plain, as the API server sends it)
                data = answer.encode() if text else json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain" if text else "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_PATCH = do_POST = _answer

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.lock = threading.RLock()
        self.drop_next = 0  # requests to answer with a closed connection (tests of the client's retry)
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="kube-apiserver", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


# A hung job's pods' logs (the drills' hang faults): steps, then where each rank stopped.
TRAINING_LOG = "".join(
    f"[rank{{rank}}] step {step} loss {1.9 - step / 10_000:.4f} lr 3.0e-04 tokens/s 412553\n" for step in range(2046, 2051)
)
COLLECTIVE_LOG = "[rank{rank}] waiting in all_reduce (ProcessGroupNCCL, SeqNum=88123, OpType=ALLREDUCE, NumelIn=262144000)\n"
DATA_LOADER_LOG = "[rank{rank}] DataLoader worker 3: still reading /fsx/data/shard-00731.bin after 240 s\n"


class SimulatedEks:
    """The EKS cluster of a drill: the API server, HyperPod's hand on its nodes, and the jobs."""

    def __init__(
        self,
        scenario: Scenario,
        double: HyperPodDouble,
        epoch: datetime,
        directory: Path,
        scope: Callable[[], AbstractContextManager[Any]] = nullcontext,
    ) -> None:
        """``scope``: puts the server's thread on the virtual timeline of the Lambda calling it."""
        self.scenario = scenario
        self.double = double
        self.epoch = epoch
        self.name = f"{scenario.cluster.name}-eks"  # the EKS cluster the double's DescribeCluster names
        self.reported: dict[str, float] = {}  # instance id -> when a health event reported it
        self._synced = -86_400.0
        self.settled_at: float | None = None  # (settle)
        cluster = scenario.cluster.kubernetes
        self.kube = FakeKube(
            now=lambda: self.epoch + timedelta(seconds=self._synced),
            epoch=epoch,
            kueue=cluster.kueue,
            kueue_versions=tuple(cluster.kueue_versions),
            suspend_field=cluster.training_operator != "1.6",
            scheduler=cluster.scheduler == "running",
            cluster_id=double.cluster_id,
        )
        self._boots: dict[str, float] = {}  # instance id -> the boot its Node shows
        self._instance_of: dict[str, str] = {}  # Node name -> its instance (whatever the cluster names nodes by)
        self._stack = ExitStack()
        self.server = KubeApiServer(self.kube, directory, before=self.sync, scope=scope)
        self._stack.callback(self.server.close)

    def close(self) -> None:
        self._stack.close()

    def catch_up(self, moment: float) -> None:
        """A reader of the cluster at virtual second ``moment``, between the pipeline's requests (the
        fleet's training model): the pods due to start by then have (else a quiet cluster would show
        them starting for hours, until the next request)."""
        with self.lock:
            due = self.kube.next_start()
            if due is not None and (due - self.epoch).total_seconds() <= moment:
                self.kube.start_due_by(self.epoch + timedelta(seconds=moment))

    def settle(self, until: float | None = None) -> float | None:
        """After the drill's last step: the pods the scheduler bound run when their start is due, as on a
        real cluster, though no request of the pipeline comes to look (``until``: the cluster first brought
        to that virtual second, a fleet run's end). Sets and returns ``settled_at``, the virtual second
        the last of them started (None: none was starting)."""
        with self.lock:
            if until is not None:
                self.sync(until)
                self.kube.tick()
            for _ in range(SETTLE_ROUNDS):
                due = self.kube.next_start()
                if due is None:
                    break
                self._synced = max(self._synced, (due - self.epoch).total_seconds())
                self.sync()
                self.kube.tick()
                self.settled_at = self._synced
        return self.settled_at

    @property
    def lock(self) -> Any:
        """Held while the fake cluster is read or changed: the API server's thread serves the pipeline's
        requests from the same objects (a request its client gave up on may still be running)."""
        return self.server.lock

    def node_name(self, instance_id: str) -> str:
        """The Kubernetes node name of an instance: hyperpod-<instance id>, or (cluster.kubernetes.node_names
        ip) the instance's private DNS name, as older HyperPod clusters named their nodes."""
        if self.scenario.cluster.kubernetes.node_names == "hyperpod":
            return node_name_for_instance(instance_id)
        with self.double._lock:
            return next(n.hostname for n in self.double.nodes if n.node_id == instance_id)

    def node_of(self, ref: str, t: float = 0) -> str:
        """The Kubernetes node name of a scenario node (``workers:7``) at ``t``."""
        return self.node_name(self.double.current(ref, t=t).node_id)

    # --- the drill's cluster ---------------------------------------------------------------------
    def populate(self, progress_table: str | None = None) -> None:
        """``progress_table``: the stack's, in the pod template of a job whose owner opted in to
        progress monitoring (jobs.*.progress.opted_in), with the downward API's variables that name
        its job and node to the reporter (docs/progress.md)."""
        self.sync()
        for ref in self.scenario.behaviour.cordoned_before:
            for group, index in expand_range(ref):
                name = self.node_of(f"{group}:{index}")
                self.kube.patch_node(name, [{"op": "add", "path": "/spec/unschedulable", "value": True}])  # kubectl cordon
        types = {g.name: g.instance_type for g in self.scenario.cluster.instance_groups}
        for job in self.scenario.jobs:
            spec = job.kubernetes
            nodes = [self.node_of(f"{g}:{i}") for g, i in expand_range(job.nodes)]
            annotations = {CHECKPOINT_ANNOTATION: job.checkpoint_uri} if job.checkpoint_uri else {}
            if spec.recover:
                annotations[OPT_IN_ANNOTATION] = "true"
            if job.auto_resume:
                annotations["sagemaker.amazonaws.com/enable-job-auto-resume"] = "true"
            if spec.elastic is not None:
                annotations[ELASTIC_ANNOTATION] = spec.elastic
            labels = {KUEUE_QUEUE_LABEL: spec.queue} if spec.queue else None
            env = {PROGRESS_TABLE_ENV: progress_table} if progress_table and job.progress is not None and job.progress.opted_in else None
            self.kube.add_job(
                spec.kind,
                spec.namespace,
                job.name,
                nodes=nodes,
                annotations=annotations,
                restart_policy=spec.restart_policy,
                labels=labels,
                env=env,
                elastic_policy=spec.elastic_policy.model_dump(exclude_none=True) if spec.elastic_policy is not None else None,
                grace_seconds=spec.termination_grace_seconds,
                # (a training pod asks for all its node's GPUs: one pod a node, as the job was placed)
                gpus=gpus_of(types[expand_range(job.nodes)[0][0]]),
            )
        self._made_by_tenants: set[str] = set()  # uids
        self._tenants_act()
        self.kube.calls.clear()
        self.inject_errors()

    def _tenants_act(self) -> None:
        """What tenants did before the drill (behaviour.kubernetes_impostors, kubernetes_bare_pods)."""
        behaviour = self.scenario.behaviour
        for job in self.scenario.jobs:
            spec = job.kubernetes
            victim = self.kube.jobs.get((spec.kind, spec.namespace, job.name))
            if job.id in behaviour.kubernetes_impostors and victim is not None:
                # <name>-r1, claiming to be our re-creation of the victim (and nothing runs of it yet)
                annotations = {
                    RESUBMITTED_FROM_ANNOTATION: victim["metadata"]["uid"],
                    JOB_NAME_ANNOTATION: job.name,
                    OPT_IN_ANNOTATION: "true",
                }
                self.kube.add_job(spec.kind, spec.namespace, f"{job.name}-r1", nodes=[], replicas=0, annotations=annotations)
                self._made_by_tenants.add(self.kube.jobs[(spec.kind, spec.namespace, f"{job.name}-r1")]["metadata"]["uid"])
            for bare in (b for b in behaviour.kubernetes_bare_pods if b.job == job.id):
                (group, index), *_ = expand_range(bare.node)
                node = self.node_of(f"{group}:{index}")
                labels = {"training.kubeflow.org/job-name": job.name, "training.kubeflow.org/replica-type": "worker"}
                self.kube.add_pod(spec.namespace, f"{job.name}-debug-copy", node, labels=labels)

    def inject_errors(self) -> None:
        """behaviour.kubernetes_errors: the next calls of each kind answered with that status."""
        for spec in self.scenario.behaviour.kubernetes_errors:
            verb, resource = spec.call.split(" ", 1)
            said = f"injected {spec.status} for {spec.call}"
            error = {403: KubeAccessDenied, 409: KubeConflict, 429: KubeThrottled, 503: KubeUnavailable}[spec.status](said)
            self.kube.faults.setdefault((verb, resource), []).extend([error] * spec.times)

    def jobs_at_end(self) -> list[dict[str, Any]]:
        """Every training job object, as the report lists them (who re-created which, which is suspended)."""
        listed = []
        for (kind, namespace, name), job in sorted(self.kube.jobs.items()):
            annotations = job["metadata"].get("annotations") or {}
            entry = {"kind": kind, "namespace": namespace, "name": name, "uid": job["metadata"]["uid"]}
            if job["metadata"]["uid"] in self._made_by_tenants:  # (by uid: an object of that name made later is another)
                # What its annotation claims is not a re-creation of ours: counted by no one as one.
                entry["made_by"] = "tenant"
                if annotations.get(RESUBMITTED_FROM_ANNOTATION):
                    entry["claims_resubmitted_from"] = annotations[RESUBMITTED_FROM_ANNOTATION]
            elif annotations.get(RESUBMITTED_FROM_ANNOTATION):
                entry["resubmitted_from"] = annotations[RESUBMITTED_FROM_ANNOTATION]
            if ((job.get("spec") or {}).get("runPolicy") or {}).get("suspend"):
                entry["suspended"] = True
            listed.append(entry)
        return listed

    def job_fails(self, job: Any, *, reason: str | None = None, exit_code: int | None = None) -> None:
        """The scenario job's newest incarnation (itself, or its newest re-creation) is Failed now."""
        with self.lock:
            namespace = job.kubernetes.namespace
            lineage = [
                (k, n)
                for (k, ns, n), obj in self.kube.jobs.items()
                if ns == namespace and (n == job.name or (obj["metadata"].get("annotations") or {}).get(JOB_NAME_ANNOTATION) == job.name)
            ]
            kind, name = max(lineage, key=lambda kn: int(kn[1].rsplit("-r", 1)[1]) if kn[1] != job.name else 0)
            exit_code = 1 if exit_code is None else exit_code
            self.kube.job_fails(kind, namespace, name, reason=reason or "BackoffLimitExceeded", exit_code=exit_code)
            if job.id in self.scenario.behaviour.unreadable_failure_times:
                # (its operator wrote a time without a zone: that job's problem, never the poll's)
                condition = self.kube.jobs[(kind, namespace, name)]["status"]["conditions"][-1]
                condition["lastTransitionTime"] = condition["lastTransitionTime"].rstrip("Z")

    def job_running(self, job: Any) -> bool:
        """The scenario job's own object still runs (not suspended, stopped or ended): its reporters
        go on writing; else their last write said it ended."""
        with self.lock:
            obj = self.kube.jobs.get((job.kubernetes.kind, job.kubernetes.namespace, job.name))
            if obj is None or ((obj.get("spec") or {}).get("runPolicy") or {}).get("suspend"):
                return False
            conditions = [c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("status") == "True"]
            return bool(conditions) and conditions[-1].get("type") == "Running"

    def job_hangs(self, job: Any, fault: Any) -> None:
        """The job hangs: its pods still run; each rank's log ends waiting in an all-reduce, but on the
        node the fault names (the one that stopped first), where it ends in its data loader."""
        with self.lock:
            namespace = job.kubernetes.namespace
            odd = self.node_of(fault.node) if fault.node else None
            pods = [(ns, name) for ns, name in self.kube.pods if ns == namespace and name.startswith(f"{job.name}-worker-")]
            odd_log = SECRET_LOG if fault.stacks == "secret_in_log" else DATA_LOADER_LOG
            self._pods_hang(pods, odd if fault.stacks != "no_answer" else None, odd_log)

    def object_hangs(self, uid: str, odd_node: str) -> None:
        """The job object ``uid`` (any of a lineage: the fleet's copies) hangs, as ``job_hangs``: its pods'
        logs end waiting in an all-reduce, but on ``odd_node``, in its data loader."""
        with self.lock:
            self._pods_hang([key for key, pod in self.kube.pods.items() if _controller_uid(pod) == uid], odd_node)

    def _pods_hang(self, pods: list[tuple[str, str]], odd_node: str | None, odd_log: str = DATA_LOADER_LOG) -> None:
        for namespace, name in sorted(pods):
            pod = self.kube.pods[(namespace, name)]
            rank = max(0, _name_order(name)[1])
            stuck = odd_log if odd_node is not None and pod["spec"].get("nodeName") == odd_node else COLLECTIVE_LOG
            self.kube.set_pod_log(namespace, name, TRAINING_LOG.format(rank=rank) + stuck.format(rank=rank))

    def report_unhealthy(self, instance_id: str, at: float) -> None:
        """A health event for the instance: HyperPod's health agent labels and taints its node too."""
        self.reported.setdefault(instance_id, at)

    def job_uid(self, name: str, namespace: str) -> str | None:
        for (_, ns, job_name), job in self.kube.jobs.items():
            if (ns, job_name) == (namespace, name):
                return str(job["metadata"]["uid"])
        return None

    # --- HyperPod keeping the Node objects -------------------------------------------------------
    def sync(self, at: float | None = None) -> None:
        """Bring the Node objects to what HyperPod shows at the caller's time, or ``at`` when later (never
        backwards: the API server has one present, the drill's timelines each their own)."""
        with self.lock:
            t = max(self.double.now(), self._synced, at if at is not None else self._synced)  # (the caller's time)
            with self.double._lock:
                moments = sorted({m for n in self.double.nodes for m in self._moments(n) if self._synced < m < t})
            # (the cluster passes through each moment HyperPod changed a node since: a pod waiting for a
            # node is bound when one takes it, not when a request next looks)
            for moment in moments:
                self._sync_at(moment)
                self.kube.tick()
            self._sync_at(t)

    def _moments(self, node: SimNode) -> list[float]:
        """When HyperPod changed what the node's Node object shows: made, removed, a status, its host
        agent answering or not, a boot, a health event."""
        found = [node.created_at, *(m for m, _ in node.transitions), *(m for m, _ in node.slurmd), *(m for m, _ in node.boots)]
        reported = self.reported.get(node.node_id)
        return [*found, *([node.removed_at] if node.removed_at is not None else []), *([reported] if reported is not None else [])]

    def _sync_at(self, t: float) -> None:
        """The Node objects as HyperPod shows them at ``t``."""
        self._synced = t
        with self.double._lock:
            instances = {n.node_id: n for n in self.double.nodes if n.exists_at(t)}
        for name in list(self.kube.nodes):
            if self._instance_of.get(name) not in instances:
                self.kube.hyperpod_removes(name)
        for instance, node in instances.items():
            name = self.node_name(instance)
            running = node.status_at(t) == "Running" or any(at <= t for at, _ in node.boots)
            if name not in self.kube.nodes:
                if not running:
                    continue
                gpus = gpus_of(node.instance_type)
                self.kube.add_node(name, instance_id=instance, group=node.group, boot_id=self._boot_id(node, t), gpus=gpus)
                self._instance_of[name] = instance
                self._boots[instance] = self._last_boot(node, t)
            self._keep(name, node, t)

    def _keep(self, name: str, node: SimNode, t: float) -> None:
        answering = self._answering(node, t)
        boot = self._last_boot(node, t)
        ready = next(c for c in self.kube.nodes[name]["status"]["conditions"] if c["type"] == "Ready")["status"] == "True"
        if boot != self._boots.get(node.node_id) and answering:
            self._boots[node.node_id] = boot
            self.kube.hyperpod_reboots(name, healthy=False, boot_id=self._boot_id(node, t))  # a new boot id, Ready since now
        elif answering and not ready:
            self.kube.hyperpod_goes_ready(name)
        elif ready and not answering:
            self.kube.hyperpod_goes_not_ready(name)
        status = PENDING_REPLACEMENT if self._sick(node, t) else "Schedulable"
        if self.kube.nodes[name]["metadata"]["labels"].get(HEALTH_STATUS_LABEL) != status:
            if status == "Schedulable":
                self._mark_healthy(name)
            else:
                self.kube.hyperpod_marks_unhealthy(name, status)

    def _mark_healthy(self, name: str) -> None:
        node = json.loads(json.dumps(self.kube.nodes[name]))
        node["metadata"]["labels"][HEALTH_STATUS_LABEL] = "Schedulable"
        taints = [t for t in node["spec"].get("taints", []) if t.get("key") != HYPERPOD_TAINT_KEY]
        if taints:
            node["spec"]["taints"] = taints
        else:
            node["spec"].pop("taints", None)
        self.kube._store_node(node)

    def _sick(self, node: SimNode, t: float) -> bool:
        """Reported by a health event and not booted since (a reboot that helped clears HyperPod's
        label), or a replacement the scenario says comes back sick."""
        reported_at = self.reported.get(node.node_id)
        reported = reported_at is not None and not any(reported_at < at <= t for at, _ in node.boots)
        unhealthy_replacement = node.generation > 0 and self.double.unhealthy_host(node.hostname.split(".", 1)[0])
        return reported or unhealthy_replacement

    @staticmethod
    def _answering(node: SimNode, t: float) -> bool:
        states = [up for at, up in sorted(node.slurmd) if at <= t]
        return bool(states) and states[-1]

    @staticmethod
    def _last_boot(node: SimNode, t: float) -> float:
        registered = [boot for at, boot in node.boots if at <= t]
        return max(registered) if registered else node.created_at

    def _boot_id(self, node: SimNode, t: float) -> str:
        return str(uuid.uuid5(uuid.NAMESPACE_OID, f"{node.node_id}/{self._last_boot(node, t)}"))

    def ca_data(self) -> str:
        return base64.b64encode(self.server.ca_pem.encode()).decode()


def point_eks_at(eks: Any, cluster: SimulatedEks) -> None:
    """The EKS cluster in moto, its DescribeCluster answering with the local API server and its CA
    (moto makes up both; the adapter reads them as it reads EKS's). A stack whose EksClusterName names
    another cluster (settings.eks_cluster_name) finds that one in the account too, answering from the
    same API server: what such a stack would reach, if nothing checked."""
    from moto.eks.models import eks_backends

    names = dict.fromkeys([cluster.name, cluster.scenario.settings.eks_cluster_name or cluster.name])
    for name in names:
        eks.create_cluster(
            name=name,
            roleArn=f"arn:aws:iam::{ACCOUNT}:role/eks-cluster",
            resourcesVpcConfig={"subnetIds": [], "endpointPublicAccess": True, "endpointPrivateAccess": False},
        )
        stored = eks_backends[ACCOUNT][eks.meta.region_name].clusters[name]
        stored.endpoint = cluster.server.url
        stored.certificate_authority = {"data": cluster.ca_data()}
