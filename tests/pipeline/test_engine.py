"""The engine pool against direct engine calls, hand-checked mates, and real faults."""

import io
import os
import signal
import threading
import time

import chess
import chess.engine
import chess.pgn
import pytest

from pipeline.ingest.archive import open_archive
from pipeline.labels.engine import STALEMATE_FEN, UciEngine
from pipeline.labels.pool import EnginePool
from pipeline.labels.uci import (
    MATE_SCORE,
    Evaluation,
    Failure,
    Job,
    Limit,
    MalformedOutput,
    board_from_fen,
    check_label,
    parse_info,
)


def _job(i, fen):
    return Job(i, fen, fen.split()[1] == "w")


def _fics_fens(path, games=3, every=3):
    """Positions of the first games of a real FICS archive (clocks reset, as labels use)."""
    fens = []
    with open_archive(path) as raw, io.TextIOWrapper(raw, encoding="utf-8", errors="replace") as f:
        for _ in range(games):
            game = chess.pgn.read_game(f)
            board = game.board()
            for i, move in enumerate(game.mainline_moves()):
                board.push(move)
                if i % every == 0:
                    board.halfmove_clock, board.fullmove_number = 0, 1
                    fens.append(board.fen())
    return fens


def _label_all(pool, jobs, limit):
    results = list(pool.run(jobs, limit))
    by_id = {}
    for r in results:
        assert r.job.id not in by_id, f"position {r.job.id} came back twice"
        by_id[r.job.id] = r
    assert set(by_id) == {j.id for j in jobs}, "a position was lost"
    return by_id


def test_pool_scores_equal_python_chess_analyse_from_a_cleared_hash(stockfish, fics_2022):
    fens = _fics_fens(fics_2022)
    assert len(fens) > 40
    jobs = [_job(i, f) for i, f in enumerate(fens)]
    with EnginePool(stockfish, workers=2, clear_hash=True) as pool:
        ours = _label_all(pool, jobs, Limit("depth", 8))
    # The independent reference: python-chess's own UCI client; a new `game` object per call
    # makes it send ucinewgame, so each search starts from a cleared hash as ours did.
    with chess.engine.SimpleEngine.popen_uci(stockfish) as engine:
        for job in jobs:
            info = engine.analyse(chess.Board(job.fen), chess.engine.Limit(depth=8), game=object())
            r = ours[job.id]
            assert isinstance(r, Evaluation)
            score = info["score"].white()
            assert (r.cp, r.mate) == (score.score(), score.mate()), job.fen
            assert r.best_move == info["pv"][0].uci()
            assert r.pv == " ".join(m.uci() for m in info["pv"])
            assert (r.depth, r.nodes) == (info["depth"], info["nodes"])


def test_hash_kept_setting_stays_close_to_fresh_labels(stockfish, fics_2022):
    """With clear_hash=False the hash carries over: labels may differ a little, never wildly."""
    fens = _fics_fens(fics_2022, games=2)
    jobs = [_job(i, f) for i, f in enumerate(fens)]
    with EnginePool(stockfish, workers=1) as pool:
        cleared = _label_all(pool, jobs, Limit("depth", 8))
    with EnginePool(stockfish, workers=1, clear_hash=False) as pool:
        kept = _label_all(pool, jobs, Limit("depth", 8))
    diffs = [
        abs(kept[j.id].score - cleared[j.id].score)
        for j in jobs
        if kept[j.id].cp is not None and cleared[j.id].cp is not None
    ]
    assert len(diffs) > len(jobs) * 0.9
    assert sorted(diffs)[len(diffs) // 2] <= 30, diffs


MATES = [
    # (FEN, cp, mate, score): White's point of view, checked by hand.
    ("6k1/5ppp/8/8/8/8/5PPP/3R2K1 w - - 0 1", None, 1, MATE_SCORE - 1),  # White: Rd8#
    ("rnbqkbnr/pppp1ppp/8/4p3/6P1/5P2/PPPPP2P/RNBQKBNR b KQkq - 0 2", None, -1, -(MATE_SCORE - 1)),  # Qh4#
    ("7k/8/5QK1/8/8/8/8/8 b - - 0 1", None, 1, MATE_SCORE - 2),  # Black to move, mated next move
    ("7k/6Q1/6K1/8/8/8/8/8 b - - 0 1", None, 0, MATE_SCORE),  # Black is checkmated
    ("rnb1kbnr/pppp1ppp/8/4p3/6Pq/5P2/PPPPP2P/RNBQKBNR w KQkq - 1 3", None, 0, -MATE_SCORE),  # White is mated
    ("7k/5Q2/6K1/8/8/8/8/8 b - - 0 1", 0, None, 0),  # stalemate
]


@pytest.mark.parametrize("fen,cp,mate,score", MATES)
def test_mate_scores_are_signed_from_whites_point_of_view(stockfish, fen, cp, mate, score):
    with EnginePool(stockfish, workers=1) as pool:
        (r,) = pool.run([_job(0, fen)], Limit("depth", 8))
    assert (r.cp, r.mate, r.score) == (cp, mate, score)
    board = chess.Board(fen)
    if board.is_game_over():
        assert r.best_move is None and r.depth == 0
    else:
        assert chess.Move.from_uci(r.best_move) in board.legal_moves


def test_static_evaluation_and_its_failure_in_check(stockfish):
    quiet = "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 0 1"
    check = "7k/8/5QK1/8/8/8/8/8 b - - 0 1"
    with EnginePool(stockfish, workers=1) as pool:
        out = {r.job.id: r for r in pool.run([_job("quiet", quiet), _job("check", check)], Limit("static"))}
    assert isinstance(out["quiet"], Evaluation) and out["quiet"].depth == 0 and abs(out["quiet"].cp) < 150
    assert isinstance(out["check"], Failure) and "in check" in out["check"].reason
    # The same figure as Stockfish's own `eval` output, read here without our parser.
    engine = UciEngine(stockfish).start()
    try:
        engine.send(f"position fen {quiet}\neval\nisready\n".encode())
        final = [ln for ln in engine.lines_until(b"readyok", 10) if ln.startswith(b"Final evaluation")]
    finally:
        engine.close()
    assert out["quiet"].cp == round(float(final[0].split()[2]) * 100)


def test_parse_info_rejects_malformed_numbers_and_score_kinds():
    for line in (
        b"info depth 8 score cp notanumber nodes 10 pv e2e4",
        b"info depth 8 score cp",
        b"info depth x score cp 10",
        b"info depth 8 score wdl 10 pv e2e4",
    ):
        with pytest.raises(MalformedOutput, match="malformed engine output"):
            parse_info(line)


START = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1"


def test_board_from_fen_is_python_chess_board(fics_2022):
    fens = _fics_fens(fics_2022, games=20, every=1) + [
        "rnbqkbnr/ppp1p1pp/8/3pPp2/8/8/PPPP1PPP/RNBQKBNR w KQkq f6 0 1",  # en passant
        "r3k2r/8/8/8/8/8/8/R3K2R b Kq - 0 1",
        "4k3/8/8/8/8/8/8/4K3 w - - 0 1",
        STALEMATE_FEN,
    ]
    assert len(fens) > 500
    for fen in fens:
        ours, theirs = board_from_fen(fen), chess.Board(fen)
        assert ours == theirs and ours.fen() == fen
        assert list(ours.legal_moves) == list(theirs.legal_moves)


@pytest.mark.parametrize(
    "fields,why",
    [
        ({}, None),
        ({"best_move": "e7e5", "pv": "e7e5"}, "best move e7e5 illegal in the position"),
        ({"pv": "e2e4 e7e5 e4e5"}, "PV move 3 e4e5 illegal"),
        ({"pv": "e2e4 zz99"}, "PV move 2 'zz99' is not a UCI move"),
        ({"cp": 30000, "score": 30000}, "cp 30000 out of range (|cp| < 30000)"),
        ({"cp": None, "mate": 251, "score": 31499}, "mate 251 out of range (|mate| <= 250)"),
        ({"cp": None, "mate": 0, "score": 32000}, "mate 0 (checkmated) with a best move"),
        ({"depth": 0}, "depth 0 for a search"),
        ({"depth": 9}, "depth 9 past the limit depth 8"),
        ({"best_move": None, "pv": None, "depth": 0}, "no best move in a position with legal moves"),
    ],
)
def test_check_label_against_python_chess(fields, why):
    base = dict(
        job=_job(0, START),
        cp=30,
        mate=None,
        score=30,
        best_move="e2e4",
        pv="e2e4 e7e5 g1f3",
        depth=8,
        seldepth=10,
        nodes=1000,
        time_ms=1,
        attempts=1,
    )
    assert check_label(Evaluation(**{**base, **fields}), Limit("depth", 8)) == why


def test_parse_info_reads_bounds_and_pv():
    info = parse_info(
        b"info depth 12 seldepth 18 multipv 1 score cp -35 upperbound nodes 5123 nps 1 time 9 pv e7e5 g1f3"
    )
    assert info == {
        "depth": 12,
        "seldepth": 18,
        "cp": -35,
        "bound": "upperbound",
        "nodes": 5123,
        "time": 9,
        "pv": "e7e5 g1f3",
    }


def test_killed_engine_is_restarted_and_no_position_is_lost_or_repeated(stockfish, fics_2022):
    fens = _fics_fens(fics_2022, games=2, every=1)[:80]
    jobs = [_job(i, f) for i, f in enumerate(fens)]
    killed = []
    with EnginePool(stockfish, workers=2) as pool:
        results = []
        for r in pool.run(jobs, Limit("depth", 10)):
            results.append(r)
            if len(results) == 10:
                victim = pool.pids[0]
                os.kill(victim, signal.SIGKILL)
                killed.append(victim)
        assert pool.restarts >= 1 and killed[0] not in pool.pids
    assert sorted(r.job.id for r in results) == [j.id for j in jobs]
    assert all(isinstance(r, Evaluation) for r in results)


def test_hung_engine_is_killed_restarted_and_its_position_retried(stockfish):
    """SIGSTOP freezes the engine: it neither finishes nor answers `stop`."""
    fens = [
        "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 0 1",
        "rnbqkb1r/pppp1ppp/5n2/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 0 1",
        "rnbqkbnr/pp1ppppp/8/2p5/4P3/8/PPPP1PPP/RNBQKBNR w KQkq - 0 1",
    ]
    jobs = [_job(i, f) for i, f in enumerate(fens)]
    with EnginePool(stockfish, workers=1, timeout_s=1.0, pipeline=1) as pool:
        frozen = pool.pids[0]
        os.kill(frozen, signal.SIGSTOP)
        start = time.monotonic()
        results = list(pool.run(jobs, Limit("depth", 8)))
        assert pool.restarts == 1 and frozen not in pool.pids
    assert time.monotonic() - start < 10
    assert sorted(r.job.id for r in results) == [0, 1, 2]
    assert all(isinstance(r, Evaluation) and r.attempts == (2 if r.job.id == 0 else 1) for r in results)


def test_position_that_times_out_every_try_is_a_failure_with_the_reason(stockfish):
    deep = "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 0 1"
    with EnginePool(stockfish, workers=1, timeout_s=0.2, retries=1) as pool:
        (r,) = pool.run([_job(0, deep)], Limit("depth", 60))
        assert pool.restarts == 0  # it answered `stop` each time: alive, no restart
    assert isinstance(r, Failure) and r.attempts == 2
    assert r.reason == "no result within 0.2s; 2 tries"


def test_crash_on_every_try_is_a_failure(stockfish):
    """An engine killed during each try of one position: after the retries it is recorded."""
    fen = "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 0 1"
    with EnginePool(stockfish, workers=1, retries=2) as pool:
        stop = threading.Event()
        slot = pool.slots[0]

        def killer():
            # Kill only while a search is in flight (never during the restart's handshake).
            while not stop.is_set():
                proc = slot.engine.proc
                if slot.inflight and proc is not None and proc.poll() is None:
                    try:
                        proc.kill()
                    except ProcessLookupError:
                        pass
                time.sleep(0.02)

        t = threading.Thread(target=killer)
        t.start()
        try:
            (r,) = pool.run([_job(0, fen)], Limit("depth", 40))
        finally:
            stop.set()
            t.join()
    assert isinstance(r, Failure) and r.attempts == 3 and r.reason.startswith("engine crashed (killed by signal 9)")


def test_a_stockfish_path_the_user_named_is_never_replaced_by_another_engine(tmp_path, stockfish):
    from pipeline.labels.uci import EngineNotFound, find_stockfish

    with pytest.raises(EngineNotFound, match="does not exist.*STOCKFISH_PATH"):
        find_stockfish(environ={"STOCKFISH_PATH": str(tmp_path / "nowhere"), "PATH": "/usr/games:/usr/bin"})
    text = tmp_path / "stockfish"
    text.write_text("not a program")
    with pytest.raises(EngineNotFound, match="not executable"):
        find_stockfish(str(text), environ={})
    assert find_stockfish(environ={"STOCKFISH_PATH": stockfish}) == stockfish


def test_a_negative_number_of_engines_is_refused_in_one_line_before_any_starts():
    with pytest.raises(ValueError, match=r"^workers is 0 \(one per usable core\) or a number of processes, got -1$"):
        EnginePool("/no/engine/needed", workers=-1)
