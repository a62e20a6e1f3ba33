"""A job on more nodes than a workflow carries the names of (MAX_JOB_NODES_CARRIED, 1,000): the agent
holds every name (a cordon counts the ones it takes, a grow-back the ones the copy keeps), and what
travels through the queue and the state is bounded. Found by the fleet drill: one 2,048-node job made
every cordon fail validation in the agent, and every node incident escalated."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from hyperpod_recovery.adapters.eks_orchestrator import EksOrchestrator
from hyperpod_recovery.domain.hangs.classify import classify_hang
from hyperpod_recovery.domain.jobs.job_failure import classify_failure, faulty_nodes
from hyperpod_recovery.domain.record.job_incident import MAX_RECORD_JOB_NODES, incident_facts
from hyperpod_recovery.errors import ControllerAgentError, JobNodesNotCarried
from hyperpod_recovery.models.commands import (
    MAX_NODES_ASKED,
    MAX_UNHEALTHY_ANSWERED,
    UNHEALTHY_REASON_KEPT,
    CaptureJobSpec,
    CommandEnvelope,
    CommandReply,
    CordonNodes,
    CordonResult,
    HangEvidenceResult,
    JobSpec,
    JobSpecResult,
    NodeStacks,
    NodeStates,
    NodeStatesResult,
    NodeStatus,
    carried,
    owner_tag,
    plainly_healthy,
)
from hyperpod_recovery.models.common import MAX_JOB_NODES_CARRIED
from hyperpod_recovery.models.hangs import MAX_SUSPECTS, MAX_VERDICT_NODES
from hyperpod_recovery.models.job_events import JobFailedDetail
from hyperpod_recovery.models.job_recovery import (
    CaptureJobSpecInput,
    CheckJobNodesInput,
    FailureClassification,
    FaultyNode,
    JobWorkflowState,
)
from hyperpod_recovery.models.kubernetes import OPT_IN_ANNOTATION
from hyperpod_recovery.models.requests import JobRecoveryRequest
from hyperpod_recovery.steps.capture_job_spec import capture_job_spec
from hyperpod_recovery.steps.check_job_nodes import check_job_nodes
from hyperpod_recovery_agent.executor import CommandExecutor
from hyperpod_recovery_agent.slurm_json import read_node
from sandbox.kube import FakeKube
from sandbox.slurm import SimulatedSlurm, SlurmJob
from tests.fakes import T0, FakeOrchestrator
from tests.unit.test_hang_classify import NAMES as NAMES_OF_VERDICT
from tests.unit.test_hang_classify import _classify, _setup
from tests.unit.test_hang_detection import report

NODES = [f"ip-10-2-{n // 256}-{n % 256}" for n in range(2048)]


def _slurm() -> SimulatedSlurm:
    slurm = SimulatedSlurm()
    for name in NODES:
        slurm.add_node(name)
    slurm.add_job(SlurmJob(job_id="1001", name="pretrain", nodes=NODES, state="RUNNING", checkpoint_uri="s3://ckpt/pretrain"))
    return slurm


def _execute(executor: CommandExecutor, command: object) -> object:
    envelope = CommandEnvelope.model_validate(
        {
            "command_id": "inc-1:c",
            "incident_id": "inc-1",
            "execution_name": "inc-1",
            "task_token": "t",
            "requested_at": T0,
            "command": command,
        }
    )
    reply = executor.execute(envelope)
    # (what the workflow receives: the reply as it crosses the queue)
    return CommandReply[type(reply.result)].model_validate_json(reply.model_dump_json()).result  # type: ignore[misc]


def _eks_job_on_more_nodes_than_carried() -> tuple[FakeKube, list[str], str]:
    """A PyTorchJob whose 1,001 pods run on 1,001 HyperPod nodes: the fake API, the nodes' names, its uid."""
    fake = FakeKube(now=lambda: T0)
    names = [f"hyperpod-i-0123456789ab{n:05x}" for n in range(MAX_JOB_NODES_CARRIED + 1)]
    for name in names:
        fake.add_hyperpod_node(name.removeprefix("hyperpod-"))
    fake.add_job("PyTorchJob", "kubeflow", "llama", nodes=names, annotations={OPT_IN_ANNOTATION: "true"})
    return fake, names, fake.jobs[("PyTorchJob", "kubeflow", "llama")]["metadata"]["uid"]


def test_a_cordon_on_a_2048_node_job_answers_the_job_without_its_names() -> None:
    # Given one job on 2,048 nodes, two of which fail
    executor = CommandExecutor(_slurm(), now=lambda: T0)
    # When the incident cordons them
    result = _execute(executor, CordonNodes(nodes=NODES[:2], reason=f"{owner_tag('inc-1')} fault"))
    # Then both are drained and the job is answered: its size, the nodes it loses, no names
    assert isinstance(result, CordonResult)
    (job,) = result.jobs
    assert (job.job_id, job.num_nodes, job.lost_nodes, job.nodes) == ("1001", 2048, 2, [])


def test_capture_job_spec_of_a_2048_node_job_carries_its_size_not_its_names() -> None:
    executor = CommandExecutor(_slurm(), now=lambda: T0)
    result = _execute(executor, CaptureJobSpec(job_id="1001"))
    assert isinstance(result, JobSpecResult) and result.job is not None
    assert (result.job.num_nodes, result.job.nodes) == (2048, [])


@pytest.mark.parametrize("count", [1, MAX_JOB_NODES_CARRIED, MAX_JOB_NODES_CARRIED + 1, 2048])
def test_what_travels_never_holds_more_names_than_the_state_carries(count: int) -> None:
    spec = JobSpec(job_id="1001", name="j", num_nodes=count, nodes=NODES[:count], state="RUNNING")
    sent = carried(spec)
    assert sent.nodes == (NODES[:count] if count <= MAX_JOB_NODES_CARRIED else [])
    JobSpecResult(job=sent)
    if count > MAX_JOB_NODES_CARRIED:
        # (and a receiver refuses an answer that carries more)
        with pytest.raises(ValidationError, match="more than a workflow carries"):
            JobSpecResult(job=spec)


def test_a_hang_of_a_job_whose_names_were_not_carried_and_none_asked_escalates_saying_why() -> None:
    # Given a hang verdict on a job whose spec came without its node list (2,048 nodes), nor any of the
    # verdict's nodes answered as its own (an agent that could not be asked)
    request, job, cluster = _setup(num_nodes=2048, nodes=[])
    # Then nothing is done to it and a human is asked, told it is the job's size, not its reports
    with pytest.raises(JobNodesNotCarried, match="hangs on 2048 nodes, more than a workflow carries the names of"):
        _classify(request, job, cluster)


def test_a_hang_of_a_large_job_is_judged_on_the_verdicts_nodes_the_orchestrator_says_it_runs_on() -> None:
    # Given a hang of a 2,048-node job whose spec carries, of the verdict's nodes, the ones it runs on
    request, job, cluster = _setup(num_nodes=2048, nodes=[], asked_held=NAMES_OF_VERDICT)
    # When it is classified
    c = _classify(request, job, cluster)
    # Then it is hung, its suspect checked: as a small job's is
    assert c.kind == "hung" and [f.slurm_node for f in c.faulty_nodes] == [NAMES_OF_VERDICT[3]]
    # And a suspect the orchestrator does not say it runs on is never acted on; reports of other nodes decide nothing
    c = _classify(request, job.model_copy(update={"asked_held": NAMES_OF_VERDICT[:3]}), cluster)
    assert c.kind == "hung" and c.faulty_nodes == []
    c = _classify(request, job.model_copy(update={"asked_held": ["ip-10-9-9-9"]}), cluster)
    assert c.kind == "left_alone" and "no live progress report" in c.reason


@given(asked=st.lists(st.sampled_from([*NODES[:40], *(f"ip-10-9-0-{n}" for n in range(40))]), max_size=MAX_NODES_ASKED))
@settings(max_examples=100, deadline=None)
def test_a_large_jobs_answer_holds_exactly_the_asked_nodes_it_runs_on_in_the_order_asked(asked: list[str]) -> None:
    spec = JobSpec(job_id="1001", name="j", num_nodes=2048, nodes=NODES, state="RUNNING")
    sent = carried(spec, asked)
    assert sent.nodes == [] and sent.asked_held == [n for n in dict.fromkeys(asked) if n in set(NODES)]
    JobSpecResult.model_validate_json(JobSpecResult(job=sent).model_dump_json())
    # (a job whose names are carried needs no answer about some of them)
    small = JobSpec(job_id="1001", name="j", num_nodes=40, nodes=NODES[:40], state="RUNNING")
    assert carried(small, asked).asked_held == []


def test_capture_job_spec_for_a_hang_asks_about_the_verdicts_nodes_and_the_agent_answers_those_the_job_holds() -> None:
    # Given a 2,048-node job, and a hang verdict naming four nodes (one not the job's)
    executor = CommandExecutor(_slurm(), now=lambda: T0)
    asked = [NODES[7], "ip-10-9-9-9", NODES[3], NODES[7]]
    # When Capture Job Spec asks
    result = _execute(executor, CaptureJobSpec(job_id="1001", asked=asked))
    # Then the answer carries no names but those of the asked the job runs on
    assert isinstance(result, JobSpecResult) and result.job is not None
    assert (result.job.nodes, result.job.asked_held) == ([], [NODES[7], NODES[3]])


def test_on_eks_capture_for_a_hang_of_a_large_job_answers_the_asked_nodes_its_pods_run_on() -> None:
    fake, names, uid = _eks_job_on_more_nodes_than_carried()
    asked = [names[5], "hyperpod-i-0fffffffffffffff0"]
    job = EksOrchestrator(fake, None, lambda: T0).execute(CaptureJobSpec(job_id=uid, asked=asked)).job  # type: ignore[arg-type]
    assert job is not None and job.nodes == [] and job.asked_held == [names[5]]


def test_a_manual_request_for_a_job_whose_names_were_not_carried_escalates_rather_than_calling_its_nodes_healthy() -> None:
    # Given a manual request (no failure event, so no node list) for a 2,048-node job whose spec came without names
    request = JobRecoveryRequest(cluster="llm-train", job_id="1001", source="manual", reason="drill", detected_at=T0)
    job = JobSpec(job_id="1001", name="pretrain", num_nodes=2048, state="FAILED")
    # Then it is not taken for an application failure "with every node healthy"
    with pytest.raises(JobNodesNotCarried, match="nothing in this incident named them"):
        classify_failure(request, job, [], [], "hpj-1001-1", T0)


# --- Check Job Nodes for a job on more nodes than a command names ---------------------------------
node_states = st.builds(
    NodeStatus,
    name=st.just("ip-10-2-0-1"),
    state=st.sampled_from(
        ["idle", "allocated", "mixed", "completing", "down", "drained", "draining", "fail", "unknown", "IDLE", "idle+drain"]
    ),
    flags=st.lists(
        st.sampled_from(["DRAIN", "NOT_RESPONDING", "COMPLETING", "CLOUD", "FAIL", "FAILING", "POWERED_DOWN", "MAINTENANCE", "RESERVED"]),
        max_size=3,
    ),
    reason=st.sampled_from(["", "Action:Replace", "Action:Reboot", f"{owner_tag('inc-1')} fault", "admin: bad cable", "stale text"]),
)


@settings(max_examples=500, deadline=None)
@given(state=node_states)
def test_a_node_is_left_out_as_plainly_healthy_exactly_when_the_classifier_finds_nothing_in_it(state: NodeStatus) -> None:
    """What the answer for a large job leaves out must be what the classifier finds nothing in, and what
    it answers something the classifier reads (an answer of harmless nodes would fill its bound): one
    rule, read from two places."""
    assert plainly_healthy(state.state, state.flags, state.reason) == (faulty_nodes([state.name], [state], []) == [])


def test_node_states_names_its_nodes_or_asks_for_every_unhealthy_one_never_both_or_neither() -> None:
    NodeStates(nodes=["a"])
    NodeStates(not_plainly_healthy=True)
    for fields in ({}, {"nodes": ["a"], "not_plainly_healthy": True}):
        with pytest.raises(ValidationError, match="one of the two"):
            NodeStates.model_validate(fields)
    # (a command naming its nodes is on the wire as it always was)
    assert "not_plainly_healthy" not in NodeStates(nodes=["a"]).model_dump_json()


@pytest.mark.parametrize(("count", "asks_by_name"), [(MAX_JOB_NODES_CARRIED, True), (MAX_JOB_NODES_CARRIED + 1, False), (2048, False)])
def test_check_job_nodes_names_a_jobs_nodes_up_to_what_a_command_carries(count: int, asks_by_name: bool) -> None:
    request = _job_request(count)
    orchestrator = FakeOrchestrator()
    check_job_nodes(
        CheckJobNodesInput.model_validate(
            {
                "execution_name": "hpj-1001-1",
                "task_token": "t",
                "request": request.model_dump(mode="json"),
                "inspection": {
                    "command_id": "c",
                    "type": "capture_job_spec",
                    "requested_at": T0,
                    "started_at": T0,
                    "completed_at": T0,
                    "result": {"job": None},
                },
            }
        ),
        orchestrator=orchestrator,
        now=T0,
    )
    (envelope,) = orchestrator.dispatched
    command = envelope.command
    assert isinstance(command, NodeStates)
    assert (command.nodes == NODES[:count]) if asks_by_name else (command.nodes == [] and command.not_plainly_healthy)


def _job_request(count: int) -> JobRecoveryRequest:
    failure = JobFailedDetail(
        cluster_name="llm-train",
        job_id="1001",
        name="pretrain",
        nodes=NODES[:count],
        state="FAILED",
        exit_code=1,
        ended_at=T0,
        event_key="llm-train:1001:1",
    )
    return JobRecoveryRequest(cluster="llm-train", job_id="1001", source="job_failed", reason="FAILED", detected_at=T0, failure=failure)


def test_the_agent_answers_every_unhealthy_node_and_the_classifier_finds_the_jobs_among_them() -> None:
    # Given 2,048 nodes: one of the job's drained by HyperPod's agent, one down, the rest healthy
    slurm = _slurm()
    slurm.drain([NODES[7]], "Action:Replace")
    slurm.nodes[NODES[1500]].state = "down"
    executor = CommandExecutor(slurm, now=lambda: T0)
    # When the agent is asked for every node not plainly healthy
    result = _execute(executor, NodeStates(not_plainly_healthy=True))
    # Then it answers those two only, and the classifier finds both among the job's 2,048
    assert isinstance(result, NodeStatesResult)
    assert sorted(s.name for s in result.nodes) == sorted([NODES[7], NODES[1500]])
    found = faulty_nodes(NODES, result.nodes, [])
    assert {f.slurm_node for f in found} == {NODES[7], NODES[1500]}


def test_more_unhealthy_nodes_than_an_answer_carries_is_said_not_cut() -> None:
    slurm = _slurm()
    slurm.drain(NODES[: MAX_UNHEALTHY_ANSWERED + 1], "admin: maintenance")
    executor = CommandExecutor(slurm, now=lambda: T0)
    with pytest.raises(ControllerAgentError, match=f"{MAX_UNHEALTHY_ANSWERED + 1} nodes are down, drained or failing"):
        executor.not_plainly_healthy()


def test_an_unhealthy_nodes_long_reason_is_cut_not_refused() -> None:
    # (a drain reason Slurm keeps whole, on any node of the cluster, must not fail every large job's answer)
    slurm = _slurm()
    slurm.drain([NODES[3]], "admin: " + "x" * 400)
    result = _execute(CommandExecutor(slurm, now=lambda: T0), NodeStates(not_plainly_healthy=True))
    assert isinstance(result, NodeStatesResult)
    (state,) = result.nodes
    assert state.name == NODES[3] and len(state.reason) <= UNHEALTHY_REASON_KEPT


@pytest.mark.parametrize(
    ("sinfo_node", "healthy"),
    [
        ({"name": "a", "state": "idle", "state_flags": []}, True),  # 22.05: a word, the flags apart
        ({"name": "a", "state": "idle", "state_flags": ["DRAIN"]}, False),
        ({"name": "a", "state": ["IDLE"]}, True),  # 23.02 and later: the state and its flags in one list
        ({"name": "a", "state": ["IDLE", "DRAIN"]}, False),
        ({"name": "a", "state": ["MIXED", "NOT_RESPONDING"]}, False),
        ({"name": "a", "state": ["DOWN"]}, False),
    ],
)
def test_node_states_of_either_shape_are_read_the_same(sinfo_node: dict[str, object], healthy: bool) -> None:
    state = read_node(sinfo_node)
    assert plainly_healthy(state.state, list(state.flags), state.reason) is healthy


def test_on_eks_every_node_not_plainly_healthy_is_answered_and_read_as_on_slurm() -> None:
    # Given 40 HyperPod nodes: one HyperPod marked for replacement, one cordoned by someone else, one not Ready
    fake = FakeKube(now=lambda: T0)
    names = [f"hyperpod-i-0123456789abc{n:04x}" for n in range(40)]
    for name in names:
        fake.add_hyperpod_node(name.removeprefix("hyperpod-"))
    fake.hyperpod_marks_unhealthy(names[3])
    fake.patch_node(names[10], [{"op": "add", "path": "/spec/unschedulable", "value": True}])
    fake.hyperpod_goes_not_ready(names[20])
    # And one of an older cluster's naming (ip-...), not Ready: the job's list names it hyperpod-<instance>
    fake.add_node("ip-10-1-2-3.us-west-2.compute.internal", instance_id="i-0123456789abcffff", ready=False)
    names.append("hyperpod-i-0123456789abcffff")
    # When the orchestrator is asked for every node not plainly healthy
    states = EksOrchestrator(fake, None, lambda: T0).execute(NodeStates(not_plainly_healthy=True)).nodes  # type: ignore[arg-type]
    # Then those three are answered, and the classifier reads them as it reads them by name
    assert sorted(s.name for s in states) == sorted([names[3], names[10], names[20], names[-1]])
    found = {f.slurm_node: f.ours_to_repair for f in faulty_nodes(names, states, [], "eks")}
    assert found == {names[3]: True, names[10]: False, names[20]: True, names[-1]: True}


def test_on_eks_capture_of_a_job_on_more_nodes_than_carried_answers_no_names_rather_than_some() -> None:
    # Given a PyTorchJob whose 1,001 pods run on 1,001 HyperPod nodes
    fake, _, uid = _eks_job_on_more_nodes_than_carried()
    # When its spec is captured
    job = EksOrchestrator(fake, None, lambda: T0).execute(CaptureJobSpec(job_id=uid)).job  # type: ignore[arg-type]
    # Then it carries none of its nodes' names (never the first 1,000 of them, as if they were all)
    assert job is not None and job.nodes == [] and job.num_nodes == MAX_JOB_NODES_CARRIED + 1


def test_a_long_drain_reason_is_cut_when_nodes_are_asked_for_by_name_too() -> None:
    slurm = SimulatedSlurm()
    slurm.add_node("a")
    slurm.drain(["a"], "admin: " + "y" * 400)
    result = _execute(CommandExecutor(slurm, now=lambda: T0), NodeStates(nodes=["a"]))
    assert isinstance(result, NodeStatesResult)
    (state,) = result.nodes
    assert state.reason.startswith("admin: ") and len(state.reason) == 256


def test_a_large_jobs_record_names_its_faulty_nodes_first_and_counts_the_rest() -> None:
    # Given a JobRecovery of a 2,048-node job whose failure names all its nodes, two of them faulty far down the list
    failure = _job_request(2048).failure
    assert failure is not None
    request = _job_request(2048).model_copy(update={"received_at": T0})
    job = JobSpec(job_id="1001", name="pretrain", num_nodes=2048, state="FAILED")
    faulty = [FaultyNode(slurm_node=NODES[1500], why="Slurm state down"), FaultyNode(slurm_node=NODES[2000], why="Slurm state down")]
    classification = FailureClassification(at=T0, kind="node_caused", reason="r", job=job, faulty_nodes=faulty)
    # When its record's facts are taken
    facts = incident_facts(JobWorkflowState(request=request, classification=classification), "escalated")
    # Then it names 64 nodes, the faulty ones first, and counts the other 1,984
    assert len(facts.nodes) == MAX_RECORD_JOB_NODES == len(facts.hostnames)
    assert facts.nodes[:2] == [NODES[1500], NODES[2000]] and facts.nodes_omitted == 2048 - MAX_RECORD_JOB_NODES


@pytest.mark.parametrize("reporting", [4, MAX_JOB_NODES_CARRIED, MAX_JOB_NODES_CARRIED + 1, 2048])
def test_capture_job_spec_asks_about_a_verdicts_nodes_only_when_more_nodes_report_than_an_answer_names(reporting: int) -> None:
    # Given a hang's recovery whose verdict says how many nodes reported
    request, _, _ = _setup()
    assert request.hang is not None
    hang = request.hang.model_copy(update={"nodes_reporting": reporting})
    orchestrator = FakeOrchestrator()
    step = CaptureJobSpecInput(execution_name="hpj-1001-hung-1", task_token="t", request=request.model_copy(update={"hang": hang}))
    # When Capture Job Spec sends its command
    capture_job_spec(step, orchestrator=orchestrator, now=T0)
    (envelope,) = orchestrator.dispatched
    asked = envelope.command.asked  # type: ignore[union-attr]
    # Then the verdict's nodes, suspects first, are asked about only for a job larger than an answer carries
    # (an agent older than the field refuses it: a smaller job's hang never depends on it)
    if reporting > MAX_JOB_NODES_CARRIED:
        assert asked[0] == hang.suspects[0] and set(asked) == {*hang.suspects, *(n.node for n in hang.nodes)}
        assert '"asked"' in envelope.model_dump_json()
    else:
        assert asked == [] and '"asked"' not in envelope.model_dump_json()


def test_what_capture_job_spec_may_ask_about_is_every_node_a_verdict_names() -> None:
    assert MAX_NODES_ASKED == MAX_SUSPECTS + MAX_VERDICT_NODES


def test_a_large_jobs_hang_blames_no_node_from_stacks_sampled_from_the_nodes_that_stopped_first() -> None:
    """A review found it: a large job's evidence is dumped on the verdict's nodes (those that stopped
    first), so their common stack was the majority and the healthy nodes "the odd ones out"."""
    # Given a 2,048-node job's hang with no suspect, whose sampled nodes' stacks are mostly one shared stuck stack
    request, job, cluster = _setup(num_nodes=2048, nodes=[], asked_held=NAMES_OF_VERDICT)
    assert request.hang is not None
    request = request.model_copy(update={"hang": request.hang.model_copy(update={"suspects": [], "suspects_why": ""})})
    stacks = [NodeStacks(node=n, outcome="captured", signature="stuck-in-data-loader") for n in NAMES_OF_VERDICT[:3]]
    stacks.append(NodeStacks(node=NAMES_OF_VERDICT[3], outcome="captured", signature="all-reduce"))
    evidence = HangEvidenceResult(job_id="1001", job_state="RUNNING", nodes=stacks)
    # When it is classified
    still = [*[report(n, step=101, idle=100) for n in NAMES_OF_VERDICT[:3]], report(NAMES_OF_VERDICT[3], step=100, idle=105)]
    c = classify_hang(request, job, evidence, still, cluster, "hpj-1001-hung-1", T0 + timedelta(seconds=10))
    # Then it is hung, restarted where it was: no node is blamed from a sample that is not the job's majority
    assert c.kind == "hung" and c.faulty_nodes == [] and c.node_request is None
    # (and its reason names no node as the odd one out)
    assert "not as on the other" not in c.reason and "blames no node of a job this large" in c.reason


def test_a_large_jobs_hang_whose_named_nodes_are_all_silent_asks_a_human() -> None:
    # Given a 2,048-node job's hang whose verdict's nodes' reporters are all silent now
    request, job, cluster = _setup(num_nodes=2048, nodes=[], asked_held=NAMES_OF_VERDICT)
    silent = [report(n, step=101, idle=400, heartbeat_age=400) for n in NAMES_OF_VERDICT]
    # Then nothing is done to it: their silence says nothing of the job's other 2,044 nodes
    with pytest.raises(JobNodesNotCarried, match="none of the nodes its verdict names has a reporter heard"):
        _classify(request, job, cluster, reports=silent)
