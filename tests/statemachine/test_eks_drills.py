"""The EKS drills (events/drills/eks-*.json), each a test: the real state machines and handlers, the
real Kubernetes adapter over TLS to the schema-checked API server, and HyperPod's double labelling,
tainting and replacing the Kubernetes nodes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hyperpod_recovery.models.kubernetes import OUR_ANNOTATIONS, QUARANTINE_TAINT_KEY, node_name_for_instance
from sandbox.drills import check_drill
from sandbox.kube import FakeKube
from sandbox.runner import DrillRunner
from sandbox.scenario import load_scenario, with_changes
from sandbox.scenario_cluster import KubernetesErrorSpec
from tests.conftest import EVENTS
from tests.statemachine.conftest import only_incident


def _run(name: str, tmp_path: Path) -> tuple[dict[str, Any], DrillRunner]:
    runner = DrillRunner(load_scenario(EVENTS / "drills" / f"{name}.json"), log_path=tmp_path / f"{name}-lambda.log")
    return runner.run(), runner


def _kube(runner: DrillRunner) -> FakeKube:
    assert runner.eks is not None
    return runner.eks.kube


def _node(runner: DrillRunner, ref: str) -> str:
    return node_name_for_instance(runner.double.current(ref, t=0).node_id)


def _ours_on(node: dict[str, Any]) -> list[str]:
    annotations = node["metadata"].get("annotations") or {}
    return [k for k in OUR_ANNOTATIONS if k in annotations] + [
        t["key"] for t in node["spec"].get("taints", []) if t["key"] == QUARANTINE_TAINT_KEY
    ]


def test_eks_default_the_node_is_replaced_and_the_opted_in_job_re_created_from_the_newest_verified_step(tmp_path: Path) -> None:
    # Given one GPU node of a 16-node EKS group failing under an opted-in PyTorchJob
    report, runner = _run("eks-default", tmp_path)
    incident = only_incident(report)
    kube = _kube(runner)
    # Then the node was recovered and the job re-created once, from step 3000
    assert incident["outcome"] == "recovered"
    assert [(r["checkpoint_step"], r["checkpoint_uri"]) for r in incident["resubmissions"]] == [
        (3000, "s3://llm-train-checkpoints/llama-70b-pretrain/step-000003000/")
    ]
    new = kube.jobs[("PyTorchJob", "kubeflow", "llama-70b-pretrain-r1")]
    env = {e["name"]: e["value"] for e in new["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["env"]}
    assert env["HYPERPOD_RECOVERY_RESUME_STEP"] == "3000" and env["HYPERPOD_RECOVERY_RESUME_FROM"].endswith("/step-000003000/")
    # And the failed node's Node object went with its instance; its replacement is in service, unmarked
    (replacement,) = report["replacements"]
    assert _node(runner, "workers:7") not in kube.nodes
    new_node = kube.nodes[node_name_for_instance(replacement["new_node_id"])]
    assert not new_node["spec"].get("unschedulable") and _ours_on(new_node) == []
    # And the Kubernetes calls are counted by verb and resource, the way AWS calls are: each try of the
    # re-creation looks for its own copy (by its token), reads the job, asks whether Kueue is installed
    # (discovery: it is not), checks the name free, reads the job and its pods back; the first suspends
    # it, the tries that find its pods still Terminating stop there, and the last one creates the copy
    calls = report["kubernetes_calls"]
    tries = calls["list pytorchjobs"]
    assert tries > 1 and calls == {
        "create pytorchjobs": 1,
        "get nodes": calls["get nodes"],
        "get /apis/kueue.x-k8s.io": tries,
        "get pytorchjobs": 1 + 3 * tries,  # (and the cordon's read of the job)
        "list pods": 1 + tries,  # (and the cordon's list of the failed node's pods)
        "list pytorchjobs": tries,
        "patch nodes": 1,
        "patch pytorchjobs": 1,
    }
    assert _kube(runner).second_copies() == []
    assert report["api_calls"]["eks.DescribeCluster"] == 1  # the endpoint and CA, once per cold start


@pytest.mark.parametrize(("name", "who"), [("eks-training-operator", "HyperPod training operator"), ("eks-auto-resume", "job auto-resume")])
def test_a_job_someone_else_restarts_is_left_alone_never_restarted_twice(name: str, who: str, tmp_path: Path) -> None:
    report, runner = _run(name, tmp_path)
    incident = only_incident(report)
    assert incident["outcome"] == "recovered" and incident["resubmissions"] == []
    assert who in incident["summary"]
    assert not any(call.startswith(("create ", "patch pytorchjobs", "patch hyperpodpytorchjobs")) for call in report["kubernetes_calls"])
    assert len(_kube(runner).jobs) == 1


def test_eks_dry_run_reads_and_changes_nothing(tmp_path: Path) -> None:
    report, runner = _run("eks-dry-run", tmp_path)
    incident = only_incident(report)
    assert (
        incident["outcome"] == "dry_run"
        and "PyTorchJob kubeflow/llama-70b-pretrain would be re-created from step 3000" in incident["summary"]
    )
    assert sorted(report["kubernetes_calls"]) == ["get nodes", "get pytorchjobs", "list pods"]  # reads only
    assert all(not n["spec"].get("unschedulable") and _ours_on(n) == [] for n in _kube(runner).nodes.values())
    assert "sagemaker.BatchReplaceClusterNodes" not in report["api_calls"]


def test_eks_cap_touches_nothing_past_the_cap(tmp_path: Path) -> None:
    report, runner = _run("eks-cap", tmp_path)
    incident = only_incident(report)
    assert incident["outcome"] == "capped" and incident["error"] == "ClusterCapReached"
    assert report["kubernetes_calls"] == {}
    assert all(_ours_on(n) == [] and not n["spec"].get("unschedulable") for n in _kube(runner).nodes.values())


def test_eks_node_hyperpod_is_already_replacing_is_watched_not_fought(tmp_path: Path) -> None:
    report, _ = _run("eks-automatic-already-replacing", tmp_path)
    incident = only_incident(report)
    assert incident["outcome"] == "recovered" and "already being replaced by HyperPod" in incident["summary"]
    assert report["api_calls"]["sagemaker.BatchReplaceClusterNodes"] == 1  # asked once, told InstanceIdInUse, then waited


def test_eks_reboot_ladder_same_node_name_back_with_our_marks_removed(tmp_path: Path) -> None:
    report, runner = _run("eks-reboot-ladder", tmp_path)
    first, second = report["incidents"]
    kube = _kube(runner)
    # The node that came back from its reboot is the same Node, uncordoned, with nothing of ours left
    assert first["outcome"] == "recovered" and "back from reboot" in " ".join(e["detail"] for e in first["timeline"])
    rebooted = kube.nodes[_node(runner, "workers:7")]
    assert not rebooted["spec"].get("unschedulable") and _ours_on(rebooted) == []
    # The one that did not come back was replaced at the reboot deadline, under a new node name
    assert second["outcome"] == "recovered" and _node(runner, "workers:3") not in kube.nodes


def test_eks_a_cordon_someone_else_made_stays_and_only_our_marks_go(tmp_path: Path) -> None:
    report, runner = _run("eks-cordoned-before", tmp_path)
    incident = only_incident(report)
    node = _kube(runner).nodes[_node(runner, "workers:7")]
    assert incident["outcome"] == "recovered"
    assert node["spec"]["unschedulable"] is True and _ours_on(node) == []
    assert "left cordoned by someone else" in " ".join(e["detail"] for e in incident["timeline"])


def test_eks_job_failed_past_its_restarts_is_found_by_the_poller_and_re_created_once_after_the_backoff(tmp_path: Path) -> None:
    # Given an opted-in PyTorchJob (restartPolicy OnFailure) that Kubeflow gives up on, every node healthy
    report, _ = _run("eks-job-failed", tmp_path)
    incident = only_incident(report)
    # Then the poller started JobRecovery, which classified an application failure and re-created the job once
    assert (incident["workflow"], incident["outcome"]) == ("job", "recovered")
    assert "application failure" in incident["summary"] and [r["checkpoint_step"] for r in incident["resubmissions"]] == [3000]
    made = [j for j in report["kubernetes_jobs"] if "resubmitted_from" in j]
    assert [j["name"] for j in made] == ["llama-70b-pretrain-r1"]
    # (the failed job is left as it is: nothing of it runs any more, nothing to suspend)
    assert "patch pytorchjobs" not in report["kubernetes_calls"]
    assert report["api_calls"].get("sagemaker.BatchReplaceClusterNodes") is None


def test_eks_a_job_whose_containers_exit_93_is_never_re_created_and_a_human_is_told(tmp_path: Path) -> None:
    # Given an opted-in PyTorchJob whose containers exit 93, NVIDIA's launcher's do-not-requeue verdict
    report, _ = _run("eks-job-exit-93", tmp_path)
    incident = only_incident(report)
    # Then the poller carried the exit code, and JobRecovery escalated on it at once
    assert (incident["workflow"], incident["outcome"], incident["error"]) == ("job", "escalated", "DoNotRequeue")
    assert "PyTorchJob kubeflow/llama-70b-pretrain ended FAILED with exit code 93" in incident["cause"]
    # And no copy was made, no node touched
    assert not [j for j in report["kubernetes_jobs"] if "resubmitted_from" in j]
    assert not report["replacements"] and not report["reboots"]
    assert "create pytorchjobs" not in report["kubernetes_calls"] and "patch pytorchjobs" not in report["kubernetes_calls"]


def test_eks_job_failed_on_a_node_hyperpod_marked_recovers_that_node_then_re_creates_the_job_once(tmp_path: Path) -> None:
    # Given the same job failing because workers:7 went bad (HyperPod's health agent labelled it), and the poller ticking twice
    scenario = load_scenario(EVENTS / "drills" / "eks-job-failed.json")
    fault = scenario.faults[0].model_copy(update={"node": "workers:7", "repeat": 1})
    scenario = scenario.model_copy(update={"faults": [fault]})
    report = DrillRunner(scenario, log_path=tmp_path / "lambda.log").run()
    # Then one JobRecovery (the second poll names the same execution), node-caused, with its nested node recovery
    job, nodes = [i for i in report["incidents"] if i["workflow"] == "job"], [i for i in report["incidents"] if i["workflow"] == "node"]
    assert len(job) == 1 and len(nodes) == 1 and nodes[0]["id"] == job[0]["id"] + "-nodes"
    assert (job[0]["outcome"], nodes[0]["outcome"]) == ("recovered", "recovered") and "node" in job[0]["summary"]
    assert len(report["replacements"]) == 1
    assert [j["name"] for j in report["kubernetes_jobs"] if "resubmitted_from" in j] == ["llama-70b-pretrain-r1"]


def test_on_eks_a_slot_that_fails_again_after_its_replacement_is_a_repeat_offender(tmp_path: Path) -> None:
    # Given workers:7 failing, replaced (its Kubernetes node has a new name), and its replacement failing again
    scenario = load_scenario(EVENTS / "drills" / "eks-default.json")
    second = scenario.faults[0].model_copy(update={"at": 7200})
    settings = scenario.settings.model_copy(
        update={"repeat_offender": scenario.settings.repeat_offender.model_copy(update={"max_recoveries": 1})}
    )
    scenario = scenario.model_copy(update={"faults": [scenario.faults[0], second], "settings": settings})
    report = DrillRunner(scenario, log_path=tmp_path / "lambda.log").run()
    first, again = report["incidents"]
    # Then the second is the same slot, under its new name: a human decides, nothing is replaced again
    assert first["outcome"] == "recovered"
    assert (again["outcome"], again["error"]) == ("escalated", "RepeatOffender")
    assert len(report["replacements"]) == 1


def test_eks_under_kueue_the_old_job_is_stopped_for_real_before_its_copy_runs(tmp_path: Path) -> None:
    # Given HyperPod task governance (Kueue) admitting an opted-in job from its team's queue, and one of its nodes failing
    report, runner = _run("eks-kueue", tmp_path)
    incident = only_incident(report)
    kube = _kube(runner)
    old, new = kube.jobs[("PyTorchJob", "kubeflow", "llama-70b-pretrain")], kube.jobs[("PyTorchJob", "kubeflow", "llama-70b-pretrain-r1")]
    # Then the job is re-created once, from the newest verified step, and Kueue admitted the copy: it runs
    assert incident["outcome"] == "recovered" and [r["checkpoint_step"] for r in incident["resubmissions"]] == [3000]
    assert [c.name for c in check_drill(runner.scenario, report) if not c.ok] == []
    assert kube._live(new) and new["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    # And the old one is stopped for real: its Workload inactive and evicted, the job suspended, no pod of it left
    # (at v1beta1, the only version this Kueue serves)
    (workload,) = [w for w in kube.workloads.values() if w["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == old["metadata"]["uid"]]
    assert kube.kueue_versions == ("v1beta1",) and workload["apiVersion"] == "kueue.x-k8s.io/v1beta1"
    assert workload["spec"]["active"] is False and old["spec"]["runPolicy"]["suspend"] is True and not kube._live(old)
    # And never were two copies of the job live at once
    assert kube.second_copies() == []
    # And it is the Workload that keeps it stopped: made active again, Kueue would un-suspend it at once
    kube.patch_workload(
        kube.kueue_versions[0], "kubeflow", workload["metadata"]["name"], [{"op": "replace", "path": "/spec/active", "value": True}]
    )
    assert kube.jobs[("PyTorchJob", "kubeflow", "llama-70b-pretrain")]["spec"]["runPolicy"]["suspend"] is False
    assert kube.second_copies() != []


def test_eks_under_a_kueue_serving_v1beta2_only_the_workload_is_stopped_there_and_the_job_re_created_once(tmp_path: Path) -> None:
    # Given Kueue serving its API at v1beta2 only (no v1beta1: a 404 there is no proof Kueue is absent), and a node failing
    report, runner = _run("eks-kueue-v1beta2", tmp_path)
    incident = only_incident(report)
    kube = _kube(runner)
    old = kube.jobs[("PyTorchJob", "kubeflow", "llama-70b-pretrain")]
    # Then the job is re-created once from the newest verified step, its scenario's expectations all met
    assert incident["outcome"] == "recovered" and [r["checkpoint_step"] for r in incident["resubmissions"]] == [3000]
    assert [c.name for c in check_drill(runner.scenario, report) if not c.ok] == []
    # And the old copy was stopped by its Workload, at v1beta2 (the version discovery found): inactive, evicted, suspended, gone
    (workload,) = [w for w in kube.workloads.values() if w["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == old["metadata"]["uid"]]
    assert workload["apiVersion"] == "kueue.x-k8s.io/v1beta2" and workload["spec"]["active"] is False
    assert old["spec"]["runPolicy"]["suspend"] is True and not kube._live(old)
    assert report["kubernetes_calls"]["get /apis/kueue.x-k8s.io"] >= 1 and report["kubernetes_calls"]["patch workloads"] == 1
    # And never were two copies of the job live at once
    assert kube.second_copies() == [] and report["second_copies"] == []


def test_eks_nodes_named_ip_with_hyperpods_provider_id_are_found_recovered_and_given_back(tmp_path: Path) -> None:
    # Given a cluster whose nodes are named ip-10-...compute.internal, each with HyperPod's providerID, and one failing
    report, runner = _run("eks-ip-node-names", tmp_path)
    incident = only_incident(report)
    kube = _kube(runner)
    assert all(name.startswith("ip-10-") for name in kube.nodes)
    assert all(n["spec"]["providerID"].startswith("aws:///usw2-az1/sagemaker/cluster/hyperpod-") for n in kube.nodes.values())
    # Then the failed node was found by its instance, cordoned, replaced (a new node under a new name), and the job re-created
    assert incident["outcome"] == "recovered" and [r["checkpoint_step"] for r in incident["resubmissions"]] == [3000]
    assert [c.name for c in check_drill(runner.scenario, report) if not c.ok] == []
    (replacement,) = report["replacements"]
    failed = runner.eks.node_name(replacement["old_node_id"])  # type: ignore[union-attr]
    new = runner.eks.node_name(replacement["new_node_id"])  # type: ignore[union-attr]
    assert failed not in kube.nodes and new.startswith("ip-10-") and new != failed
    # And the replacement's node is in service, nothing of ours left on it (Resume Nodes found it by its providerID)
    assert not kube.nodes[new]["spec"].get("unschedulable") and _ours_on(kube.nodes[new]) == []
    assert "nodes resumed" in [e["event"] for e in incident["timeline"]] and kube.second_copies() == []


def test_a_job_whose_pods_take_minutes_to_stop_is_stopped_at_once_and_re_created_after_the_rejoin_once(tmp_path: Path) -> None:
    # Given the opted-in job's pods taking up to 10 minutes to stop (terminationGracePeriodSeconds 600: it saves a
    # checkpoint on SIGTERM), longer than a re-creation waits, and a node failing under it
    report, runner = _run("eks-long-grace", tmp_path)
    incident = only_incident(report)
    kube = _kube(runner)
    assert [c.name for c in check_drill(runner.scenario, report) if not c.ok] == []
    # Then it was stopped at once, and re-created once, after the rejoin, from the newest verified step
    events = {e["event"]: e for e in incident["timeline"]}
    assert "stopped (suspended) at once" in events["job stopped"]["detail"]
    assert "its pods may take up to 600 s to stop" in events["checkpoint chosen"]["detail"]
    assert events["job stopped"]["at"] < events["node rejoined"]["at"] <= events["job resubmitted"]["at"]
    assert incident["outcome"] == "recovered" and [r["checkpoint_step"] for r in incident["resubmissions"]] == [3000]
    # And the old job was suspended once (by the stop; the re-creation found it stopped), and never were two copies live
    old = kube.jobs[("PyTorchJob", "kubeflow", "llama-70b-pretrain")]
    assert old["spec"]["runPolicy"]["suspend"] is True and report["kubernetes_calls"]["patch pytorchjobs"] == 1
    assert kube.second_copies() == [] and report["second_copies"] == []


def test_a_job_whose_pods_outlast_the_rejoin_too_is_escalated_stopped_and_never_copied(tmp_path: Path) -> None:
    # Given the same job with pods taking 15 minutes to stop: longer than the replacement (10 minutes) and the tries after it
    scenario = load_scenario(EVENTS / "drills" / "eks-long-grace.json")
    job = scenario.jobs[0]
    slow = job.model_copy(update={"kubernetes": job.kubernetes.model_copy(update={"termination_grace_seconds": 900})})
    runner = DrillRunner(scenario.model_copy(update={"jobs": [slow], "expect": None}), log_path=tmp_path / "lambda.log")
    report = runner.run()
    incident = only_incident(report)
    kube = _kube(runner)
    # Then it was stopped at once, its re-creation after the rejoin waited as long as the workflow tries it, and
    # the incident escalated saying what is true: stopped, its pods still Terminating until when, nothing created
    assert "job stopped" in [e["event"] for e in incident["timeline"]]
    assert (incident["outcome"], incident["error"]) == ("escalated", "ResubmitFailed")
    said = "PyTorchJob kubeflow/llama-70b-pretrain is stopped (suspended) and stays stopped, and no copy of it is made while anything of it"
    assert said in incident["cause"] and "all Terminating: their grace period ends at 2026-03-14T09:17:05Z" in incident["cause"]
    # And the old job is stopped, its pods still Terminating, and no copy was made: never two at once
    old = kube.jobs[("PyTorchJob", "kubeflow", "llama-70b-pretrain")]
    assert old["spec"]["runPolicy"]["suspend"] is True and list(kube.jobs) == [("PyTorchJob", "kubeflow", "llama-70b-pretrain")]
    assert kube.second_copies() == [] and report["second_copies"] == []


def test_a_stack_pointed_at_another_eks_cluster_never_touches_its_jobs(tmp_path: Path) -> None:
    # Given a stack whose EksClusterName names another EKS cluster of the account (its API answers too),
    # and an opted-in job failing on the cluster HyperPod guards
    scenario = load_scenario(EVENTS / "drills" / "eks-job-failed.json")
    scenario = scenario.model_copy(update={"settings": scenario.settings.model_copy(update={"eks_cluster_name": "other-eks"})})
    runner = DrillRunner(scenario, log_path=tmp_path / "lambda.log")
    report = runner.run()
    # Then the poller refuses before its first Kubernetes call: nothing read, nothing started, nothing written
    assert report["kubernetes_calls"] == {} and report["incidents"] == []
    assert runner.polls and all(poll.get("errorType") == "UnsupportedOrchestrator" for poll in runner.polls)


def _two_jobs_one_refused(status: int, times: int) -> Any:
    """eks-default with a second opted-in job on the failed node, whose re-creation is refused (the first create)."""
    scenario = load_scenario(EVENTS / "drills" / "eks-default.json")
    second = scenario.jobs[0].model_copy(
        update={
            "id": "1002",
            "name": "mistral-7b-sft",
            "nodes": "workers:6-7",
            "checkpoint_uri": "s3://llm-train-checkpoints/mistral-7b-sft",
        }
    )
    refused = KubernetesErrorSpec(call="create pytorchjobs", status=status, times=times)  # type: ignore[arg-type]
    behaviour = scenario.behaviour.model_copy(update={"kubernetes_errors": [refused]})
    return scenario.model_copy(update={"jobs": [scenario.jobs[0], second], "behaviour": behaviour})


@pytest.mark.parametrize(("status", "times"), [(403, 1), (503, 6)], ids=["rbac-403", "persistent-503"])
def test_a_refused_re_creation_beside_a_successful_one_escalates_and_keeps_both_results(status: int, times: int, tmp_path: Path) -> None:
    # Given two opted-in jobs on the failed node, the first re-creation refused (RBAC 403, or 503 past the retries)
    report = DrillRunner(_two_jobs_one_refused(status, times), log_path=tmp_path / "lambda.log").run()
    incident = only_incident(report)
    # Then the incident escalates ResubmitFailed, naming the job not re-created (its 36-character uid kept)
    assert (incident["outcome"], incident["error"]) == ("escalated", "ResubmitFailed")
    made = [j for j in report["kubernetes_jobs"] if "resubmitted_from" in j]
    refused = {j["uid"] for j in report["kubernetes_jobs"] if "resubmitted_from" not in j} - {j["resubmitted_from"] for j in made}
    assert len(made) == 1 and len(refused) == 1
    (refused_uid,) = refused
    refused_name = next(j["name"] for j in report["kubernetes_jobs"] if j["uid"] == refused_uid)
    assert f"PyTorchJob kubeflow/{refused_name} was not resubmitted" in incident["cause"]
    # (its failure parsed with its 36-character uid: a "resubmit failed" line names it)
    failed = [t["detail"] for t in incident["timeline"] if t["event"] == "resubmit failed"]
    assert len(failed) == 1 and failed[0].startswith(f"PyTorchJob kubeflow/{refused_name}: ")
    # And the successful one stays in the record, its claim completed, nothing left held
    assert [r["new_job_id"] for r in incident["resubmissions"]] == [made[0]["uid"]]
    assert report["ledger_at_end"]["open_claims"] == [] and report["ledger_at_end"]["incidents_holding"] == []


def test_a_tenants_impostor_is_refused_and_never_counted_as_a_re_creation(tmp_path: Path) -> None:
    # Given a tenant pre-created llama-70b-pretrain-r1 annotated as our re-creation of the job
    scenario = with_changes(load_scenario(EVENTS / "drills" / "eks-default.json"), {"behaviour": {"kubernetes_impostors": ["1001"]}})
    report = DrillRunner(scenario, log_path=tmp_path / "lambda.log").run()
    # Then the re-creation is refused (the name is taken by an object our ledger did not record)
    incident = only_incident(report)
    assert (incident["outcome"], incident["error"]) == ("escalated", "ResubmitFailed")
    # And the report counts no re-creation: the impostor is the tenant's, the victim runs, unsuspended
    jobs = {j["name"]: j for j in report["kubernetes_jobs"]}
    assert [j for j in jobs.values() if "resubmitted_from" in j] == []
    assert jobs["llama-70b-pretrain-r1"]["made_by"] == "tenant"
    assert jobs["llama-70b-pretrain-r1"]["claims_resubmitted_from"] == jobs["llama-70b-pretrain"]["uid"]
    assert "suspended" not in jobs["llama-70b-pretrain"]
    assert incident["resubmissions"] == [] and report["second_copies"] == []


def test_eks_no_spare_elastic_shrinks_the_pytorchjob_and_grows_it_back_one_copy_at_a_time(tmp_path: Path) -> None:
    # Given a PyTorchJob of 16 Workers on all 16 nodes, elasticPolicy minReplicas 12, losing one node
    report, runner = _run("eks-no-spare-elastic", tmp_path)
    kube = _kube(runner)
    incident = only_incident(report)
    assert incident["outcome"] == "recovered"
    # Then it was re-created at once with 15 Workers, told its size, and placed on the 15 healthy nodes
    r1 = kube.jobs[("PyTorchJob", "kubeflow", "llama-70b-pretrain-r1")]
    worker = r1["spec"]["pytorchReplicaSpecs"]["Worker"]
    env = {e["name"]: e["value"] for e in worker["template"]["spec"]["containers"][0]["env"]}
    assert worker["replicas"] == 15 and env["HYPERPOD_RECOVERY_RESUME_NODES"] == "15"
    assert r1["spec"]["elasticPolicy"] == {"minReplicas": 12, "maxReplicas": 16}
    # And, its replacement back, it grew back: the shrunk copy suspended, marked as this incident's
    # grow-back stopped it, and a 16-Worker copy running
    assert r1["spec"]["runPolicy"]["suspend"] is True
    assert r1["metadata"]["annotations"]["hyperpod-recovery.io/stopped-for"] == incident["id"]
    r2 = kube.jobs[("PyTorchJob", "kubeflow", "llama-70b-pretrain-r2")]
    assert r2["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 16
    (job,) = report["jobs"]
    assert [c["nodes"] for c in job["copies"]] == [15, 16] and job["pods"] == "16 Running"
    # And never were two copies live at once (each copy made only once the pods of the one before were
    # gone: their 30 s grace period), and the job was down for a minute or two, not the replacement's 10 minutes
    assert kube.second_copies() == [] and job["downtime_seconds"] <= 120
