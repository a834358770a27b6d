"""The lubeck_grid asset end to end (real games, a Lubeck network trained one epoch, real
Stockfish, a real Dagster instance), and its start positions checked by direct engine calls."""

import re
from pathlib import Path

import chess
import chess.engine
import dagster as dg
import pytest
import torch

from assets.lubeck_grid import lubeck_grid
from assets.resources import StockfishResource, StoreResource
from pipeline.play.evaluation import write_results
from pipeline.play.lubeck_grid import GridConfig, node_budget
from pipeline.store.duck import memory_connection
from pipeline.store.store import Store
from tests.engines import faulty_stockfish, static_cp
from tests.stores import add_pgn, first_games, lubeck_checkpoint
from training.encoders import get_encoder
from training.models import PRESETS, build_model

TINY = {
    "depths": [1, 2],
    "seconds": [1.0, 2.0],
    "time_scale": 0.01,
    "positions": 1,
    "max_plies": 8,
    "adjudicate_depth": 4,
    "probe_depth": 6,
    "candidates": 60,
    "calibration_depth": 1,
    "workers": 1,
}
"""A grid of 2 depths x 2 times x 2 start kinds, one start position a kind (2 games a cell)."""


def _record_lubeck(instance: dg.DagsterInstance, checkpoint) -> None:
    """checkpoint recorded as the model asset lubeck_wdl_mlp's latest materialisation."""
    instance.report_runless_asset_event(
        dg.AssetMaterialization("lubeck_wdl_mlp", metadata={"checkpoint": dg.MetadataValue.path(str(checkpoint))})
    )


def _play(instance: dg.DagsterInstance, resources: dict, config: dict, raise_on_error: bool = True):
    """lubeck_grid materialised with config in instance."""
    return dg.materialize(
        [lubeck_grid],
        instance=instance,
        resources=resources,
        run_config={"ops": {"lubeck_grid": {"config": config}}},
        raise_on_error=raise_on_error,
    )


@pytest.fixture(scope="module")
def grid_run(tmp_path_factory, stockfish, fics_2022):
    """60 real games ingested, Lubeck's network trained one epoch on the first 16 of them
    (tests.stores' lubeck_checkpoint, shared with the explorer's tests) recorded as the model
    asset's materialisation, then lubeck_grid materialised with the tiny config in a real Dagster
    instance."""
    tmp = tmp_path_factory.mktemp("lubeck_grid")
    store = Store(tmp / "store").ensure()
    add_pgn(store, tmp, "games.pgn", first_games(fics_2022, 60, tmp / "src.pgn"))
    checkpoint = lubeck_checkpoint(tmp_path_factory, fics_2022)
    resources = {"store": StoreResource(root=str(store.root)), "stockfish": StockfishResource(workers=2)}
    with dg.instance_for_test() as instance:
        _record_lubeck(instance, checkpoint)
        yield store, _play(instance, resources, TINY)


def test_the_grid_has_a_cell_per_depth_time_and_start_kind(grid_run):
    store, result = grid_run
    assert result.success
    with memory_connection(store) as con:
        rows = con.sql(
            "SELECT suite, metric, value, n FROM evaluation_results "
            "WHERE asset = 'lubeck_grid' AND model = 'lubeck_wdl_mlp'"
        ).fetchall()
    cells = {(k, d, t) for k in ("quiet", "tactical") for d in (1, 2) for t in ("1s", "2s")}
    by_cell = {}
    for suite, metric, value, n in rows:
        _, kind, depth, t = suite.split("/")
        by_cell.setdefault((kind, int(depth.removeprefix("depth")), t), {})[metric] = (value, n)
    assert set(by_cell) == cells
    for figures in by_cell.values():
        score, n = figures["score"]
        assert n == 2 and score in (0.0, 0.25, 0.5, 0.75, 1.0)
        assert set(figures) == {"score", "score_low95", "score_high95", "elo_difference"}
        # the cell's interval, start positions resampled, holds its score
        assert figures["score_low95"][0] <= score <= figures["score_high95"][0]
    report = (store.root / "reports" / "lubeck_grid.md").read_text()
    assert report.count("| quiet |") == 4 and report.count("| tactical |") == 4
    assert (store.root / "reports" / "lubeck_grid.png").read_bytes()[:4] == b"\x89PNG"
    meta = result.asset_materializations_for_node("lubeck_grid")[0].metadata
    assert meta["cells"].value == 8 and meta["games"].value == 16
    assert set(meta["nodes_per_second"].value) == {"material_pst", "lubeck_wdl_mlp"}
    pgn = (store.root / "matches" / "lubeck_grid").glob("*.pgn")
    assert sum(p.read_text().count("[Event ") for p in pgn) == 16


def test_each_cell_plays_the_node_budgets_its_time_buys(grid_run):
    """The budgets each cell records are t x time_scale x the measured nodes/s of each evaluator
    (the metadata's nodes/s are rounded: within a node)."""
    store, result = grid_run
    nps = result.asset_materializations_for_node("lubeck_grid")[0].metadata["nodes_per_second"].value
    with memory_connection(store) as con:
        rows = con.sql(
            "SELECT suite, detail FROM evaluation_results WHERE asset = 'lubeck_grid' AND metric = 'score'"
        ).fetchall()
    assert len(rows) == 8
    for suite, detail in rows:
        seconds = float(suite.rsplit("/", 1)[1].removesuffix("s"))
        net, trad = re.search(r"budgets (\d+) / (\d+) nodes", detail).groups()
        assert abs(int(net) - node_budget(seconds, nps["lubeck_wdl_mlp"], TINY["time_scale"])) <= 1
        assert abs(int(trad) - node_budget(seconds, nps["material_pst"], TINY["time_scale"])) <= 1


def test_quiet_and_tactical_starts_meet_their_definition(grid_run, stockfish):
    """The start positions the asset played (its report's table) checked with the engine directly:
    python-chess's own UCI client for the search, Stockfish's `eval` for the static evaluation."""
    store, _ = grid_run
    cfg = GridConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in TINY.items()})
    report = (store.root / "reports" / "lubeck_grid.md").read_text()
    starts = {}
    for line in report.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 5 and cells[0].split(".")[0] in ("quiet", "tactical"):
            starts.setdefault(cells[0].split(".")[0], []).append(cells[1].strip("`"))
    assert {k: len(v) for k, v in starts.items()} == {"quiet": 1, "tactical": 1}
    engine = chess.engine.SimpleEngine.popen_uci(stockfish)
    try:
        engine.configure({"Threads": 1, "Hash": 16})
        for kind, fens in starts.items():
            for fen in fens:
                board = chess.Board(fen)
                assert not board.is_check()
                search = engine.analyse(board, chess.engine.Limit(depth=cfg.probe_depth), game=object())
                search_cp = search["score"].white().score()
                static = static_cp(stockfish, fen)
                assert search_cp is not None and abs(search_cp) <= cfg.max_eval_cp
                gap = abs(static - search_cp)
                if kind == "quiet":
                    assert gap <= cfg.quiet_max_gap_cp, (fen, static, search_cp)
                else:
                    assert gap >= cfg.tactical_min_gap_cp, (fen, static, search_cp)
    finally:
        engine.quit()


def _materialize(store: Store, config: dict, engine: StockfishResource, raise_on_error: bool = True):
    """lubeck_grid materialised on store with config, in a fresh Dagster instance (no model
    materialised in it)."""
    with dg.instance_for_test() as instance:
        return _play(
            instance, {"store": StoreResource(root=str(store.root)), "stockfish": engine}, config, raise_on_error
        )


def test_stockfish_as_the_challenger_needs_no_checkpoint_and_leaves_the_networks_report(tmp_path, stockfish, fics_2022):
    """challenger: stockfish_static plays Stockfish's own static evaluation against the
    traditional one: no model materialised, its rows under its own name, its own report; the
    network's report stays as it was."""
    store = Store(tmp_path / "store").ensure()
    add_pgn(store, tmp_path, "games.pgn", first_games(fics_2022, 60, tmp_path / "src.pgn"))
    networks = store.root / "reports" / "lubeck_grid.md"
    networks.parent.mkdir(parents=True, exist_ok=True)
    networks.write_text("the network's report\n")
    config = {**TINY, "depths": [1], "seconds": [1.0], "challenger": "stockfish_static"}
    result = _materialize(store, config, StockfishResource(workers=2))
    assert result.success
    with memory_connection(store) as con:
        rows = con.sql(
            "SELECT DISTINCT model, suite FROM evaluation_results WHERE asset = 'lubeck_grid_stockfish_static'"
        ).fetchall()
    assert sorted(rows) == [
        ("stockfish_static", "lubeck_grid/quiet/depth1/1s"),
        ("stockfish_static", "lubeck_grid/tactical/depth1/1s"),
    ]
    report = (store.root / "reports" / "lubeck_grid_stockfish_static.md").read_text()
    assert report.startswith("# Lubeck's experiment grid: stockfish_static against the traditional evaluation")
    assert "![score per cell](lubeck_grid_stockfish_static.png)" in report
    assert (store.root / "reports" / "lubeck_grid_stockfish_static.png").read_bytes()[:4] == b"\x89PNG"
    assert networks.read_text() == "the network's report\n"
    nps = result.asset_materializations_for_node("lubeck_grid")[0].metadata["nodes_per_second"].value
    assert set(nps) == {"material_pst", "stockfish_static"}
    assert nps["stockfish_static"] < nps["material_pst"]  # an engine round trip a position


def test_a_challenger_engine_that_dies_fails_the_run_with_one_line(tmp_path, stockfish, fics_2022):
    """Stockfish exiting in the middle of the challenger's searches: the run fails with the
    engine's fate in one line (no traceback as the message), and writes no report. The pool's
    engines (start positions, adjudication) ask for far fewer than 400 static evaluations each."""
    engine = faulty_stockfish(tmp_path, stockfish, "crash", 401)
    store = Store(tmp_path / "store").ensure()
    add_pgn(store, tmp_path, "games.pgn", first_games(fics_2022, 60, tmp_path / "src.pgn"))
    config = {**TINY, "depths": [2], "seconds": [1.0], "challenger": "stockfish_static"}
    result = _materialize(store, config, StockfishResource(path=engine, workers=2), raise_on_error=False)
    assert not result.success
    (failure,) = result.get_step_failure_events()
    failed = failure.step_failure_data.user_failure_data  # dg.Failure's: the UI shows its line, no stack
    assert failed is not None, failure.step_failure_data.error.message
    assert re.fullmatch(r"\S+/stockfish-crash-401 exited \(exit code 3\) before 'readyok'", failed.description)
    assert not (store.root / "reports" / "lubeck_grid_stockfish_static.md").exists()


def test_a_checkpoint_file_plays_in_place_of_the_model_asset_under_its_own_name(tmp_path_factory, stockfish, fics_2022):
    """checkpoint: FILE plays that file's network (here Lubeck's, trained outside Dagster) with no
    model materialised in the instance: its rows and report are named after the checkpoint's model,
    encoder and dataset and say which file played, and the model asset's report and rows stay."""
    tmp = tmp_path_factory.mktemp("grid_checkpoint")
    store = Store(tmp / "store").ensure()
    add_pgn(store, tmp, "games.pgn", first_games(fics_2022, 60, tmp / "src.pgn"))
    networks = store.root / "reports" / "lubeck_grid.md"
    networks.parent.mkdir(parents=True, exist_ok=True)
    networks.write_text("the model asset's report\n")
    earlier = ("lubeck_wdl_mlp", "lubeck_grid/quiet/depth1/1s", "score", 0.25, 2, "an earlier run of the model asset")
    write_results(store, "lubeck_grid", "earlier-run", [earlier])
    checkpoint = lubeck_checkpoint(tmp_path_factory, fics_2022)
    config = {**TINY, "depths": [1], "seconds": [1.0], "checkpoint": str(checkpoint)}
    result = _materialize(store, config, StockfishResource(workers=2))
    assert result.success
    name = "lubeck_bitmap768_lubeck_wdl"  # preset, encoder, dataset of tests.stores' checkpoint
    with memory_connection(store) as con:
        rows = con.sql("SELECT DISTINCT model, suite, asset FROM evaluation_results").fetchall()
    grid = f"lubeck_grid_{name}"
    assert sorted(rows) == [
        (name, "lubeck_grid/quiet/depth1/1s", grid),
        (name, "lubeck_grid/tactical/depth1/1s", grid),
        ("lubeck_wdl_mlp", "lubeck_grid/quiet/depth1/1s", "lubeck_grid"),
    ]
    report = (store.root / "reports" / f"{grid}.md").read_text()
    assert report.startswith(f"# Lubeck's experiment grid: {name} against the traditional evaluation")
    assert f"The challenger's checkpoint: `{checkpoint}`." in report
    meta = result.asset_materializations_for_node("lubeck_grid")[0].metadata
    assert meta["checkpoint"].value == str(checkpoint)
    assert networks.read_text() == "the model asset's report\n"
    pgn = next((store.root / "matches" / "lubeck_grid").glob("*.pgn")).read_text()
    assert pgn.count(f'"{name}') == 4  # 2 games, the challenger White in one and Black in the other

    # The same checkpoint again under a name of its own (as a network trained on more positions
    # would be): a report and rows of its own, the first checkpoint's left as they were.
    first = (store.root / "reports" / f"{grid}.md").read_text()
    first_rows = _asset_rows(store, grid)
    again = _materialize(store, {**config, "name": "round-3.mlp"}, StockfishResource(workers=2))
    assert again.success
    with memory_connection(store) as con:
        named = con.sql(
            "SELECT DISTINCT model, suite, asset FROM evaluation_results WHERE asset <> $a", params={"a": grid}
        )
        assert sorted(named.fetchall()) == [
            ("lubeck_wdl_mlp", "lubeck_grid/quiet/depth1/1s", "lubeck_grid"),
            ("round-3.mlp", "lubeck_grid/quiet/depth1/1s", "lubeck_grid_round-3.mlp"),
            ("round-3.mlp", "lubeck_grid/tactical/depth1/1s", "lubeck_grid_round-3.mlp"),
        ]
    assert _asset_rows(store, grid) == first_rows
    assert (store.root / "reports" / f"{grid}.md").read_text() == first
    report = (store.root / "reports" / "lubeck_grid_round-3.mlp.md").read_text()
    assert report.startswith("# Lubeck's experiment grid: round-3.mlp against the traditional evaluation")
    assert "![score per cell](lubeck_grid_round-3.mlp.png)" in report
    assert (store.root / "reports" / "lubeck_grid_round-3.mlp.png").stat().st_size > 0
    run_id = again.run_id
    assert (store.root / "matches" / "lubeck_grid" / f"{run_id}.pgn").read_text().count('"round-3.mlp') == 4


def test_a_model_asset_named_as_the_checkpoint_plays_its_latest_materialisation(tmp_path_factory, stockfish, fics_2022):
    """checkpoint: MODEL plays the checkpoint the model asset's latest materialisation recorded, as
    checkpoint: FILE plays a file (its rows under the checkpoint's model, encoder and dataset); a
    model asset not materialised yet fails the run in one line, before any game."""
    tmp = tmp_path_factory.mktemp("grid_model_asset")
    store = Store(tmp / "store").ensure()
    add_pgn(store, tmp, "games.pgn", first_games(fics_2022, 60, tmp / "src.pgn"))
    checkpoint = lubeck_checkpoint(tmp_path_factory, fics_2022)
    resources = {"store": StoreResource(root=str(store.root)), "stockfish": StockfishResource(workers=2)}
    config = {**TINY, "depths": [1], "seconds": [1.0]}
    with dg.instance_for_test() as instance:
        untrained = _play(instance, resources, {**config, "checkpoint": "mlp_search_regression"}, False)
        (failure,) = untrained.get_step_failure_events()
        failed = failure.step_failure_data.user_failure_data
        assert failed is not None and failed.description == (
            "model mlp_search_regression has not been materialised: train it first "
            "(chess-pipeline train mlp_search_regression)"
        )
        assert not (store.root / "matches").exists()
        _record_lubeck(instance, checkpoint)
        result = _play(instance, resources, {**config, "checkpoint": "lubeck_wdl_mlp"})
    assert result.asset_materializations_for_node("lubeck_grid")[0].metadata["checkpoint"].value == str(checkpoint)
    name = "lubeck_bitmap768_lubeck_wdl"  # the recorded checkpoint's preset, encoder and dataset
    assert {r[0] for r in _asset_rows(store, f"lubeck_grid_{name}")} == {name}


def _asset_rows(store: Store, asset: str) -> list[tuple]:
    with memory_connection(store) as con:
        return sorted(con.sql("SELECT * FROM evaluation_results WHERE asset = $a", params={"a": asset}).fetchall())


def _unplayable(tmp_path: Path, what: str, source: Path) -> Path:
    """A checkpoint file the grid cannot play: missing, not a torch file, a network's weights under
    a config of another shape, or DeepChess's comparator (an untrained one)."""
    path = tmp_path / "checkpoint.pt"
    if what == "not a checkpoint":
        path.write_text("a text file, not a torch checkpoint\n")
    elif what == "weights of another shape":
        ck = torch.load(source, weights_only=False)
        ck["config"]["hidden"] = [8]  # the weights are 256 wide
        ck["config"]["preset"]["hidden"] = [8]  # and the spec the run recorded says so too
        torch.save(ck, path)
    elif what == "deepchess":
        encoder = get_encoder("bitmap773")
        model = build_model(PRESETS["deepchess"], encoder.shape, 2)
        torch.save(
            {
                "config": {"model": "deepchess", "encoder": "bitmap773", "dataset": "deepchess"},
                "encoder": {"name": encoder.name, "version": encoder.version},
                "best_model": model.state_dict(),
                "model": {},
                "dataset": {"pov": "white"},
            },
            path,
        )
    return path


@pytest.mark.parametrize("what", ["missing", "not a checkpoint", "weights of another shape", "deepchess"])
def test_a_checkpoint_that_cannot_be_played_fails_the_run_with_one_line_before_any_game(
    tmp_path_factory, tmp_path, stockfish, fics_2022, what
):
    store = Store(tmp_path / "store").ensure()
    path = _unplayable(tmp_path, what, lubeck_checkpoint(tmp_path_factory, fics_2022))
    config = {**TINY, "checkpoint": str(path)}
    result = _materialize(store, config, StockfishResource(workers=1), raise_on_error=False)
    assert not result.success
    (failure,) = result.get_step_failure_events()
    failed = failure.step_failure_data.user_failure_data
    assert failed is not None, failure.step_failure_data.error.message
    expected = "is DeepChess's comparator" if what == "deepchess" else "cannot be played ("
    assert failed.description.startswith(f"checkpoint {path} {expected}")
    # one line, short but for the path it names (pytest's folders are deeper under xdist)
    assert "\n" not in failed.description and len(failed.description) - len(str(path)) < 450
    assert not (store.root / "matches").exists() and not (store.root / "reports").exists()


@pytest.mark.parametrize(
    "challenger, name, whose",
    [
        ({"checkpoint": "CHECKPOINT"}, "stockfish_static", "another challenger's"),
        ({"checkpoint": "CHECKPOINT"}, "lubeck_wdl_mlp", "a model asset's"),
        ({"challenger": "stockfish_static"}, "mlp_bitmap_3class", "a model asset's"),
    ],
)
def test_a_name_of_another_players_rows_fails_the_run_with_one_line_before_any_game(
    tmp_path_factory, tmp_path, stockfish, fics_2022, challenger, name, whose
):
    """A challenger named after Stockfish's or a model asset's rows would mix its rows and report
    with theirs (a model's evaluation report reads its rows by model name)."""
    store = Store(tmp_path / "store").ensure()
    if "checkpoint" in challenger:
        challenger = {"checkpoint": str(lubeck_checkpoint(tmp_path_factory, fics_2022))}
    result = _materialize(store, {**TINY, **challenger, "name": name}, StockfishResource(workers=1), False)
    assert not result.success
    (failure,) = result.get_step_failure_events()
    failed = failure.step_failure_data.user_failure_data
    assert failed is not None, failure.step_failure_data.error.message
    assert failed.description.startswith(f"name {name} is {whose}: its rows and report would be mixed")
    assert not (store.root / "matches").exists() and not (store.root / "reports").exists()
