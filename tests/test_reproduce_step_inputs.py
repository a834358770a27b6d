"""A reproduce step that finished on one machine whose command then died before the report ran
(the report was what kept a step's report inputs in the store) is reported in full by a second
machine on the same store: the step's row has its wall time and when it finished, and the report
reads the metadata the first machine's run gave it. Machine = a Dagster instance of its own; the
store is a local folder both point at (the report inputs live in the store, so the gap and its
fix are the same as on S3)."""

import time

import dagster as dg

from assets.reproduce import _step, made_of
from cli import reproduce_steps as rs
from cli.runtime import materialize
from pipeline.store.store import Store

STEP = "finished_then_killed_step"


@dg.asset(name=STEP)
def finished_then_killed() -> dg.MaterializeResult:
    return dg.MaterializeResult(metadata={"accuracy": 0.75, "n": 12})


def test_a_step_finished_before_a_kill_keeps_its_report_inputs_for_a_second_machine(tmp_path):
    store = Store(tmp_path / "store").ensure()
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()  # each machine's own Dagster instance
    with dg.DagsterInstance.local_temp(tempdir=str(tmp_path / "a")) as instance_a:
        # Machine A: the step loop's own calls for one step (run_steps), then killed before the report.
        start = time.monotonic()
        result = materialize([finished_then_killed], store, instance_a, selection=[STEP], tags={rs.SETTINGS_TAG: "s"})
        assert result.success
        rs.step_finished(store, instance_a, STEP, "s", {}, time.monotonic() - start)
        # Machine B: an instance that never made the step, the same store; the report's reads.
        with dg.DagsterInstance.local_temp(tempdir=str(tmp_path / "b")) as instance_b:
            assert rs.up_to_date(instance_b, finished_then_killed, STEP, "s", store=store)  # kept, not redone
            made_b = made_of(instance_b, store, STEP)
            row = _step(instance_b, STEP, "kept", store)
        made_a = made_of(instance_a, store, STEP)  # what A's own report would have read
    assert made_b == made_a and made_b.meta == {"accuracy": 0.75, "n": 12}
    assert row.status == "kept" and row.seconds == made_a.seconds and row.seconds > 0
    assert row.detail == time.strftime("finished %Y-%m-%d %H:%M:%S UTC", time.gmtime(made_a.timestamp))
