"""td_selfplay killed part-way (kill -9, so no materialisation recorded) and materialised again
records the same line as a run never killed: the same generations, archives and checkpoint."""

import dagster as dg
import numpy as np

from assets.partitions import archives_partitions
from assets.resources import StoreResource
from assets.selfplay import TDSelfPlayConfig, td_selfplay
from tests.training.test_td_resume import TINY, _run_killed
from training.td.checkpoints import load_checkpoint


def _materialize(instance, root):
    return dg.materialize(
        [td_selfplay],
        instance=instance,
        resources={"store": StoreResource(root=str(root))},
        run_config=dg.RunConfig(ops={"td_selfplay": TDSelfPlayConfig(**TINY)}),
    )


def test_td_selfplay_run_again_after_a_kill_records_the_line_never_killed(tmp_path, instance):
    whole = _materialize(instance, tmp_path / "a")
    assert whole.success
    a = whole.asset_materializations_for_node("td_selfplay")[0].metadata

    _run_killed(tmp_path / "b", kill_after=TINY["games"] + 1)  # during generation 2
    with dg.instance_for_test() as other:
        again = _materialize(other, tmp_path / "b")
        assert again.success
        b = again.asset_materializations_for_node("td_selfplay")[0].metadata
        partitions = other.get_dynamic_partitions(archives_partitions.name)
    assert b["generation"].value == a["generation"].value == TINY["generations"]
    assert b["archives"].value == a["archives"].value and sorted(partitions) == sorted(a["archives"].value)
    assert b["games"].value == a["games"].value == TINY["games"] * TINY["generations"]
    assert b["checkpoint"].value.endswith("gen-0003.pt")
    assert np.array_equal(load_checkpoint(a["checkpoint"].value)[0], load_checkpoint(b["checkpoint"].value)[0])
