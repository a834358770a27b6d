"""The explorer's web server: a thin FastAPI layer over explorer.queries and explorer.evaluations.

JSON under /api/ (the page calls it; so can anyone), the page itself from static/. Every error
is JSON `{"error": "..."}`: a 4xx for bad input (a FEN, move, model name, depth or game id that
cannot be used, an unknown path or method, an over-long URL or body) and a 404 for what the
store does not hold; never a traceback.

Served on loopback only, and guarded as such (`Guard`): a request naming any other Host (a
DNS-rebinding page) is refused, and every answer carries a Content-Security-Policy that lets
only the server's own script files run, so text from the store (players, dates, events) can
never act as markup. Store queries and network evaluations run in worker threads, at most one
per core at a time, so the page and its static files answer while a burst of queries runs."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from contextlib import asynccontextmanager
from importlib import resources
from pathlib import Path

import anyio
import chess
import duckdb
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from explorer import queries
from explorer.evaluations import (
    LiveSearches,
    Networks,
    TrainedModel,
    check_depth,
    piece_values,
    traditional_score,
)
from explorer.position import (
    InputError,
    NotFound,
    is_placement,
    parse_fen,
    parse_move,
    position_key,
    setup_board,
)
from pipeline.labels.uci import EngineNotFound
from pipeline.store import duck
from pipeline.store.store import Store

STATIC = Path(str(resources.files("explorer").joinpath("static")))
VENDOR_MISSING = (
    "the board library (cm-chessboard) is not installed in {path}: run `make install` "
    "(it installs Node/npm when missing and copies the board's files there)"
)


LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
"""Host names the server answers to (with any port): it listens on loopback only, and a page
elsewhere whose DNS name is rebound to 127.0.0.1 still sends its own name."""
MAX_URL = 8192
"""Longest path + query accepted (a FEN is 100 characters at most); longer is a 414."""
MAX_BODY = 64 * 1024
"""Largest request body accepted (a search request is under 200 bytes); larger is a 413."""
SERVER_OPTIONS = {"http": "h11", "h11_max_incomplete_event_size": 1 << 20}
"""How uvicorn serves the explorer (`chess-pipeline explore`): h11 reading up to 1 MiB of a
request's head, so an over-long URL reaches the app and gets its JSON 414 (httptools answers
one over 64 KiB itself, in plain text; over 1 MiB, h11 answers a plain-text 400 and closes
the connection, which a client still sending sees as a reset)."""
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; "
    "base-uri 'none'; frame-ancestors 'none'; form-action 'self'; "
    # cm-chessboard places the piece being dragged with a style attribute; no <style> element runs
    "style-src-attr 'unsafe-inline'"
)
"""Only the server's own files run or style the page: text from the store that reached the
page as markup could neither run script nor restyle it."""
SECURITY_HEADERS = [
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]


def vendor_dir(static: Path = STATIC) -> Path:
    return static / "vendor" / "cm-chessboard"


def host_allowed(host: str, allowed: tuple[str, ...] = LOOPBACK_HOSTS) -> bool:
    """Whether a Host header names one of `allowed`, with or without a port."""
    host = host.strip().lower()
    if host.startswith("["):
        name, sep, rest = host.partition("]")
        name, port = name + sep, rest
    else:
        name, _, port = host.partition(":")
        port = ":" + port if port else ""
    if port and not (port.startswith(":") and port[1:].isdigit() and 0 < int(port[1:]) < 65536):
        return False
    return name in allowed


class Guard:
    """ASGI middleware in front of the app: the Host check (421), URL and body bounds (414,
    413), HEAD answered as GET without the body, and the security headers on every answer."""

    def __init__(self, app, allowed_hosts: tuple[str, ...] = LOOPBACK_HOSTS):
        self.app = app
        self.allowed_hosts = allowed_hosts

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        head = scope["method"] == "HEAD"

        async def send_guarded(message):
            if message["type"] == "http.response.start":
                names = {k.lower() for k, _ in message.get("headers", [])}
                extra = [(k, v) for k, v in SECURITY_HEADERS if k not in names]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            elif head and message["type"] == "http.response.body":
                message = {**message, "body": b""}
            await send(message)

        headers = {k.lower(): v for k, v in scope["headers"]}
        host = headers.get(b"host", b"").decode("latin-1")
        url_length = len(scope.get("raw_path") or scope["path"].encode()) + len(scope.get("query_string", b""))
        length = headers.get(b"content-length", b"0").decode("latin-1")
        error = None
        if not host_allowed(host, self.allowed_hosts):
            names = ", ".join(self.allowed_hosts)
            error = (421, f"host {host[:60]!r} is not served here: open the page at one of {names} (with its port)")
        elif url_length > MAX_URL:
            error = (414, f"the URL is {url_length} bytes long; at most {MAX_URL} are accepted (a FEN is 100 at most)")
        elif not length.isdigit() or int(length) > MAX_BODY:
            error = (413, f"the request body is {length} bytes; at most {MAX_BODY} are accepted")
        if error is not None:
            return await JSONResponse({"error": error[1]}, status_code=error[0])(scope, receive, send_guarded)
        if head:
            scope = {**scope, "method": "GET"}
        await self.app(scope, receive, send_guarded)


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
    allowed_hosts: tuple[str, ...] = LOOPBACK_HOSTS,
    workers: int | None = None,
) -> Guard:
    """The explorer over `store`. `list_models` names the trained checkpoints (the CLI reads
    them from each model asset's latest materialisation); `stockfish` the engine for live
    searches (None: STOCKFISH_PATH, PATH, /usr/games/stockfish); `allowed_hosts` the Host
    names answered (loopback); `workers` how many store queries or evaluations run at once
    (None: one per core). The FastAPI app is the returned guard's `.app`."""
    connections = Connections(store)
    networks = Networks(list_models)
    searches = LiveSearches(stockfish)
    slots = workers or os.cpu_count() or 1
    limiter: list[anyio.CapacityLimiter] = []  # made in the event loop, on first use

    async def offload(fn: Callable[[], object]) -> JSONResponse:
        """fn() and its JSON encoding in a worker thread, at most `slots` at once: the event loop
        stays free for the page, its static files and requests that need no query."""
        if not limiter:
            limiter.append(anyio.CapacityLimiter(slots))
        return await anyio.to_thread.run_sync(lambda: JSONResponse(fn()), limiter=limiter[0])

    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        yield
        searches.close()
        connections.close()

    # No API docs page: FastAPI's loads its script from a CDN, which the page's policy forbids
    # (and a local page should not fetch). The schema is at /api/openapi.json.
    app = FastAPI(
        title="chess-pipeline explorer",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url="/api/openapi.json",
    )
    app.state.store = store
    app.state.networks = networks
    app.state.searches = searches

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, e: StarletteHTTPException):
        if e.status_code == 404 and e.detail == "Not Found":
            where = request.url.path[:80]
            message = f"no such page: {where}; the page is / and its API under /api/ (/api/openapi.json)"
        elif e.status_code == 405:
            allow = (e.headers or {}).get("Allow", "")
            message = f"{request.method} is not allowed on {request.url.path[:80]}; allowed: {allow or 'none'}"
        else:
            message = str(e.detail)
        return JSONResponse({"error": message}, status_code=e.status_code, headers=e.headers)

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
    async def api_position(fen: str | None = None, games: int = queries.GAMES_LISTED):
        """Games that reached the position, results by rating band, moves played from it
        (counts and scores), the strongest games (links to their PGN), and its legal moves.
        A bare piece placement (the FEN's first field) matches every position with those
        pieces on those squares, whoever is to move, with any castling or en-passant right."""
        board = parse_fen(fen)
        placement = is_placement(fen)
        if not 0 <= games <= queries.GAMES_MOST:
            raise InputError(f"games (how many games to list) must be from 0 to {queries.GAMES_MOST}, got {games}")

        def run():
            with connections.cursor() as con:
                out = queries.explore(con, board, games, placement_only=placement)
            out["legal_moves"] = _legal(board)
            out["status"] = _status(board)
            return out

        return await offload(run)

    @app.get("/api/store")
    async def api_store():
        """How many games the store holds, and what to run when it holds none."""

        def run():
            with connections.cursor() as con:
                return queries.store_summary(con)

        return await offload(run)

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
    async def api_evaluations(fen: str | None = None):
        """Every network's score (value networks, and piece-value networks' sums), the
        traditional evaluation and the stored Stockfish labels of the position (White's
        point of view, centipawns)."""
        board = parse_fen(fen)

        def run():
            with connections.cursor() as con:
                labels = queries.stored_labels(con, position_key(board))
            return {
                "fen": board.fen(),
                "networks": networks.scores(board),
                "networks_note": networks.note(),
                "traditional": None if board.is_game_over() else traditional_score(board),
                "stockfish": {
                    "stored": labels,
                    "note": None if labels else "not in the store's labels: start a live search (POST /api/search)",
                },
            }

        return await offload(run)

    @app.get("/api/piece_values")
    async def api_piece_values(fen: str | None = None, model: str | None = None):
        board = parse_fen(fen)
        return await offload(lambda: piece_values(board, networks, model))

    @app.post("/api/search", status_code=202)
    def api_search(request: SearchRequest):
        """Start a live Stockfish search of the position at `depth` in the background; poll its
        url. It supersedes every earlier search still queued or running (the engine stops it):
        the page wants the position it shows now."""
        board = parse_fen(request.fen)
        return searches.start(board, check_depth(request.depth))

    @app.delete("/api/search/{job_id}")
    def api_search_cancel(job_id: str):
        """Stop a search (queued or running); a finished one is left as it is."""
        return searches.cancel(job_id)

    @app.get("/api/search/{job_id}")
    def api_search_state(job_id: str):
        return searches.get(job_id)

    @app.get("/api/games/{game_id}")
    async def api_game(game_id: str):
        """A stored game: headers, moves (SAN, UCI, FEN after each) and its PGN's url."""
        gid = queries.parse_game_id(game_id)
        return await offload(lambda: _game(gid))

    def _game(gid: int) -> dict:
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
    async def api_game_evaluations(game_id: str):
        """The evaluation along a stored game, ply by ply (White's view, centipawns): the stored
        Stockfish label, the traditional evaluation and every value network."""
        gid = queries.parse_game_id(game_id)
        return await offload(lambda: _game_evaluations(gid))

    def _game_evaluations(gid: int) -> dict:
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
            from pipeline.play.search import MaterialEvaluator

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
    async def index():
        if not (vendor_dir(static) / "Chessboard.js").is_file():
            return PlainTextResponse(VENDOR_MISSING.format(path=vendor_dir(static)), status_code=503)
        return FileResponse(static / "index.html")

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon():
        return Response(status_code=204)

    app.mount("/static", StaticFiles(directory=static, check_dir=False), name="static")
    return Guard(app, allowed_hosts)


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
