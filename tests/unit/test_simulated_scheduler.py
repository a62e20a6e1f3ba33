"""The simulated slurmctld's scheduler (sandbox/slurm/): a pending resubmission starts when enough
nodes are free, on spares if its old nodes are not, never on a drained, down, busy or excluded node;
the moment it starts is what the drill report's job downtime is measured to."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hyperpod_recovery.models.manifest import RESUME_FROM_ENV, RESUME_STEP_ENV
from hyperpod_recovery_agent.capture import SubmitAs
from sandbox.slurm import SimulatedSlurm, SlurmJob

T0 = datetime(2026, 3, 14, 9, 0, tzinfo=UTC)
RESUME = {RESUME_FROM_ENV: "s3://b/llama/step-000000100/", RESUME_STEP_ENV: "100"}


def _cluster(nodes: int, job_nodes: int) -> tuple[SimulatedSlurm, list[datetime]]:
    clock = [T0]
    slurm = SimulatedSlurm(now=lambda: clock[0])
    for n in range(nodes):
        slurm.add_node(f"node-{n:02d}")
    slurm.add_job(
        SlurmJob(job_id="100", name="llama", nodes=[f"node-{n:02d}" for n in range(job_nodes)], state="RUNNING", checkpoint_uri=None)
    )
    return slurm, clock


def _resubmit(slurm: SimulatedSlurm, job_id: str = "100", exclude: tuple[str, ...] = ()) -> str:
    capture = slurm.capture(job_id)
    assert capture is not None
    slurm.cancel(job_id)
    return slurm.submit_as_owner(
        capture, SubmitAs(comment="hyperpod-recovery incident=inc-1", extra_environment=RESUME, exclude_nodes=exclude)
    )


def test_given_spares_when_a_node_is_drained_then_the_resubmission_runs_at_once_on_a_spare() -> None:
    # Given 4 nodes under a 2-node job, and its node-01 drained (cordoned) and down
    slurm, _ = _cluster(4, 2)
    slurm.drain(["node-01"], "hyperpod-recovery:inc-1 fault")
    slurm.fail_job("100", "NODE_FAIL", ["node-01"], requeued=False)
    # When it is resubmitted
    new = slurm.jobs[_resubmit(slurm)]
    # Then it runs now, on its good old node first, then a spare, never the drained one
    assert new.state == "RUNNING" and new.nodes == ["node-00", "node-02"] and new.started_at == T0


def test_given_no_spare_then_the_resubmission_waits_for_the_replacement_and_starts_when_it_is_resumed() -> None:
    slurm, clock = _cluster(2, 2)
    slurm.drain(["node-01"], "hyperpod-recovery:inc-1 fault")
    slurm.fail_job("100", "NODE_FAIL", ["node-01"], requeued=False)
    new = slurm.jobs[_resubmit(slurm)]
    assert new.state == "PENDING" and new.nodes == [] and new.started_at is None
    # When the replacement rejoins ten minutes later and is resumed
    clock[0] = T0 + timedelta(minutes=10)
    slurm.resume(["node-01"])
    # Then the job starts then, on its own nodes
    assert new.state == "RUNNING" and sorted(new.nodes) == ["node-00", "node-01"] and new.started_at == clock[0]


def test_excluded_and_busy_nodes_are_never_given() -> None:
    # Given 5 nodes: job 100 on 2, job 200 on 2, one spare
    slurm, _ = _cluster(5, 2)
    slurm.add_job(SlurmJob(job_id="200", name="other", nodes=["node-02", "node-03"], state="RUNNING", checkpoint_uri=None))
    slurm.drain(["node-01"], "hyperpod-recovery:inc-1 fault")
    # When job 100 is resubmitted excluding the spare node-04
    new = slurm.jobs[_resubmit(slurm, "100", exclude=("node-04",))]
    # Then it waits: node-01 is drained, node-02/03 run job 200, node-04 is excluded
    assert new.state == "PENDING"
    # And it starts on the spare's neighbour only once job 200's nodes are free
    slurm.cancel("200")
    slurm.schedule()
    assert new.state == "RUNNING" and new.nodes == ["node-00", "node-02"]


def test_pending_jobs_are_started_in_submission_order_each_that_fits() -> None:
    # Given 3 nodes: job 100 on 2 (node-00, node-01), job 200 on 1 (node-02); all three drained and resubmitted
    slurm, _ = _cluster(3, 2)
    slurm.add_job(SlurmJob(job_id="200", name="small", nodes=["node-02"], state="RUNNING", checkpoint_uri=None))
    slurm.drain(["node-00", "node-01", "node-02"], "maintenance")
    big, small = slurm.jobs[_resubmit(slurm, "100")], slurm.jobs[_resubmit(slurm, "200")]
    assert big.state == small.state == "PENDING"
    # When one node comes back, then the other two
    slurm.resume(["node-02"])
    # Then the later, smaller job starts on what fits (the larger one cannot yet), then the larger one
    assert (big.state, small.state) == ("PENDING", "RUNNING")
    slurm.resume(["node-00", "node-01"])
    assert big.state == "RUNNING" and sorted(big.nodes) == ["node-00", "node-01"]
