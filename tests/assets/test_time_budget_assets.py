"""A model asset given a time bound (its run config's max_minutes) stops there and says so, in its
metadata and in the reproduction report's rows (synthetic splits: no Stockfish)."""

import re

import dagster as dg
import pytest

from assets.reproduce import size_text
from assets.resources import StoreResource
from assets.training import model_assets
from pipeline.research.reproduction import ReportInputs, render
from pipeline.store.store import Store
from tests.training.synthetic import write_dataset


@pytest.mark.slow  # 4 to 5 s idle: the fast tier stays under 2 minutes
def test_a_bounded_model_asset_stops_and_its_metadata_and_report_row_say_so(instance, tmp_path):
    store = Store(tmp_path / "store")
    write_dataset(store, "sabatelli_3class", games=30, seed=5)
    config = {"profile": "full", "epochs": 400, "max_minutes": 0.01, "batch_size": 32}
    result = dg.materialize(
        model_assets,
        selection=["mlp_bitmap_3class"],
        instance=instance,
        resources={"store": StoreResource(root=str(store.root))},
        run_config={"ops": {"mlp_bitmap_3class": {"config": config}}},
    )
    assert result.success
    meta = dict(result.get_asset_materialization_events()[0].materialization.metadata)
    v = {k: getattr(x, "value", x) for k, x in meta.items()}
    assert v["max_minutes"] == 0.01 and v["epochs_asked"] == 400 and v["epochs"] < 400
    assert v["stopped_by"] == "time budget" and v["stopped_by_time_budget"] is True
    stop = f"{v['epochs']} of 400 epoch(s), stopped by the time budget (0.01 min)"
    # The bound ends the last epoch within it (most often; said so) or at its end.
    assert v["training_stop"] == stop or re.fullmatch(
        re.escape(stop) + rf", the {v['epochs']}(st|nd|rd|th) cut short by the bound", v["training_stop"]
    ), v["training_stop"]
    row = size_text(meta, "full profile: every train row, at most 400 epoch(s), 0.01 minutes")
    assert stop in row and row.startswith("full profile, ")
    text = render(ReportInputs([], {}, {}, [], {}, stops={"mlp_bitmap_3class": row}))
    section = text.split("## Where each model's training stopped", 1)[1].split("\n## ", 1)[0]
    assert f"| mlp_bitmap_3class | {row} |" in section
