"""The piece-value network as assets: trained from the piece_values set, evaluated from the
checkpoint its materialisation recorded, figures in evaluation_results; and the
`chess-pipeline piece-values` command on the store's own instance."""

import chess
import dagster as dg
import pytest

from assets.datasets import dataset_assets
from assets.piece_values import piece_values_assets
from assets.resources import StoreResource
from assets.shared import report_dir
from assets.training import model_assets
from cli.runtime import open_instance
from pipeline.labels.labels import label_store
from pipeline.labels.pool import EnginePool
from pipeline.labels.setting import LabelRun
from pipeline.labels.uci import Limit
from pipeline.store.duck import connect, create_views
from pipeline.store.store import Store
from tests.pipeline.test_storage_s3 import bucket, endpoint  # noqa: F401  (fixtures: a moto S3 server)
from tests.stores import add_pgn, first_games
from tests.test_cli import run_cli
from training.piece_values import boards_batch, load_piece_value_net, piece_rows

FEN = "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3"


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory, stockfish, fics_2022):
    tmp = tmp_path_factory.mktemp("piece_value_assets")
    store = Store(tmp / "store").ensure()
    add_pgn(store, tmp, "games.pgn", first_games(fics_2022, 30, tmp / "src.pgn"))
    with EnginePool(stockfish, workers=2) as pool:
        label_store(store, pool, LabelRun(limit=Limit("static")))
    instance = open_instance(store)  # the store's own instance, as the CLI opens it
    resources = {"store": StoreResource(root=str(store.root))}
    config = {"label_kind": "static", "seed": 0, "val_fraction": 0.2, "test_fraction": 0.2}
    assert dg.materialize(
        dataset_assets,
        selection=["piece_values"],
        instance=instance,
        resources=resources,
        run_config={"ops": {"piece_values": {"config": config}}},
    ).success
    trained = dg.materialize(
        model_assets,
        selection=["piece_value_net"],
        instance=instance,
        resources=resources,
        run_config={"ops": {"piece_value_net": {"config": {"epochs": 1, "max_train_rows": 256}}}},
    )
    assert trained.success
    evaluation = dg.materialize(
        piece_values_assets,
        selection=["eval_piece_values_piece_value_net"],
        instance=instance,
        resources=resources,
        run_config={"ops": {"eval_piece_values_piece_value_net": {"config": {"max_rows": 300}}}},
    )
    assert evaluation.success
    return store, trained, evaluation


def test_the_evaluation_reports_values_per_piece_type_and_phase_beside_the_published_ones(evaluated):
    store, trained, evaluation = evaluated
    checkpoint = trained.get_asset_materialization_events()[0].materialization.metadata["checkpoint"].value
    assert trained.run_id in checkpoint
    meta = {k: v.value for k, v in evaluation.get_asset_materialization_events()[0].materialization.metadata.items()}
    assert "| knight |" in meta["piece_values"] and "| 2.94 | 3 |" in meta["piece_values"]
    assert "| opening | middlegame | endgame |" in meta["by_phase"]
    for t, ci in meta["value_intervals"].items():  # issue 37: n (games) and the 95% interval of each value
        assert ci["low95"] <= ci["value"] <= ci["high95"] and ci["games"] > 1, (t, ci)
    assert "data:image/png;base64," in meta["by_phase_chart"]
    assert meta["test_positions"] == 300 and "book material" in meta["test_error"]
    assert (report_dir(store, "piece_value_net") / "piece_values_by_phase.png").is_file()
    create_views(store)
    with connect(store) as con:
        got = dict(
            con.sql(
                "SELECT metric, value FROM evaluation_results "
                "WHERE model = 'piece_value_net' AND suite = 'piece_values'"
            ).fetchall()
        )
    assert got["value_pawn"] == 1.0 and {"value_knight", "value_queen_middlegame", "test_mae_pawns"} <= set(got)
    assert got["test_mae_pawns"] == pytest.approx(meta["test_mae"], abs=1e-4)
    # The split protocol the figures are on (ours: by game, leakage guard on), and the labels' own values.
    assert (got["split_by_position"], got["leakage_guard"]) == (0.0, 1.0)
    assert meta["split_protocol"] == "split by game, leakage guard on (ours)"
    assert {"linear_fit_value_knight", "linear_fit_value_queen"} <= set(got)


def test_piece_values_command_prints_every_piece_and_the_score(evaluated):
    store = evaluated[0]
    rc, out, err = run_cli(store.root, "piece-values", FEN)
    assert rc == 0, err
    lines = out.strip().splitlines()
    board = chess.Board(FEN)
    pieces = lines[1:-1]
    assert [p.split()[0] for p in pieces] == [chess.square_name(s) for s in sorted(board.piece_map())]
    assert all(p.split()[1] == board.piece_at(chess.parse_square(p.split()[0])).symbol() for p in pieces)
    total = sum(float(p.split()[3]) * (1 if p.split()[2] == "white" else -1) for p in pieces)
    printed = float(lines[-1].split(":")[1].split()[0])
    assert printed == pytest.approx(total, abs=0.005 * len(pieces) + 0.005)  # each value printed to 0.01
    model = load_piece_value_net(
        evaluated[1].get_asset_materialization_events()[0].materialization.metadata["checkpoint"].value
    )
    assert printed == pytest.approx(model(piece_rows(boards_batch([board]))).item(), abs=0.006)  # the model's score


def test_piece_values_command_says_in_one_line_what_is_wrong(evaluated):
    from cli import main

    home = str(evaluated[0].root)

    def fails(*args) -> str:
        with pytest.raises(SystemExit) as e:
            main(["--home", home, "piece-values", *args])
        return str(e.value.code)

    assert fails("not a fen").startswith("chess-pipeline piece-values: not a valid FEN")
    assert fails("8/8/8/8/8/8/8/4K3 w - - 0 1").startswith("chess-pipeline piece-values: not a legal position")
    assert fails(FEN, "--model", "piece_value_net_result") == (
        "chess-pipeline piece-values: piece_value_net_result is not trained yet "
        "(run `chess-pipeline train piece_value_net_result`)"
    )
    assert fails(FEN, "--model", "mlp_bitmap_3class") == (
        "chess-pipeline piece-values: --model must be one of piece_value_net, piece_value_net_result; "
        "got 'mlp_bitmap_3class'"
    )


def test_piece_values_command_reads_a_checkpoint_stored_on_s3(evaluated, bucket, monkeypatch, capsys):  # noqa: F811
    """A store on S3 (moto's server, as tests/pipeline/test_storage_s3.py): the model asset
    records its checkpoint as an s3:// object; the command loads it from there (it used to call
    such a checkpoint gone) and prints what the same weights give, and says in one line when
    the object is really gone."""
    from pathlib import Path

    from cli import main
    from pipeline.store import storage
    from pipeline.store.store_files import atomic_path
    from training.piece_values import piece_values

    local = Path(evaluated[1].get_asset_materialization_events()[0].materialization.metadata["checkpoint"].value)
    st = Store(f"s3://{bucket}/store").ensure()
    key = st.root / "models" / "piece_value_net" / "run1" / "checkpoint.pt"
    with atomic_path(key) as tmp:
        tmp.write_bytes(local.read_bytes())
    monkeypatch.setenv("DAGSTER_HOME", str(st.dagster_home))  # the S3 store's own instance, as the CLI opens it
    open_instance(st).report_runless_asset_event(
        dg.AssetMaterialization("piece_value_net", metadata={"checkpoint": dg.MetadataValue.path(str(key))})
    )
    main(["--home", f"s3://{bucket}/store", "piece-values", FEN])
    lines = capsys.readouterr().out.strip().splitlines()
    expected = piece_values(FEN, load_piece_value_net(local))
    assert [(p.split()[0], float(p.split()[3])) for p in lines[1:-1]] == [
        (sq, pytest.approx(v, abs=0.006)) for sq, v in expected.items()
    ]
    storage.delete(key)
    with pytest.raises(SystemExit) as e:
        main(["--home", f"s3://{bucket}/store", "piece-values", FEN])
    assert str(e.value.code) == (
        f"chess-pipeline piece-values: {key}, the checkpoint of piece_value_net's latest training, is gone "
        "(run `chess-pipeline train piece_value_net` again)"
    )
