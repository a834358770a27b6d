"""DeepChess and Team 44's piece-value network on the published split protocol, as assets.

One module-scoped tiny store (the first 40 games of a shared FICS archive, Stockfish's static
labels), the published-split datasets, both published-split models at the quick profile with
tiny caps, their evaluations and the reproduction report: the copies exist in the reproduction
job, train on the published split's files, and write their rows under the protocol's names.
"""

import os

import dagster as dg
import pyarrow.parquet as pq
import pytest

from assets.deepchess import SUITE, deepchess_assets
from assets.piece_values import piece_values_assets
from assets.reproduce import (
    REPORT,
    job_assets,
    published_split_store,
    reproduction_assets,
    split_dataset_assets,
    split_model_assets,
)
from assets.resources import StockfishResource, StoreResource
from cli.runtime import open_instance
from pipeline.labels.labels import label_store
from pipeline.labels.pool import EnginePool
from pipeline.labels.setting import LabelRun
from pipeline.labels.uci import Limit
from pipeline.research.published import PAIRS_ON_PUBLISHED_SPLIT
from pipeline.research.reproduction import on_published_split
from pipeline.store.duck import memory_connection
from pipeline.store.store import Store
from tests.stores import add_pgn, first_games
from training.deepchess import BUCKETS

DEEPCHESS, PIECES = "deepchess_net", "piece_value_net"
SPLIT_DC, SPLIT_PV = on_published_split(DEEPCHESS), on_published_split(PIECES)
EVALS = [f"eval_pairs_{SPLIT_DC}", f"eval_piece_values_{SPLIT_PV}"]
TINY = {"epochs": 1, "max_train_rows": 256, "batch_size": 64}


@pytest.fixture(scope="module")
def reproduced(tmp_path_factory, stockfish, fics_2022, shared_data):
    tmp = tmp_path_factory.mktemp("published_split")
    store = Store(tmp / "store").ensure()
    add_pgn(store, tmp, "games.pgn", first_games(fics_2022, 40, tmp / "src.pgn"))
    with EnginePool(stockfish, workers=1) as pool:
        label_store(store, pool, LabelRun(limit=Limit("static")))
    suites = tmp / "suites"
    suites.mkdir()
    lines = (shared_data / "epd" / "STS1-STS15_LAN_v3.epd").read_text().splitlines()[:6]
    (suites / "STS1-STS15_LAN_v3.epd").write_text("\n".join(lines) + "\n")
    instance = open_instance(store)
    resources = {"store": StoreResource(root=str(store.root)), "stockfish": StockfishResource(workers=1)}
    split = {"seed": 0, "val_fraction": 0.2, "test_fraction": 0.2}
    ops = {
        on_published_split("deepchess"): {"config": split},
        on_published_split("piece_values"): {"config": {**split, "label_kind": "static"}},
        SPLIT_DC: {"config": TINY},
        SPLIT_PV: {"config": TINY},
        f"eval_pairs_{SPLIT_DC}": {"config": {"suites_dir": str(suites), "engine": False}},
        f"eval_piece_values_{SPLIT_PV}": {"config": {"max_rows": 200}},
        REPORT: {"config": {"models": [DEEPCHESS, PIECES]}},
    }
    results = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(os, "cpu_count", lambda: 1)  # the loop takes every core by default: one is faster here
        for step in (list(ops)[:2], list(ops)[2:4], list(ops)[4:6], [REPORT]):
            result = dg.materialize(
                [*split_dataset_assets, *split_model_assets, *deepchess_assets, *piece_values_assets,
                 *reproduction_assets],
                selection=step,
                instance=instance,
                resources=resources,
                run_config={"ops": {k: ops[k] for k in step}},
            )  # fmt: skip
            assert result.success, step
            for name in step:
                results[name] = result.asset_materializations_for_node(name)[0].metadata
    yield store, results
    instance.dispose()


def test_the_copies_and_their_evaluations_are_in_the_reproduction_job():
    from assets.definitions import build_defs

    job = build_defs().resolve_job_def("reproduction_job")
    keys = {k.to_user_string() for k in job.asset_layer.executable_asset_keys}
    assert {SPLIT_DC, SPLIT_PV, *EVALS} <= keys
    names = job_assets([DEEPCHESS, PIECES])
    assert {SPLIT_DC, SPLIT_PV, *EVALS} <= set(names)
    # Upstream first: each copy after its dataset, each evaluation after its model, the report last.
    assert names.index(on_published_split("deepchess")) < names.index(SPLIT_DC) < names.index(EVALS[0])
    assert names.index(on_published_split("piece_values")) < names.index(SPLIT_PV) < names.index(EVALS[1])
    assert names[-1] == REPORT
    assert not {SPLIT_DC, *EVALS} & set(job_assets(["mlp_bitmap_3class"]))


def test_the_reproduction_leaves_out_the_sets_of_ours_their_models_and_their_evaluations():
    """mlp_search_regression and mlp_bitmap_3class_search train on the searched sets (static
    labels, ours), deepchess_scored_net on deepchess_scored (ours): none of them is in the job (by
    tag: a location without the evaluation assets still loads) nor in the command's steps, nor a
    published-split copy of their sets; every other model and its evaluations are."""
    from assets.definitions import build_defs
    from assets.training import MODELS

    job = build_defs().resolve_job_def("reproduction_ours_job")  # with the stage ours: every model
    keys = {k.to_user_string() for k in job.asset_layer.executable_asset_keys}
    sets = {"sabatelli_regression_search", "sabatelli_3class_search", "deepchess_scored"}
    ours = {"mlp_search_regression", "mlp_bitmap_3class_search", "deepchess_scored_net"}
    assert ours == {m for m in MODELS if MODELS[m].dataset in sets}
    left_out = {*sets, *(f"published_split_{d}" for d in sets), *ours}
    left_out |= {f"eval_{k}_{m}" for m in ours for k in ("suites", "matches", "report")}
    assert not left_out & keys and not left_out & set(job_assets(stages=("ours",)))
    assert not {f"published_split_{d}" for d in sets} & {
        k.to_user_string() for k in build_defs().resolve_asset_graph().get_all_asset_keys()
    }
    others = [m for m in MODELS if m not in ours]
    assert {*others, *(f"eval_{k}_{m}" for m in others for k in ("suites", "matches", "report"))} <= keys
    assert set(job_assets(stages=("ours",))) <= keys | {"archive_tables", "labels"}


def test_the_copies_train_on_the_published_split_files(reproduced):
    import torch

    store, results = reproduced
    split_root = published_split_store(store).root
    for model, dataset in ((SPLIT_DC, "deepchess"), (SPLIT_PV, "piece_values")):
        meta = results[model]
        assert meta["dataset"].value == on_published_split(dataset) and meta["profile"].value == "quick"
        ck = torch.load(meta["checkpoint"].value, map_location="cpu", weights_only=False)
        test = ck["dataset"]["splits"]["test"]["path"]
        assert str(test).startswith(str(split_root / "datasets" / dataset)), test
        # The published protocol's files: split by position, so some test game is also in train.
        files = {s: pq.read_table(ck["dataset"]["splits"][s]["path"], columns=["game_id"]) for s in ("train", "test")}
        games = [set(t.column("game_id").to_pylist()) for t in files.values()]
        assert games[0] & games[1], model
    assert "split by position, no leakage guard" in results[SPLIT_DC]["split_protocol"].value


def test_rows_are_written_under_the_published_protocol(reproduced):
    store, _ = reproduced
    with memory_connection(store) as con:
        metrics = {
            (m, d, s, k): v
            for m, d, s, k, v in con.sql(
                "SELECT model, dataset, split, metric, value FROM model_metrics WHERE model LIKE 'published_split_%'"
            ).fetchall()
        }
        evals = {
            (m, s, k): v
            for m, s, k, v in con.sql(
                "SELECT model, suite, metric, value FROM evaluation_results WHERE model LIKE 'published_split_%'"
            ).fetchall()
        }
        leaked = con.sql("SELECT count(*) FROM evaluation_results WHERE model IN ($a, $b)",
                         params={"a": DEEPCHESS, "b": PIECES}).fetchall()[0][0]  # fmt: skip
    dc = on_published_split("deepchess")
    assert {(SPLIT_DC, dc, "val", "accuracy"), (SPLIT_DC, dc, "train", "pair_accuracy")} <= set(metrics)
    assert metrics[(SPLIT_DC, dc, "test", "split_by_position")] == 1.0
    assert metrics[(SPLIT_DC, dc, "test", "leakage_guard")] == 0.0
    assert (SPLIT_PV, on_published_split("piece_values"), "test", "mse") in metrics
    for bucket in BUCKETS:
        assert (SPLIT_DC, SUITE, bucket) in evals
    assert (evals[(SPLIT_DC, SUITE, "split_by_position")], evals[(SPLIT_DC, SUITE, "leakage_guard")]) == (1.0, 0.0)
    assert (SPLIT_DC, "STS1-STS15_LAN_v3", "solution_ranking") in evals
    assert {(SPLIT_PV, "piece_values", f"value_{p}") for p in ("knight", "bishop", "rook", "queen")} <= set(evals)
    assert evals[(SPLIT_PV, "piece_values", "split_by_position")] == 1.0
    assert leaked == 0  # nothing written under the leakage-free models' names


def test_the_report_puts_the_published_protocols_figures_beside_the_published_ones(reproduced):
    store, results = reproduced
    text = (store.root / "reports" / "reproduction.md").read_text()
    table = text.split("## Published figures beside ours", 1)[1].split("\n## ", 1)[0]
    rows = {
        r[1]: r
        for r in ([c.strip() for c in line.strip("|").split("|")] for line in table.splitlines())
        if len(r) == 11
    }
    for measure in ("pair accuracy, validation", "Experiment 1, bucket A_even_even", "average knight value, pawn = 1"):
        row = rows[measure]
        assert row[6] not in ("-", "not measured") and row[7] != "-", row  # ours, published protocol, and its n
        assert row[8] == "not measured", row  # the leakage-free model was not trained here
    assert rows["STS points, 1-ply round robin"][6] == "-"  # measured on the leakage-free model only
    assert PAIRS_ON_PUBLISHED_SPLIT in text
