"""The explorer's questions to the store: plain functions over a read-only DuckDB connection.

Every query is a file in sql/queries/ (explorer_*.sql) with its values bound as parameters;
the connection is the store's DuckDB file opened read-only with its configuration locked
(`pipeline.store.duck.read_only_connection`), so nothing here can write to the store."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import chess
import chess.pgn
import duckdb

from explorer.position import InputError, NotFound, PositionKey, placement_keys, position_key
from pipeline.ingest.book import BOOK_ELO_STEP, BOOK_TOP
from pipeline.store.duck import load_sql

GAMES_LISTED = BOOK_TOP
"""Games listed (with links to their PGN) for a position: as many as a position book keeps."""
GAMES_MOST = 200
"""The most games /api/position lists (beyond GAMES_LISTED from the positions rows, not the book)."""


@dataclass(frozen=True)
class RatingBands:
    """Bands of the players' average Elo: [lowest, lowest + width), ... up to [highest, ...)."""

    width: int = 200
    lowest: int = 1200
    """Averages below this fall in this band (it reads "< lowest + width")."""
    highest: int = 2400

    def __post_init__(self) -> None:
        if self.width % BOOK_ELO_STEP or self.lowest % BOOK_ELO_STEP or self.highest % BOOK_ELO_STEP:
            raise ValueError(
                f"rating bands ({self.width}, {self.lowest}, {self.highest}) must be multiples of "
                f"pipeline.ingest.book.BOOK_ELO_STEP ({BOOK_ELO_STEP}): position books keep Elo rounded to it"
            )

    def params(self) -> dict:
        return {"width": self.width, "lowest": self.lowest, "highest": self.highest}

    def label(self, band: str) -> str:
        if band in ("all", "unrated"):
            return band
        lo = int(band)
        if lo <= self.lowest:
            return f"< {self.lowest + self.width}"
        if lo >= self.highest:
            return f"{self.highest}+"
        return f"{lo}-{lo + self.width - 1}"


BANDS = RatingBands()


@cache
def _sql(name: str) -> str:
    return load_sql(f"queries/{name}")


def _rows(con: duckdb.DuckDBPyConnection, name: str, params: dict) -> list[dict]:
    rel = con.execute(_sql(name), params)
    cols = [d[0] for d in rel.description]
    return [dict(zip(cols, row)) for row in rel.fetchall()]


def _score(white: int, draws: int, black: int, white_to_move: bool) -> float | None:
    """Points per game for the side to move, in percent (a win 1, a draw 1/2)."""
    n = white + draws + black
    if not n:
        return None
    won = white if white_to_move else black
    return round(100.0 * (won + 0.5 * draws) / n, 1)


INGEST_HINT = "the store holds no games yet: run `chess-pipeline ingest PATH` (a .pgn, .pgn.bz2, .pgn.zst or a folder)"


def store_summary(con: duckdb.DuckDBPyConnection) -> dict:
    """How many games the store holds, with what to run when it holds none."""
    n = con.execute("SELECT count(*) FROM games").fetchone()[0]
    return {"games": n, "note": None if n else INGEST_HINT}


def position_params(
    board: chess.Board,
    games_listed: int = GAMES_LISTED,
    placement_only: bool = False,
    books: list[str] | None = None,
) -> dict:
    """The bound parameters of sql/queries/explorer_position.sql for `board`; books: the
    part files whose position book has it (book_parts()), whose figures come from the book."""
    pk = position_key(board)
    params = {**pk.params(), "keys": placement_keys(board) if placement_only else [pk.key]}
    del params["key"]
    return {
        **params,
        "placement_only": placement_only,
        "book_parts": [] if placement_only else list(books or []),
        "elo_step": BOOK_ELO_STEP,
        **BANDS.params(),
        "limit": games_listed,
    }


def book_parts(con: duckdb.DuckDBPyConnection, board: chess.Board) -> list[str]:
    """The part files (`<archive>/data.parquet`, ...) whose position book holds `board` (the
    full position), sorted."""
    return [r["part"] for r in _rows(con, "explorer_book_parts", position_key(board).params())]


def explore(
    con: duckdb.DuckDBPyConnection, board: chess.Board, games_listed: int = GAMES_LISTED, placement_only: bool = False
) -> dict:
    """Everything the store's games say about `board`: how many games reached it, results by
    rating band, the moves played from it (counts, results, score for the mover) and the
    strongest games that reached it (links to their PGN). One scan of positions.
    placement_only: every position with `board`'s pieces on their squares (either side to
    move, any castling or en-passant right); a move's SAN is then as if `board`'s side moved."""
    pk = position_key(board)
    books = [] if placement_only or games_listed > BOOK_TOP else book_parts(con, board)
    row = _rows(con, "explorer_position", position_params(board, games_listed, placement_only, books))[0]
    bands = row["bands"] or []
    empty = {"games": 0, "white_wins": 0, "draws": 0, "black_wins": 0}
    total = bands[0] if bands and bands[0]["band"] is None else empty
    moves = []
    for m in row["moves"] or []:
        move = chess.Move.from_uci(m["move_uci"])
        mover = board.color_at(move.from_square)  # the side to move, or with a bare placement either
        played = board.copy(stack=False)
        if placement_only and mover is not None:  # any castling right the placement allows
            played.turn, played.castling_rights, played.ep_square = mover, chess.BB_CORNERS, None
            played.castling_rights = played.clean_castling_rights()
        san = played.san(move) if played.is_legal(move) else m["move_uci"]
        results = {k: m[k] for k in ("white_wins", "draws", "black_wins")}
        moves.append(
            {
                "uci": m["move_uci"],
                "san": san,
                "games": m["games"],
                **results,
                "score": _score(*results.values(), board.turn if mover is None else mover),
                "average_elo": m["average_elo"],
            }
        )
    top = row["games"] or []
    headers = {g["game_id"]: g for g in _rows(con, "explorer_top_games", {"game_ids": [t["game_id"] for t in top]})}
    # game ids as text: 64-bit integers lose digits as JavaScript numbers
    games = [
        {
            **headers[t["game_id"]],
            "ply": t["ply"],
            "game_id": str(t["game_id"]),
            "pgn_url": f"/api/games/{t['game_id']}/pgn",
            "game_url": f"/api/games/{t['game_id']}",
        }
        for t in top
    ]
    return {
        "fen": board.fen(),
        "match": "placement" if placement_only else "position",
        "position_key": f"{pk.key:016x}",
        "games": total["games"],
        "results": {k: total[k] for k in ("white_wins", "draws", "black_wins")},
        "score": _score(total["white_wins"], total["draws"], total["black_wins"], board.turn),
        "rating_bands": [
            {"band": BANDS.label(b["band"]), **{k: b[k] for k in ("games", "white_wins", "draws", "black_wins")}}
            for b in bands
            if b["band"] is not None
        ],
        "moves": moves,
        "top_games": games,
    }


def stored_labels(con: duckdb.DuckDBPyConnection, pk: PositionKey) -> list[dict]:
    """The store's Stockfish labels of a position, the best of each setting, best first
    (scores White's point of view)."""
    out = []
    for r in _rows(con, "explorer_labels", pk.params()):
        setting = "static" if r["limit_kind"] == "static" else f"{r['limit_kind']} {r['limit_value']}"
        out.append(
            {
                "engine": r["engine"],
                "setting": setting + ("" if r["hash_cleared"] is not False else ", hash kept"),
                "limit_kind": r["limit_kind"],
                "limit_value": r["limit_value"],
                "depth": r["depth"],
                "cp": r["cp"],
                "mate": r["mate"],
                "score": r["score"],
                "best_move": r["best_move"],
                "pv": r["pv"],
                "labelled_at": r["labelled_at"].isoformat() if r["labelled_at"] is not None else None,
            }
        )
    return out


@dataclass(frozen=True)
class StoredGame:
    row: dict

    @property
    def board(self) -> chess.Board:
        return chess.Board(self.row["start_fen"]) if self.row["start_fen"] else chess.Board()

    def boards(self) -> list[chess.Board]:
        """The position before every ply and the final one (ply 0 .. N)."""
        board = self.board
        out = [board.copy(stack=False)]
        for uci in (self.row["moves_uci"] or "").split():
            board.push(chess.Move.from_uci(uci))
            out.append(board.copy(stack=False))
        return out

    def moves(self) -> list[dict]:
        board = self.board
        out = []
        for uci in (self.row["moves_uci"] or "").split():
            move = chess.Move.from_uci(uci)
            san = board.san(move)
            board.push(move)
            out.append({"uci": uci, "san": san, "fen": board.fen()})
        return out

    def pgn(self) -> str:
        """The game as PGN: the seven tags, every other header the store kept, the mainline."""
        r = self.row
        game = chess.pgn.Game()
        game.headers.clear()
        tags = {
            "Event": r["event"],
            "Site": r["site"],
            "Date": r["date"],
            "Round": r["round"],
            "White": r["white"],
            "Black": r["black"],
            "Result": r["result"] or "*",
            "TimeControl": r["time_control"],
            "Termination": r["termination"],
            "ECO": r["eco"],
        }
        for k, v in tags.items():
            if v is not None:
                game.headers[k] = str(v)
        for k, v in _pairs(r["extra_headers"]):
            game.headers.setdefault(k, v)
        if r["start_fen"]:
            game.setup(chess.Board(r["start_fen"]))
        node = game
        for uci in (r["moves_uci"] or "").split():
            node = node.add_variation(chess.Move.from_uci(uci))
        return str(game) + "\n"


def _pairs(extra) -> list[tuple[str, str]]:
    if extra is None:
        return []
    if isinstance(extra, dict):
        return list(extra.items())
    return [(k, v) for k, v in extra]


def stored_game(con: duckdb.DuckDBPyConnection, game_id: int) -> StoredGame:
    rows = _rows(con, "explorer_game", {"game_id": game_id})
    if not rows:
        raise NotFound(f"no game {game_id} in the store: take a game_id from /api/position's top_games")
    return StoredGame(rows[0])


def game_labels(con: duckdb.DuckDBPyConnection, game_id: int) -> list[dict]:
    """The best stored label of each of a game's positions, by ply (None where unlabelled)."""
    return _rows(con, "explorer_game_labels", {"game_id": game_id})


def parse_game_id(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise InputError(f"game id must be an integer (a game_id from the store), got {text[:30]!r}") from None
    if not -(2**63) <= value < 2**63:
        raise InputError(f"game id {text[:30]} is out of range for a 64-bit game_id")
    return value
