"""The explorer's JSON API against real stores: the counts against SQL over the games table
(an independent path: move text, not the positions table), every bad input a 4xx with one
clear message, the store untouched, live searches in the background, stored labels and
trained networks' scores."""

import io
import os
import time
from pathlib import Path

import chess
import chess.pgn
import pytest
from fastapi.testclient import TestClient

from explorer.app import create_app
from explorer.evaluations import TrainedModel
from explorer.position import position_key
from pipeline.store import duck

START = chess.STARTING_FEN


def sql(store, text, params=None):
    """Facts from SQL over the store's views, in a session of its own (in memory: the app under
    test holds the store's DuckDB file open read-only with its configuration locked, and DuckDB
    shares one database per file within a process)."""
    with duck.memory_connection(store) as con:
        return con.sql(text, params=params or {}).to_arrow_table().to_pylist()


@pytest.fixture(scope="module")
def client(explorer_store):
    with TestClient(create_app(explorer_store), base_url="http://127.0.0.1") as c:
        yield c


def test_start_position_counts_every_game_and_its_first_moves(client, explorer_store):
    r = client.get("/api/position", params={"fen": START})
    assert r.status_code == 200
    p = r.json()
    [games] = sql(explorer_store, "SELECT count(*) AS n FROM games WHERE start_fen IS NULL")
    assert games["n"] > 2000
    assert p["games"] == games["n"]
    # Each move's count and results (the game's outcome: board, terminator, else tag), from the
    # games' move text (not the positions table).
    first = sql(
        explorer_store,
        "SELECT split_part(moves_uci, ' ', 1) AS move, count(*) AS games, "
        "count(*) FILTER (WHERE outcome = '1-0') AS w, count(*) FILTER (WHERE outcome = '1/2-1/2') AS d, "
        "count(*) FILTER (WHERE outcome = '0-1') AS b "
        "FROM games WHERE start_fen IS NULL AND ply_count > 0 GROUP BY 1",
    )
    expected = {r["move"]: (r["games"], r["w"], r["d"], r["b"]) for r in first}
    got = {m["uci"]: (m["games"], m["white_wins"], m["draws"], m["black_wins"]) for m in p["moves"]}
    assert got == expected
    assert [m["games"] for m in p["moves"]] == sorted((m["games"] for m in p["moves"]), reverse=True)
    e4 = next(m for m in p["moves"] if m["uci"] == "e2e4")
    assert e4["san"] == "e4"
    assert e4["score"] == pytest.approx(100 * (e4["white_wins"] + e4["draws"] / 2) / e4["games"], abs=0.05)
    # Rating bands partition the games; the band of each game from its players' average Elo.
    assert sum(b["games"] for b in p["rating_bands"]) == p["games"]
    [band] = sql(
        explorer_store,
        "SELECT count(*) AS n FROM games WHERE start_fen IS NULL AND (white_elo + black_elo) / 2.0 >= 2200 "
        "AND (white_elo + black_elo) / 2.0 < 2400",
    )
    assert next(b for b in p["rating_bands"] if b["band"] == "2200-2399")["games"] == band["n"]
    assert len(p["legal_moves"]) == 20


def test_a_position_two_plies_in_counts_the_games_that_opened_so(client, explorer_store):
    board = chess.Board()
    board.push_san("e4")
    board.push_san("c5")
    p = client.get("/api/position", params={"fen": board.fen()}).json()
    [n] = sql(explorer_store, "SELECT count(*) AS n FROM games WHERE moves_uci LIKE 'e2e4 c7c5%'")
    assert n["n"] > 0 and p["games"] == n["n"]
    # The listed games reached it (their PGN's first two moves) and link to their PGN.
    assert p["top_games"]
    elos = [g["white_elo"] + g["black_elo"] for g in p["top_games"] if g["white_elo"] and g["black_elo"]]
    assert elos == sorted(elos, reverse=True)
    g = p["top_games"][0]
    pgn = client.get(g["pgn_url"])
    assert pgn.status_code == 200
    game = chess.pgn.read_game(io.StringIO(pgn.text))
    assert [m.uci() for m in game.mainline_moves()][:2] == ["e2e4", "c7c5"]
    [row] = sql(
        explorer_store, "SELECT white, black, moves_uci FROM games WHERE game_id = $id", {"id": int(g["game_id"])}
    )
    assert (game.headers["White"], game.headers["Black"]) == (row["white"], row["black"])
    assert " ".join(m.uci() for m in game.mainline_moves()) == row["moves_uci"]


def test_en_passant_positions_are_found_as_ingest_keyed_them(client, explorer_store):
    """The store keeps an en-passant square only where a pawn could take (polyglot's rule): a
    FEN naming one no pawn can use must still find its games, and one a pawn can use too."""
    rows = sql(
        explorer_store,
        "SELECT p.game_id, p.ply, p.ep_square, g.moves_uci FROM positions p JOIN games g USING (game_id) "
        "WHERE p.ep_square IS NOT NULL ORDER BY p.game_id, p.ply LIMIT 5",
    )
    assert rows
    for r in rows:
        board = chess.Board()
        for uci in r["moves_uci"].split()[: r["ply"]]:
            board.push_uci(uci)
        assert board.ep_square == r["ep_square"]
        assert client.get("/api/position", params={"fen": board.fen(en_passant="fen")}).json()["games"] >= 1
    # After 1.e4 python-chess's FEN names e3 (no black pawn can take): the same position as "-".
    board = chess.Board()
    board.push_san("e4")
    assert position_key(board).ep is None
    a = client.get("/api/position", params={"fen": board.fen(en_passant="fen")}).json()["games"]
    b = client.get("/api/position", params={"fen": board.fen()}).json()["games"]
    assert a == b > 0


@pytest.mark.parametrize(
    "path,params,status,words",
    [
        ("/api/position", {}, 400, "fen is missing"),
        ("/api/position", {"fen": "not a fen"}, 400, "not a FEN"),
        ("/api/position", {"fen": "8/8/8/8/8/8/8/8 w - - 0 1"}, 400, "not a legal position: no white king"),
        ("/api/position", {"fen": "k7/8/8/8/8/8/8/K6R b - - 0 1" + " " * 3 + "x" * 200}, 400, "at most"),
        ("/api/position", {"fen": START, "games": "many"}, 422, "games:"),
        ("/api/position", {"fen": START, "games": "5000"}, 400, "from 0 to 200"),
        ("/api/move", {"fen": START, "move": "e2e5"}, 400, "not a legal move"),
        ("/api/move", {"fen": START, "move": "Qxh7"}, 400, "legal: "),
        ("/api/move", {"fen": START}, 400, "move is missing"),
        ("/api/piece_values", {"fen": START, "model": "no_such_model"}, 400, "no piece-value model 'no_such_model'"),
        ("/api/evaluations", {"fen": "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR x KQkq - 0 1"}, 400, "not a FEN"),
        ("/api/setup", {"placement": "8/8/8/8/8/8/8/K6k", "turn": "white"}, 400, "turn must be one of w, b"),
        ("/api/setup", {"placement": "8/8/8/8/8/8/8/K6k", "castling": "KX"}, 400, "subset of KQkq"),
        ("/api/setup", {"placement": "8/8/8/8/8/8/8/KK5k"}, 400, "too many kings"),
        ("/api/games/abc", {}, 400, "game id must be an integer"),
        ("/api/games/99999999999999999999999", {}, 400, "out of range"),
        ("/api/games/123/pgn", {}, 404, "no game 123"),
        ("/api/games/123/evaluations", {}, 404, "no game 123"),
        ("/api/search/nope", {}, 404, "no search"),
    ],
)
def test_bad_input_is_a_4xx_with_one_clear_line(client, path, params, status, words):
    r = client.get(path, params=params)
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert words in error
    assert "\n" not in error and "Traceback" not in error


@pytest.mark.parametrize(
    "body,words",
    [
        ({"fen": START, "depth": 0}, "depth must be from 1 to 30, got 0"),
        ({"fen": START, "depth": 31}, "depth must be from 1 to 30, got 31"),
        ({"fen": START, "depth": "deep"}, "depth: Input should be a valid integer"),
        ({"depth": 5}, "fen: Field required"),
        ({"fen": "rnb w", "depth": 5}, "not a FEN"),
        ({"fen": "7k/5QQ1/8/8/8/8/8/K7 b - - 0 1", "depth": 5}, "the game is over"),
    ],
)
def test_bad_search_requests_are_refused(client, body, words):
    r = client.post("/api/search", json=body)
    assert 400 <= r.status_code < 500, r.text
    assert words in r.json()["error"]


def test_the_page_never_writes_to_the_store(explorer_store, client):
    def snapshot():
        out = {}
        for dirpath, _dirs, files in os.walk(explorer_store.root):
            for f in files:
                p = Path(dirpath) / f
                st = p.stat()
                out[str(p)] = (st.st_size, st.st_mtime_ns)
        return out

    before = snapshot()
    board = chess.Board()
    for san in ("d4", "Nf6", "c4"):
        client.get("/api/position", params={"fen": board.fen()})
        client.get("/api/evaluations", params={"fen": board.fen()})
        client.get("/api/piece_values", params={"fen": board.fen()})
        board.push_san(san)
    gid = client.get("/api/position", params={"fen": START}).json()["top_games"][0]["game_id"]
    client.get(f"/api/games/{gid}")
    client.get(f"/api/games/{gid}/pgn")
    client.get(f"/api/games/{gid}/evaluations")
    assert snapshot() == before


def test_piece_values_are_material_until_a_network_is_trained(client):
    r = client.get("/api/piece_values", params={"fen": START}).json()
    assert r["source"] == "material" and "no piece-value network is trained" in r["note"]
    assert r["totals"] == {"white": 39.0, "black": 39.0}
    assert {p["square"]: p["value"] for p in r["pieces"]}["d1"] == 9.0
    after = client.get(
        "/api/piece_values", params={"fen": "rnb1kbnr/pppp1ppp/8/4p3/6Pq/5P2/PPPPP2P/RNBQKBNR w KQkq - 1 3"}
    )
    assert after.json()["totals"] == {"white": 39.0, "black": 39.0}
    taken = client.get(
        "/api/piece_values", params={"fen": "rnb1kbnr/pppp1ppp/8/4p3/6P1/5P2/PPPPP2P/RNBQKBNR w KQkq - 0 3"}
    )
    assert taken.json()["totals"] == {"white": 39.0, "black": 30.0}


def test_a_game_from_the_store_with_its_moves_and_evaluation_series(client, explorer_store):
    gid = client.get("/api/position", params={"fen": START}).json()["top_games"][0]["game_id"]
    assert isinstance(gid, str)  # 64-bit ids as text: JavaScript numbers would round them
    g = client.get(f"/api/games/{gid}").json()
    assert g["game_id"] == gid
    [row] = sql(explorer_store, "SELECT ply_count, moves_uci FROM games WHERE game_id = $id", {"id": int(gid)})
    assert [m["uci"] for m in g["moves"]] == row["moves_uci"].split()
    ev = client.get(f"/api/games/{gid}/evaluations").json()
    assert ev["plies"] == row["ply_count"]
    assert len(ev["series"]["traditional"]) == len(ev["series"]["stockfish"]) == row["ply_count"] + 1
    assert ev["series"]["traditional"][0] == 0.0  # the start is symmetric
    assert all(v is None for v in ev["series"]["stockfish"])  # this store has no labels


def test_live_search_runs_in_the_background(client, stockfish):
    board = chess.Board("r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3")
    t = time.monotonic()
    r = client.post("/api/search", json={"fen": board.fen(), "depth": 14})
    assert r.status_code == 202 and time.monotonic() - t < 1.0
    state = r.json()
    assert state["status"] in ("queued", "running")
    # The same search asked again is the same search.
    assert client.post("/api/search", json={"fen": board.fen(), "depth": 14}).json()["id"] == state["id"]
    # Other requests are answered while it runs.
    assert client.get("/api/move", params={"fen": board.fen(), "move": "Bb5"}).status_code == 200
    deadline = time.monotonic() + 120
    while state["status"] in ("queued", "running") and time.monotonic() < deadline:
        time.sleep(0.1)
        state = client.get(state["url"]).json()
    assert state["status"] == "done", state
    res = state["result"]
    assert res["engine"].startswith("Stockfish") and res["depth"] <= 14
    assert chess.Move.from_uci(res["best_move"]) in board.legal_moves
    assert abs(res["score"]) < 300


@pytest.fixture(scope="module")
def labelled(tmp_path_factory, stockfish, fics_2022):
    """The first 16 games of a FICS archive labelled at depth 8, and a 3-class network
    (Lubeck's WDL MLP, White's point of view) trained one epoch on the same 16 games' results
    (tests.stores' lubeck_checkpoint, shared with the lubeck_grid asset's tests: not written to)."""
    from tests.stores import first_games, labelled_store, lubeck_checkpoint

    tmp = tmp_path_factory.mktemp("explorer_labelled")
    store = labelled_store(tmp, first_games(fics_2022, 16, tmp / "src.pgn"), stockfish)
    duck.create_views(store)
    checkpoint = lubeck_checkpoint(tmp_path_factory, fics_2022)
    return store, TrainedModel("lubeck_wdl_mlp", checkpoint, "lubeck_wdl", "lubeck")


@pytest.fixture(scope="module")
def piece_net(labelled) -> TrainedModel:
    """A piece-value network (Team 44's, centipawn target) trained for one epoch on the labelled store."""
    from pipeline.datasets.datasets import SplitConfig, build_dataset
    from training.train import TrainConfig, train

    store, _ = labelled
    build_dataset(store, "piece_values", {}, split=SplitConfig(seed=0, val_fraction=0.2, test_fraction=0.2))
    r = train(
        TrainConfig(
            store=str(store.root),
            dataset="piece_values",
            model="piece_value_cp",
            encoder="pieces837",
            epochs=1,
            pretrain_epochs=1,
            out=str(store.root.parent / "pieces"),
        )
    )
    return TrainedModel("piece_value_net", Path(r.checkpoint), "piece_values", "piece_value_cp")


def test_stored_labels_and_trained_networks_score_the_position(labelled):
    from training.evaluator import NetworkEvaluator

    store, model = labelled
    [row] = sql(
        store,
        "SELECT g.game_id, g.moves_uci, b.score, b.depth FROM games g JOIN positions p USING (game_id) "
        "JOIN best_labels b USING (position_key, planes, side_to_move, castling) "
        "WHERE p.ply = 9 AND b.ep_square IS NOT DISTINCT FROM p.ep_square ORDER BY g.game_id LIMIT 1",
    )
    board = chess.Board()
    for uci in row["moves_uci"].split()[:9]:
        board.push_uci(uci)
    assert not board.turn  # Black to move: the White's-view sign matters
    with TestClient(create_app(store, lambda: [model]), base_url="http://127.0.0.1") as c:
        assert [m["name"] for m in c.get("/api/models").json()["value_networks"]] == ["lubeck_wdl_mlp"]
        ev = c.get("/api/evaluations", params={"fen": board.fen()}).json()
        [label] = ev["stockfish"]["stored"]
        assert (label["score"], label["depth"], label["limit_kind"], label["limit_value"]) == (
            row["score"],
            row["depth"],
            "depth",
            8,
        )
        assert label["setting"] == "depth 8"
        [net] = ev["networks"]
        side_to_move = float(NetworkEvaluator(model.checkpoint).evaluate([board])[0])
        assert net["model"] == "lubeck_wdl_mlp" and net["score"] == pytest.approx(-side_to_move, abs=0.06)
        # The game's chart: the stored label and the network at the same ply as above.
        chart = c.get(f"/api/games/{row['game_id']}/evaluations").json()
        assert chart["series"]["stockfish"][9] == row["score"]
        assert chart["series"]["lubeck_wdl_mlp"][9] == pytest.approx(net["score"], abs=0.06)
        assert chart["stockfish_settings"] and not chart["errors"]
        # A model that is not a piece-value network is not offered as one.
        assert (
            "no piece-value model"
            in c.get("/api/piece_values", params={"fen": START, "model": model.name}).json()["error"]
        )


def test_trained_models_follow_each_model_assets_latest_materialisation(tmp_path):
    import dagster as dg

    from cli.explore import trained_models

    old, new = tmp_path / "old.pt", tmp_path / "new.pt"
    old.write_bytes(b"x")
    new.write_bytes(b"y")
    with dg.instance_for_test() as instance:
        for path in (old, new):
            instance.report_runless_asset_event(
                dg.AssetMaterialization(
                    "mlp_bitmap_3class",
                    metadata={
                        "checkpoint": dg.MetadataValue.path(str(path)),
                        "dataset": "sabatelli_3class",
                        "model": "mlp3",
                    },
                )
            )
        instance.report_runless_asset_event(dg.AssetMaterialization("games", metadata={"rows": 3}))
        gone = tmp_path / "gone.pt"
        instance.report_runless_asset_event(
            dg.AssetMaterialization("cnn_bitmap_3class", metadata={"checkpoint": dg.MetadataValue.path(str(gone))})
        )
        assert trained_models(instance) == [TrainedModel("mlp_bitmap_3class", new, "sabatelli_3class", "mlp3")]


def test_piece_values_come_from_a_trained_piece_value_network(labelled, piece_net):
    from training.piece_values import piece_values as network_values

    store, value_net = labelled
    pieces = piece_net
    fen = "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3"
    with TestClient(create_app(store, lambda: [value_net, pieces]), base_url="http://127.0.0.1") as c:
        assert [m["name"] for m in c.get("/api/models").json()["piece_value_networks"]] == ["piece_value_net"]
        r = c.get("/api/piece_values", params={"fen": fen}).json()  # the trained one is the default
        assert r["source"] == "network" and r["model"] == "piece_value_net" and "pawns" in r["note"]
        expected = network_values(fen, pieces.checkpoint)
        got = {p["square"]: p["value"] for p in r["pieces"]}
        assert got.keys() == expected.keys() and len(got) == 32
        assert all(got[k] == pytest.approx(expected[k], abs=0.006) for k in got)
        white = sum(v for k, v in expected.items() if chess.Board(fen).color_at(chess.parse_square(k)))
        assert r["totals"]["white"] == pytest.approx(white, abs=0.2)
        assert c.get("/api/piece_values", params={"fen": fen, "model": "piece_value_net"}).json() == r
        # The piece-value network scores the position too: White's values minus Black's, in
        # centipawns, beside the value network (no "none trained" note once one is).
        ev = c.get("/api/evaluations", params={"fen": fen}).json()
        assert ev["networks_note"] is None
        row = next(n for n in ev["networks"] if n["model"] == "piece_value_net")
        diff = sum(v if chess.Board(fen).color_at(chess.parse_square(k)) else -v for k, v in expected.items())
        assert row["kind"] == "piece_values" and row["score"] == pytest.approx(100 * diff, abs=0.6)
        # The value network is not a piece-value network.
        bad = c.get("/api/piece_values", params={"fen": fen, "model": "lubeck_wdl_mlp"})
        assert bad.status_code == 400 and "trained piece-value models: piece_value_net" in bad.json()["error"]


def test_without_the_board_library_the_page_says_to_run_make_install(explorer_store, tmp_path):
    import shutil

    from explorer.app import STATIC

    static = tmp_path / "static"
    shutil.copytree(STATIC, static, ignore=shutil.ignore_patterns("vendor"))
    with TestClient(create_app(explorer_store, static=static), base_url="http://127.0.0.1") as c:
        r = c.get("/")
        assert r.status_code == 503 and "run `make install`" in r.text
        assert c.get("/api/fen", params={"fen": START}).status_code == 200  # the API works without it


def test_live_search_without_an_engine_or_with_one_that_crashes(explorer_store, tmp_path, stockfish):
    fen = "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3"
    with TestClient(
        create_app(explorer_store, stockfish=str(tmp_path / "no-stockfish")), base_url="http://127.0.0.1"
    ) as c:
        r = c.post("/api/search", json={"fen": fen, "depth": 5})
        assert r.status_code == 503 and "does not exist" in r.json()["error"]
    # The real engine, killed by its wrapper as soon as it is asked to search.
    crash = tmp_path / "crashing-stockfish"
    crash.write_text(
        "#!/usr/bin/env python3\n"
        "import subprocess, sys\n"
        f"p = subprocess.Popen([{stockfish!r}], stdin=subprocess.PIPE, stdout=sys.stdout, text=True, bufsize=1)\n"
        "for line in sys.stdin:\n"
        "    if line.startswith('go'):\n"
        "        p.kill(); sys.exit(3)\n"
        "    p.stdin.write(line); p.stdin.flush()\n"
    )
    crash.chmod(0o755)
    with TestClient(create_app(explorer_store, stockfish=str(crash)), base_url="http://127.0.0.1") as c:
        state = c.post("/api/search", json={"fen": fen, "depth": 5}).json()
        deadline = time.monotonic() + 120
        while state["status"] in ("queued", "running") and time.monotonic() < deadline:
            time.sleep(0.2)
            state = c.get(state["url"]).json()
        assert state["status"] == "failed" and state["error"], state
        # The page goes on: the next request is answered.
        assert c.get("/api/fen", params={"fen": fen}).status_code == 200


def test_a_replaced_checkpoint_leaves_one_cached_evaluator(labelled, tmp_path):
    # The page runs for days while models are retrained: each new version of a checkpoint replaces
    # the evaluator of the old one, so the cache holds one entry per checkpoint, not one per version.
    import shutil

    from explorer.evaluations import Networks

    _, model = labelled
    path = tmp_path / "model.pt"
    shutil.copyfile(model.checkpoint, path)
    mine = TrainedModel(model.name, path, model.dataset, model.preset)
    networks = Networks(lambda: [mine])
    first = networks.evaluator(mine)
    assert networks.evaluator(mine) is first  # unchanged: loaded once
    for step in (1, 2, 3):
        stat = path.stat()
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + step * 1_000_000_000))  # a new version
        newer = networks.evaluator(mine)
        assert newer is not first
        first = newer
    assert len(networks._evaluators) == 1


def test_a_bare_placement_matches_the_pieces_whoever_is_to_move(client, explorer_store):
    """The placement alone (a FEN's first field) is every position with those pieces there:
    the start placement is reached by every game of the store, and after 1.e4 by the games
    that opened so, as the full FEN (Black to move) finds them."""
    [n] = sql(explorer_store, "SELECT count(*) AS n FROM games")
    p = client.get("/api/position", params={"fen": START.split()[0]}).json()
    assert p["games"] == n["n"] > 2000 and p["match"] == "placement"
    assert {m["uci"] for m in p["moves"]} >= {"e2e4", "d2d4"}
    board = chess.Board()
    board.push_san("e4")
    full = client.get("/api/position", params={"fen": board.fen()}).json()
    bare = client.get("/api/position", params={"fen": board.board_fen()}).json()
    [e4] = sql(explorer_store, "SELECT count(*) AS n FROM games WHERE moves_uci LIKE 'e2e4%'")
    assert full["match"] == "position" and full["games"] == bare["games"] == e4["n"] > 0
    # Black's replies keep their SAN and their score is Black's.
    c5 = next(m for m in bare["moves"] if m["uci"] == "c7c5")
    assert c5["san"] == "c5"
    assert c5["score"] == pytest.approx(100 * (c5["black_wins"] + c5["draws"] / 2) / c5["games"], abs=0.05)


def test_the_notes_name_the_commands_to_run(client):
    ev = client.get("/api/evaluations", params={"fen": START}).json()
    assert ev["networks"] == [] and "`chess-pipeline train`" in ev["networks_note"]
    pv = client.get("/api/piece_values", params={"fen": START}).json()
    assert "`chess-pipeline train piece_value_net`" in pv["note"] and ".py" not in pv["note"]


def test_a_new_search_supersedes_the_one_running(client, stockfish):
    """A depth-30 search (minutes) is running when the page asks for another position: the old
    one is stopped at once and the new one answers within seconds, not after it."""
    deep = client.post(
        "/api/search", json={"fen": "r1bq1rk1/pp2bppp/2n1pn2/2pp4/2PP4/2N1PN2/PP2BPPP/R1BQ1RK1 w - - 0 8", "depth": 30}
    ).json()
    deadline = time.monotonic() + 30
    while client.get(deep["url"]).json()["status"] == "queued" and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    assert client.get(deep["url"]).json()["status"] == "running"
    t = time.monotonic()
    quick = client.post("/api/search", json={"fen": START, "depth": 6}).json()
    old = client.get(deep["url"]).json()
    assert old["status"] == "stopped" and "superseded" in old["error"]
    state = quick
    while state["status"] in ("queued", "running") and time.monotonic() - t < 60:
        time.sleep(0.05)
        state = client.get(quick["url"]).json()
    assert state["status"] == "done" and state["result"]["depth"] <= 6, state
    assert time.monotonic() - t < 10
    # And a search the page cancels (DELETE) stops too; asking for it again starts it afresh.
    again = client.post("/api/search", json={"fen": deep["fen"], "depth": 30}).json()
    assert again["id"] != deep["id"]
    stopped = client.delete(again["url"]).json()
    assert stopped["status"] == "stopped" and "page's request" in stopped["error"]
    assert client.get(again["url"]).json()["status"] == "stopped"
