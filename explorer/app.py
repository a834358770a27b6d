"""The explorer's web server: a thin FastAPI layer over explorer.queries and explorer.evaluations.

JSON under /api/ (the page calls it; so can anyone), the page itself from static/. Errors are
JSON `{"error": "..."}` with a 4xx for bad input (a FEN, move, model name, depth or game id
that cannot be used) and a 404 for what the store does not hold; never a traceback."""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import asynccontextmanager
from importlib import resources
from pathlib import Path

import chess
import duckdb
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel

from explorer import queries
from explorer.evaluations import (
    LiveSearches,
    Networks,
    TrainedModel,
    check_depth,
    piece_values,
    traditional_score,
)
from explorer.position import InputError, NotFound, parse_fen, parse_move, position_key, setup_board
from pipeline import duck
from pipeline.engine import EngineNotFound
from pipeline.store import Store

STATIC = Path(str(resources.files("explorer").joinpath("static")))
VENDOR_MISSING = (
    "the board library (cm-chessboard) is not installed in {path}: run `make install` "
    "(it installs Node/npm when missing and copies the board's files there)"
)


def vendor_dir(static: Path = STATIC) -> Path:
    return static / "vendor" / "cm-chessboard"


class SearchRequest(BaseModel):
    fen: str
    depth: int = 12


class Connections:
    """One read-only connection to the store's DuckDB file (views refreshed when opened), and
    a cursor of it per request thread (DuckDB cursors are independent connections to one database)."""

    def __init__(self, store: Store):
        self.store = store
        self._con: duckdb.DuckDBPyConnection | None = None
        self._lock = threading.Lock()

    def cursor(self) -> duckdb.DuckDBPyConnection:
        with self._lock:
            if self._con is None:
                self._con = duck.read_only_connection(self.store)
            return self._con.cursor()

    def close(self) -> None:
        with self._lock:
            if self._con is not None:
                self._con.close()
                self._con = None


def create_app(
    store: Store,
    list_models: Callable[[], list[TrainedModel]] = list,
    stockfish: str | None = None,
    static: Path = STATIC,
) -> FastAPI:
    """The explorer over `store`. `list_models` names the trained checkpoints (the CLI reads
    them from each model asset's latest materialisation); `stockfish` the engine for live
    searches (None: STOCKFISH_PATH, PATH, /usr/games/stockfish)."""
    connections = Connections(store)
    networks = Networks(list_models)
    searches = LiveSearches(stockfish)

    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        yield
        searches.close()
        connections.close()

    app = FastAPI(title="chess-pipeline explorer", lifespan=lifespan, docs_url="/api/docs", redoc_url=None)
    app.state.store = store
    app.state.networks = networks
    app.state.searches = searches

    @app.exception_handler(InputError)
    async def _bad_input(_request: Request, e: InputError):
        return JSONResponse({"error": str(e)}, status_code=400)

    @app.exception_handler(NotFound)
    async def _not_found(_request: Request, e: NotFound):
        return JSONResponse({"error": str(e.args[0]) if e.args else "not found"}, status_code=404)

    @app.exception_handler(EngineNotFound)
    async def _no_engine(_request: Request, e: EngineNotFound):
        return JSONResponse({"error": str(e)}, status_code=503)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, e: RequestValidationError):
        parts = []
        for err in e.errors():
            where = ".".join(str(x) for x in err.get("loc", ()) if x not in ("query", "body", "path"))
            parts.append(f"{where or 'request'}: {err.get('msg', 'invalid')}")
        return JSONResponse({"error": "; ".join(parts)}, status_code=422)

    @app.exception_handler(duckdb.Error)
    async def _store_error(_request: Request, e: duckdb.Error):
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        return JSONResponse(
            {"error": f"the store could not be read: {first}; check it with chess-pipeline sql"}, status_code=503
        )

    # API ---------------------------------------------------------------------------------

    @app.get("/api/position")
    def api_position(fen: str | None = None, games: int = queries.GAMES_LISTED):
        """Games that reached the position, results by rating band, moves played from it
        (counts and scores), the strongest games (links to their PGN), and its legal moves."""
        board = parse_fen(fen)
        if not 0 <= games <= 200:
            raise InputError(f"games (how many games to list) must be from 0 to 200, got {games}")
        with connections.cursor() as con:
            out = queries.explore(con, board, games)
        out["legal_moves"] = _legal(board)
        out["status"] = _status(board)
        return out

    @app.get("/api/fen")
    def api_fen(fen: str | None = None):
        """The FEN checked (a legal position) and written out in full."""
        board = parse_fen(fen)
        return {"fen": board.fen(), "status": _status(board)}

    @app.get("/api/move")
    def api_move(fen: str | None = None, move: str | None = None):
        """The position after a legal move (UCI or SAN) of `fen`; 400 naming the legal moves otherwise."""
        board = parse_fen(fen)
        m = parse_move(board, move)
        san = board.san(m)
        board.push(m)
        return {"uci": m.uci(), "san": san, "fen": board.fen(), "status": _status(board)}

    @app.get("/api/setup")
    def api_setup(placement: str | None = None, turn: str = "w", castling: str = "-"):
        """A FEN from a free set-up (piece placement, side to move, castling), checked to be legal."""
        if not placement:
            raise InputError("placement is missing: send the FEN's piece placement, e.g. 8/8/8/8/8/8/8/K6k")
        board, notes = setup_board(placement, turn, castling)
        return {"fen": board.fen(), "notes": notes, "status": _status(board)}

    @app.get("/api/models")
    def api_models():
        return {
            "value_networks": [_model_dict(m) for m in networks.value_networks()],
            "piece_value_networks": [_model_dict(m) for m in networks.piece_networks()],
        }

    @app.get("/api/evaluations")
    def api_evaluations(fen: str | None = None):
        """Every value network's score, the traditional evaluation and the stored Stockfish
        labels of the position (White's point of view, centipawns)."""
        board = parse_fen(fen)
        with connections.cursor() as con:
            labels = queries.stored_labels(con, position_key(board))
        return {
            "fen": board.fen(),
            "networks": networks.scores(board),
            "traditional": None if board.is_game_over() else traditional_score(board),
            "stockfish": {
                "stored": labels,
                "note": None if labels else "not in the store's labels: start a live search (POST /api/search)",
            },
        }

    @app.get("/api/piece_values")
    def api_piece_values(fen: str | None = None, model: str | None = None):
        return piece_values(parse_fen(fen), networks, model)

    @app.post("/api/search", status_code=202)
    def api_search(request: SearchRequest):
        """Start a live Stockfish search of the position at `depth` in the background; poll its url."""
        board = parse_fen(request.fen)
        return searches.start(board, check_depth(request.depth))

    @app.get("/api/search/{job_id}")
    def api_search_state(job_id: str):
        return searches.get(job_id)

    @app.get("/api/games/{game_id}")
    def api_game(game_id: str):
        """A stored game: headers, moves (SAN, UCI, FEN after each) and its PGN's url."""
        gid = queries.parse_game_id(game_id)
        with connections.cursor() as con:
            game = queries.stored_game(con, gid)
        r = game.row
        headers = {k: r[k] for k in ("white", "black", "white_elo", "black_elo", "result", "date", "event", "eco")}
        return {
            "game_id": str(r["game_id"]),  # text: 64-bit integers lose digits as JavaScript numbers
            "archive": r["archive"],
            "start_fen": game.board.fen(),
            **headers,
            "moves": game.moves(),
            "pgn_url": f"/api/games/{r['game_id']}/pgn",
            "evaluations_url": f"/api/games/{r['game_id']}/evaluations",
        }

    @app.get("/api/games/{game_id}/pgn", response_class=PlainTextResponse)
    def api_game_pgn(game_id: str):
        gid = queries.parse_game_id(game_id)
        with connections.cursor() as con:
            game = queries.stored_game(con, gid)
        return PlainTextResponse(
            game.pgn(),
            media_type="application/x-chess-pgn",
            headers={"Content-Disposition": f'inline; filename="game-{gid}.pgn"'},
        )

    @app.get("/api/games/{game_id}/evaluations")
    def api_game_evaluations(game_id: str):
        """The evaluation along a stored game, ply by ply (White's view, centipawns): the stored
        Stockfish label, the traditional evaluation and every value network."""
        gid = queries.parse_game_id(game_id)
        with connections.cursor() as con:
            game = queries.stored_game(con, gid)
            labels = {r["ply"]: r for r in queries.game_labels(con, gid)}
        boards = game.boards()
        playing = [i for i, b in enumerate(boards) if not b.is_game_over()]
        series = {
            "stockfish": [labels.get(i, {}).get("score") for i in range(len(boards))],
            "traditional": [None] * len(boards),
        }
        scored = [boards[i] for i in playing]
        if scored:
            from pipeline.search import MaterialEvaluator

            trad = MaterialEvaluator().evaluate(scored)
            for j, i in enumerate(playing):
                series["traditional"][i] = round(float(trad[j] if boards[i].turn else -trad[j]), 1)
        errors = {}
        for m in networks.value_networks():
            values: list[float | None] = [None] * len(boards)
            try:
                if scored:
                    out = networks.evaluator(m).evaluate(scored)
                    for j, i in enumerate(playing):
                        values[i] = round(float(out[j] if boards[i].turn else -out[j]), 1)
            except Exception as e:  # shown beside the chart, not a 500
                errors[m.name] = f"{type(e).__name__}: {e}"
            series[m.name] = values
        settings = sorted(
            {f"{r['engine']} {r['limit_kind']} {r['limit_value']}" for r in labels.values() if r["engine"]}
        )
        return {
            "game_id": str(gid),
            "plies": len(boards) - 1,
            "series": series,
            "stockfish_settings": settings,
            "errors": errors,
        }

    # The page ----------------------------------------------------------------------------

    @app.get("/", include_in_schema=False)
    def index():
        if not (vendor_dir(static) / "Chessboard.js").is_file():
            return PlainTextResponse(VENDOR_MISSING.format(path=vendor_dir(static)), status_code=503)
        return FileResponse(static / "index.html")

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon():
        return Response(status_code=204)

    app.mount("/static", StaticFiles(directory=static, check_dir=False), name="static")
    return app


def _model_dict(m: TrainedModel) -> dict:
    return {"name": m.name, "dataset": m.dataset, "preset": m.preset, "checkpoint": str(m.checkpoint)}


def _legal(board: chess.Board) -> list[dict]:
    out = []
    for m in board.legal_moves:
        out.append(
            {
                "uci": m.uci(),
                "san": board.san(m),
                "from": chess.square_name(m.from_square),
                "to": chess.square_name(m.to_square),
            }
        )
    return out


def _status(board: chess.Board) -> str:
    if board.is_checkmate():
        return "checkmate"
    if board.is_stalemate():
        return "stalemate"
    if board.is_insufficient_material():
        return "insufficient material"
    if board.is_check():
        return "check"
    return "playing"
