"""Every Parquet table of the store: where it lives, its columns, their types and meaning.

The one place a table's Arrow schema is declared: the writers (pipeline/ingest/games.py,
labels.py, datasets.py, evaluation.py, matches.py) build their tables with these schemas,
and pipeline/store/duck.py writes one zero-row `_schema.parquet` per table from them so the views
bind before anything is written. docs/STORE.md is the store contract for people: its
column tables are rendered from TABLES (`python -m pipeline.store.schemas docs/STORE.md` rewrites
them; tests/pipeline/test_schemas.py fails while the document and the schemas differ).

Column meanings are kept beside the schemas, not as Arrow field metadata: field metadata
travels into the Arrow schema every Parquet file embeds, so it would change the bytes of
every file the pipeline writes (re-materialising a partition must give identical files).
This module imports pyarrow only, so any module may import it (no import cycles).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

UTC_TIME = pa.timestamp("us", tz="UTC")


@dataclass(frozen=True)
class Column:
    name: str
    type: pa.DataType
    meaning: str
    """One line: what the value is, its unit or its values."""


@dataclass(frozen=True)
class Table:
    name: str
    """The table's folder under the store root, and the name of its DuckDB view."""
    files: str
    """Where its Parquet files are, relative to the store root."""
    meaning: str
    columns: tuple[Column, ...]

    @property
    def schema(self) -> pa.Schema:
        return pa.schema([(c.name, c.type) for c in self.columns])

    @property
    def meanings(self) -> dict[str, str]:
        return {c.name: c.meaning for c in self.columns}


def _columns(*rows: tuple[str, pa.DataType, str]) -> tuple[Column, ...]:
    return tuple(Column(*row) for row in rows)


# The distinct position a label is for (a Zobrist collision never shares a label), and the
# setting that labelled it: labels and label_failures both start with these.
_POSITION_IDENTITY = _columns(
    ("position_key", pa.uint64(), "polyglot Zobrist key of the position"),
    ("planes", pa.binary(96), "12 little-endian uint64 bitboards, P N B R Q K p n b r q k"),
    ("side_to_move", pa.string(), "'w' or 'b'"),
    ("castling", pa.uint8(), "castling rights as bits: K=1 Q=2 k=4 q=8"),
    (
        "ep_square",
        pa.int8(),
        "en passant square 0..63, only when a pawn of the side to move stands beside the "
        "double-stepped pawn (as polyglot); else NULL",
    ),
)
_LABEL_SETTING = _columns(
    ("fen", pa.string(), "the FEN the engine searched (halfmove clock 0)"),
    ("engine", pa.string(), "the engine's `id name`, e.g. Stockfish 15.1"),
    ("limit_kind", pa.string(), "depth, nodes or static (Stockfish's `eval`, no search)"),
    ("limit_value", pa.int32(), "the depth or node limit; 0 for static"),
)

GAMES = Table(
    "games",
    "games/archive=<key>/data[-0001...].parquet",
    "one row per game that replayed",
    _columns(
        ("game_id", pa.int64(), "stable 63-bit id: a hash of the archive key and game_index"),
        ("archive", pa.string(), "the archive's partition key"),
        ("game_index", pa.int32(), "the game's place in its archive, from 0"),
        ("source", pa.string(), "fics, lichess, ccrl, selfplay or other (from the headers)"),
        ("event", pa.string(), "Event tag"),
        ("site", pa.string(), "Site tag"),
        ("date", pa.string(), "Date tag, as written"),
        ("round", pa.string(), "Round tag"),
        ("white", pa.string(), "White tag"),
        ("black", pa.string(), "Black tag"),
        ("white_elo", pa.int32(), "WhiteElo as an integer; NULL when missing or not a number"),
        ("black_elo", pa.int32(), "BlackElo as an integer; NULL when missing or not a number"),
        ("result", pa.string(), "Result tag, as written"),
        ("time_control", pa.string(), 'TimeControl tag; CCRL\'s "CCRL 40/15" in Event becomes 40/900'),
        ("termination", pa.string(), "Termination tag"),
        ("eco", pa.string(), "ECO tag"),
        ("ply_count", pa.int32(), "plies of the mainline"),
        ("moves_uci", pa.string(), "the mainline's moves in UCI, space-separated"),
        ("start_fen", pa.string(), "the FEN tag of a set-up game; NULL without one"),
        ("result_movetext", pa.string(), "the movetext's terminator (1-0, 0-1, 1/2-1/2, *); NULL without one"),
        (
            "result_board",
            pa.string(),
            "the result the final board decides (checkmate, stalemate, insufficient material); else NULL",
        ),
        ("result_mismatch", pa.bool_(), "board, terminator and Result tag disagree"),
        ("outcome", pa.string(), "1-0, 0-1 or 1/2-1/2 from the board, else the terminator, else the tag; else *"),
        ("extra_headers", pa.map_(pa.string(), pa.string()), "every other header, name to value"),
    ),
)

REJECTED_GAMES = Table(
    "rejected_games",
    "rejected_games/archive=<key>/data[-0001...].parquet",
    "games that could not be replayed; every game of an archive is in exactly one of games and rejected_games",
    _columns(
        ("archive", pa.string(), "the archive's partition key"),
        ("game_index", pa.int32(), "the game's place in its archive, from 0"),
        (
            "reason_code",
            pa.string(),
            "illegal_move, ambiguous_move, unparsable_move, unsupported_move, bad_fen, "
            "variant, truncated or binary_data",
        ),
        ("reason", pa.string(), "what was wrong, in words"),
        ("ply", pa.int32(), "the ply where replay stopped; NULL when not a move's fault"),
        ("excerpt", pa.string(), "the game's first 600 characters (a NUL shown as \u2400)"),
    ),
)

POSITIONS = Table(
    "positions",
    "positions/archive=<key>/data[-0001...].parquet",
    "one row per mainline position, ply 0 (the start) to N (the final position); FEN derived on demand",
    _POSITION_IDENTITY[:1]
    + _columns(
        ("game_id", pa.int64(), "the game (games.game_id)"),
        ("ply", pa.uint32(), "plies played before this position, from 0"),
    )
    + _POSITION_IDENTITY[1:]
    + _columns(
        ("halfmove_clock", pa.uint32(), "plies since the last capture or pawn move"),
        ("fullmove_number", pa.uint32(), "the move number, from 1"),
        ("move_uci", pa.string(), "the move played from here, in UCI; NULL at the end"),
        ("is_capture", pa.bool_(), "the move into this position captured"),
        ("is_check", pa.bool_(), "the side to move is in check"),
        ("result", pa.string(), "the game's outcome (games.outcome)"),
        ("white_elo", pa.int32(), "the game's white_elo"),
        ("black_elo", pa.int32(), "the game's black_elo"),
    ),
)

POSITION_BOOK = Table(
    "position_book",
    "position_book/archive=<key>/data.parquet",
    "the explorer's figures for the positions an archive reached often (a key in at least "
    "pipeline/ingest/book.py BOOK_MIN_ROWS of its position rows), summed at ingest: /api/position "
    "reads these few rows for such a position instead of every game's",
    _columns(("archive", pa.string(), "the archive's partition key"))
    + _POSITION_IDENTITY
    + _columns(
        (
            "kind",
            pa.string(),
            "'reached': games that reached the position; 'move': games that played move_uci from it; "
            "'top': one of its BOOK_TOP strongest games",
        ),
        ("move_uci", pa.string(), "kind 'move': the move; else NULL"),
        ("result", pa.string(), "the games' outcome (games.outcome)"),
        (
            "elo_floor",
            pa.int32(),
            "kind 'reached': the players' average Elo rounded down to BOOK_ELO_STEP; NULL when either "
            "is unrated (or for the other kinds)",
        ),
        ("games", pa.int64(), "games counted in this row (kind 'top': 1)"),
        ("elo_sum", pa.float64(), "kind 'move': the sum of its rated games' average Elo; else NULL"),
        ("rated", pa.int64(), "kind 'move': how many of its games have both players rated; else NULL"),
        ("game_id", pa.int64(), "kind 'top': the game (games.game_id); else NULL"),
        ("ply", pa.uint32(), "kind 'top': the ply at which the game first reached the position"),
        ("strength", pa.int32(), "kind 'top': white_elo + black_elo, NULL when either is unrated"),
    ),
)

LABELS = Table(
    "labels",
    "labels/<engine>_<limit>[_hash-kept]/part-*.parquet",
    "Stockfish labels, append-only, White's point of view; the views pick a position's best",
    _POSITION_IDENTITY
    + _LABEL_SETTING
    + _columns(
        ("cp", pa.int32(), "centipawns, White's view; NULL for a mate"),
        ("mate", pa.int16(), "moves to mate: + White mates, - Black mates, 0 the side to move is mated; else NULL"),
        ("score", pa.int32(), "cp, or +/-(32000 - plies to mate): orders every label"),
        ("best_move", pa.string(), "the engine's best move in UCI; NULL with no legal move"),
        ("pv", pa.string(), "principal variation in UCI, space-separated"),
        ("depth", pa.int16(), "depth reached"),
        ("seldepth", pa.int16(), "selective depth reached"),
        ("nodes", pa.int64(), "nodes searched"),
        ("time_ms", pa.int32(), "search time the engine reported, ms"),
        ("threads", pa.int16(), "the engine's Threads option"),
        ("hash_mb", pa.int32(), "the engine's Hash option, MB"),
        ("hash_cleared", pa.bool_(), "the hash was cleared before this position (reproducible); false: hash kept"),
        ("labelled_at", UTC_TIME, "when the label was made"),
        ("run_id", pa.string(), "the run that made it"),
    ),
)

LABEL_FAILURES = Table(
    "label_failures",
    "label_failures/<engine>_<limit>[_hash-kept]/part-*.parquet",
    "positions a setting could not label, not tried again unless a run sets retry_failed",
    _POSITION_IDENTITY
    + _LABEL_SETTING
    + _columns(
        ("reason", pa.string(), "why, e.g. a crash, a timeout or an invalid label"),
        ("attempts", pa.int16(), "tries made"),
        ("failed_at", UTC_TIME, "when the last try failed"),
        ("run_id", pa.string(), "the run that recorded it"),
        ("hash_cleared", pa.bool_(), "the setting's mode, as in labels; NULL in parts written before it"),
    ),
)

DATASETS = Table(
    "datasets",
    "datasets/<name>/{train,val,test}.parquet",
    "training sets; the columns every split file has (each also has the position columns, "
    "materialised_at and its dataset's own columns)",
    _columns(
        ("dataset", pa.string(), "the dataset's name"),
        ("position_key", pa.uint64(), "the position (positions.position_key)"),
        ("game_id", pa.int64(), "its game (games.game_id); null for a searched child (not a game's position)"),
        ("ply", pa.uint32(), "its ply in that game; null for a searched child"),
        ("target", pa.float64(), "class index or regression value the model learns"),
        ("split", pa.string(), "train, val or test"),
    ),
)

MODEL_METRICS = Table(
    "model_metrics",
    "model_metrics/<model>/<run id>.parquet",
    "figures of every trained model, one per row",
    _columns(
        ("model", pa.string(), "the model asset"),
        ("dataset", pa.string(), "the dataset it was trained on"),
        ("split", pa.string(), "train, val or test: the rows the figure is measured on"),
        ("metric", pa.string(), "accuracy, loss, majority_class_accuracy, mse, cp_mae, positions_per_second, ..."),
        ("value", pa.float64(), "the figure"),
        ("run_id", pa.string(), "the run that trained the model"),
        ("materialised_at", UTC_TIME, "when the run wrote it"),
    ),
)

EVALUATION_RESULTS = Table(
    "evaluation_results",
    "evaluation_results/<asset>/<run id>.parquet",
    "evaluation figures of the models, one per row (view evaluation_history: every run)",
    _columns(
        ("model", pa.string(), "the model (or player) measured"),
        ("suite", pa.string(), "a test suite, the opponent of a match, or elo"),
        ("metric", pa.string(), "what is measured, e.g. points_1ply, win_ratio (for suite elo: the player)"),
        ("value", pa.float64(), "the figure"),
        ("n", pa.int64(), "games or positions counted"),
        ("detail", pa.string(), "more, in words (intervals, the published figure)"),
        ("asset", pa.string(), "the asset that made it"),
        ("run_id", pa.string(), "the run that made it"),
        ("materialised_at", UTC_TIME, "when the run wrote it"),
    ),
)

MATCH_GAMES = Table(
    "match_games",
    "match_games/<asset>/<run id>.parquet",
    "every game the evaluation matches played; the same games as PGN in matches/<asset>/<run id>.pgn",
    _columns(
        ("asset", pa.string(), "the asset that played it"),
        ("match", pa.string(), "the match's name"),
        ("white", pa.string(), "the white player"),
        ("black", pa.string(), "the black player"),
        ("result", pa.string(), "1-0, 0-1, 1/2-1/2, or * when stopped at the ply limit"),
        ("termination", pa.string(), "why it ended, e.g. checkmate, fivefold repetition, ply limit 80"),
        ("plies", pa.int32(), "plies played"),
        ("opening", pa.string(), "the id of the opening position it started from"),
        ("round", pa.string(), "its Round in the PGN"),
        ("pgn_path", pa.string(), "the PGN file holding it"),
        ("run_id", pa.string(), "the run that played it"),
        ("materialised_at", UTC_TIME, "when the run wrote it"),
    ),
)

TABLES: dict[str, Table] = {
    t.name: t
    for t in (
        GAMES,
        REJECTED_GAMES,
        POSITIONS,
        POSITION_BOOK,
        LABELS,
        LABEL_FAILURES,
        DATASETS,
        MODEL_METRICS,
        EVALUATION_RESULTS,
        MATCH_GAMES,
    )
}
"""Every Parquet table of the store, by name (its folder and its view)."""

GAMES_SCHEMA = GAMES.schema
REJECTED_SCHEMA = REJECTED_GAMES.schema
POSITIONS_SCHEMA = POSITIONS.schema
POSITION_BOOK_SCHEMA = POSITION_BOOK.schema
LABELS_SCHEMA = LABELS.schema
FAILURES_SCHEMA = LABEL_FAILURES.schema
METRICS_SCHEMA = MODEL_METRICS.schema
RESULTS_SCHEMA = EVALUATION_RESULTS.schema
MATCH_GAMES_SCHEMA = MATCH_GAMES.schema


def table_schemas() -> dict[str, pa.Schema]:
    """The Parquet tables of the store and their schemas."""
    return {name: t.schema for name, t in TABLES.items()}


# --- docs/STORE.md --------------------------------------------------------------------

_BLOCK = re.compile(r"<!-- columns: ([a-z_]+) -->\n.*?<!-- /columns -->", re.S)


def sql_types(schema: pa.Schema) -> list[str]:
    """The DuckDB type of each column, as the views show it."""
    import duckdb  # only the document needs it

    empty = schema.empty_table()  # noqa: F841 (DuckDB reads the local by name)
    with duckdb.connect() as con:
        return [row[1] for row in con.sql("DESCRIBE SELECT * FROM empty").fetchall()]


def columns_markdown(table: Table) -> str:
    """The Markdown table of a table's columns: name, Arrow type, SQL type, meaning."""
    lines = ["| column | Arrow type | SQL type | meaning |", "|---|---|---|---|"]
    for c, sql in zip(table.columns, sql_types(table.schema)):
        meaning = c.meaning.replace("|", "\\|")
        lines.append(f"| `{c.name}` | `{c.type}` | `{sql}` | {meaning} |")
    return "\n".join(lines)


def render_document(text: str) -> str:
    """`text` with every `<!-- columns: <table> -->` block rewritten from TABLES.
    An unknown table name raises KeyError."""

    def block(m: re.Match) -> str:
        name = m.group(1)
        if name not in TABLES:
            raise KeyError(f"{name}: no such table in pipeline.store.schemas.TABLES (known: {', '.join(TABLES)})")
        return f"<!-- columns: {name} -->\n{columns_markdown(TABLES[name])}\n<!-- /columns -->"

    return _BLOCK.sub(block, text)


def document_problems(text: str) -> list[str]:
    """What keeps a store document from matching TABLES: tables without a column block or
    with more than one, and column blocks that differ from the schemas."""
    named = _BLOCK.findall(text)
    problems = [f"no column block for table {name}" for name in TABLES if name not in named]
    problems += [f"table {name} has {named.count(name)} column blocks" for name in TABLES if named.count(name) > 1]
    problems += [f"column block for unknown table {name}" for name in sorted(set(named) - set(TABLES))]
    if not problems and render_document(text) != text:
        problems.append("column blocks differ from pipeline/store/schemas.py")
    return problems


def main(argv: list[str] | None = None) -> int:
    """`python -m pipeline.store.schemas docs/STORE.md`: rewrite the document's column blocks."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m pipeline.store.schemas DOCUMENT.md (rewrites its column blocks)", file=sys.stderr)
        return 2
    path = Path(args[0])
    text = path.read_text(encoding="utf-8")
    try:
        new = render_document(text)
    except KeyError as e:
        print(f"{path}: {e.args[0]}", file=sys.stderr)
        return 1
    if new != text:
        path.write_text(new, encoding="utf-8")
    print(f"{path}: column blocks {'rewritten' if new != text else 'already match'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
