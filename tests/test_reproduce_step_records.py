"""The step records reproduce keeps in the store (pipeline.research.step_records) decide what it
keeps, with a Dagster instance that has never seen the store (a second machine): a step made with
the same settings is kept until one of its inputs changes; a model step killed half-way gets its
own run folder again, a new one once it finished or its inputs changed."""

import dagster as dg

from cli import reproduce_steps as rs
from pipeline.research import step_records
from pipeline.store.store import Store


@dg.asset(name="upstream_step")
def upstream() -> None:
    pass


@dg.asset(name="downstream_step", deps=[upstream])
def downstream() -> None:
    pass


def test_a_step_recorded_in_the_store_is_kept_by_a_fresh_instance_until_an_input_changes(tmp_path):
    store = Store(tmp_path / "store")
    with dg.DagsterInstance.ephemeral() as instance:  # never saw the store's runs
        assert rs.up_to_date(instance, downstream, "downstream_step", "s", store=store) is None  # never made
        up = step_records.finished(store.root, "upstream_step", "s", {}, 1.0)
        step_records.finished(store.root, "downstream_step", "s", {"upstream_step": up.made_at}, 2.0)
        assert rs.up_to_date(instance, downstream, "downstream_step", "s", store=store)
        assert rs.up_to_date(instance, downstream, "downstream_step", "other", store=store) is None  # settings
        assert rs.run_seconds(instance, "downstream_step", "s", store) == 2.0
        assert rs.run_seconds(instance, "downstream_step", "other", store) is None
        step_records.finished(store.root, "upstream_step", "s", {}, 1.0)  # the input made again
        assert rs.up_to_date(instance, downstream, "downstream_step", "s", store=store) is None
        # Without the store (or its record), the instance decides as before: never made here.
        assert rs.up_to_date(instance, downstream, "downstream_step", "s") is None


def test_a_model_step_killed_running_gets_its_run_folder_again_until_it_finishes(tmp_path):
    root = Store(tmp_path / "store").root
    inputs = {"dataset": 1.5}
    first = step_records.run_folder(root, "model", "s", inputs)
    assert step_records.run_folder(root, "model", "s", inputs) == first  # killed: the same folder
    assert not step_records.read_record(root, "model").finished  # started, not made: never kept
    with dg.DagsterInstance.ephemeral() as instance:
        assert rs.up_to_date(instance, downstream, "model", "s", store=Store(root)) is None
    assert step_records.run_folder(root, "model", "s", {"dataset": 2.5}) != first  # its input changed
    again = step_records.run_folder(root, "model", "s", {"dataset": 2.5})
    step_records.finished(root, "model", "s", {"dataset": 2.5}, 3.0, folder=again)
    assert step_records.run_folder(root, "model", "s", {"dataset": 2.5}) != again  # finished: run anew
