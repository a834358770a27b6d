"""From raw game texts to rows of the games, rejected_games and positions tables."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

import chess
import chess.pgn
import numpy as np
import pyarrow as pa

from pipeline.ingest import encoding
from pipeline.ingest.archive import RawGame
from pipeline.ingest.replay import ReplayError, State, compiled, encode_records, replay
from pipeline.store.schemas import GAMES_SCHEMA, POSITIONS_SCHEMA, REJECTED_SCHEMA

# Comments ({...}, unclosed ones to the end), rest-of-line comments and escape lines.
_STRIP = re.compile(r"\{[^}]*\}?|;[^\n]*|^%[^\n]*", re.M)
_TOKEN = re.compile(
    r"[NBKRQ]?[a-h]?[1-8]?[\-x]?[a-h][1-8](?:=?[nbrqkNBRQK])?|[PNBRQK]?@[a-h][1-8]|--|Z0|0000|@@@@"
    r"|O-O(?:-O)?|0-0(?:-0)?|1-0|0-1|1/2-1/2|\*|\(|\)"
)
# Everything movetext may hold besides moves: move numbers, NAGs, annotation glyphs.
_NOT_JUNK = re.compile(r"\s+|\d+\s*\.+|\$\d+|[!?]+|[+#]|=|" + _TOKEN.pattern)
# The scan for tokens reads move numbers ("10000.") and NAGs ("$10000") whole, as
# _NOT_JUNK does, so that the "0000" inside them is never taken for a null move: they
# give empty matches, which are dropped.
_SCAN = re.compile(r"\d+\s*\.+|\$\d+|(" + _TOKEN.pattern + ")")
RESULTS = frozenset(("1-0", "0-1", "1/2-1/2", "*"))
EXCERPT_CHARS = 600
_NO_CAPTURE = np.zeros(1, dtype=bool)  # the start position of a game was reached by no move
# ply, halfmove_clock and fullmove_number are uint32 columns. A FEN's clocks may be any size
# (python-chess takes them as they are); above this a FEN is a bad_fen, so that the start
# clock plus the plies of any game that fits in memory stays below 2**32.
MAX_FEN_CLOCK = 2**31 - 1

# Headers with a column of their own; every other header goes to extra_headers.
COLUMN_HEADERS = {
    "Event": "event",
    "Site": "site",
    "Date": "date",
    "Round": "round",
    "White": "white",
    "Black": "black",
    "Result": "result",
    "TimeControl": "time_control",
    "Termination": "termination",
    "ECO": "eco",
}
_CCRL_TC = re.compile(r"CCRL\s+(\d+)\s*/\s*(\d+)")
_STANDARD_VARIANTS = {"", "standard", "chess", "normal", "std", "from position", "fromposition", "?"}


class Rejected(Exception):
    def __init__(self, code: str, reason: str, ply: int | None = None):
        super().__init__(reason)
        self.code = code
        self.reason = reason
        self.ply = ply


def game_id(archive: str, index: int) -> int:
    """Stable 63-bit id of a game: the same archive key and index always give the same id."""
    digest = hashlib.blake2b(f"{archive}\x00{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def split_game(text: str) -> tuple[dict[str, str], str]:
    """Tag pairs (in order; the first of a repeated tag wins, as in python-chess) and movetext."""
    headers: dict[str, str] = {}
    # The run of plain tag lines a game usually starts with is read by one scanner: each
    # match gives what python-chess's TAG_REGEX gives the stripped line. The loop reads on
    # from the first other line (blank, escape and comment lines are skipped) to the first
    # line that is not a tag: the movetext starts there.
    start = 0
    for m in iter(_TAG_LINE.scanner(text).match, None):
        headers.setdefault(*m.groups())
        start = m.end()
    n = len(text)
    while start < n:
        newline = text.find("\n", start)
        stop = n if newline < 0 else newline
        line = text[start:stop]
        s = line.strip()
        if s and not line.startswith(("%", ";")):
            if not s.startswith("["):
                break
            m = chess.pgn.TAG_REGEX.match(s)
            if m:
                headers.setdefault(*m.groups())
        start = stop + 1
    return headers, text[start:]


_TAG_LINE = re.compile(r'\[([A-Za-z0-9][A-Za-z0-9_+#=:-]*)[ \t]+"([^\r\n]*)"\][ \t]*\n')


def tokenize(movetext: str) -> tuple[list[str], str | None]:
    """Mainline SAN tokens and the result marker that ends the mainline (None if absent).

    The compiled tokenizer answers for plain movetext (moves, numbers, comments, NAGs,
    results) and leaves everything else (variations, junk, null moves) to the expressions.
    """
    if compiled is not None:
        found = compiled.tokenize(movetext)
        if found is not None:
            return found
    return tokenize_python(movetext)


def tokenize_python(movetext: str) -> tuple[list[str], str | None]:
    """tokenize() with regular expressions only."""
    body = _STRIP.sub(" ", movetext) if ("{" in movetext or ";" in movetext or "%" in movetext) else movetext
    tokens = _SCAN.findall(body)
    junk = _NOT_JUNK.sub("", body)
    if junk:
        raise _junk(body)
    result = None
    if "(" in body:
        mainline: list[str] = []
        depth = 0
        for tok in tokens:
            if tok == "(":
                depth += 1
            elif tok == ")":
                depth = max(0, depth - 1)
            elif depth == 0:
                mainline.append(tok)
        tokens = mainline
    else:
        tokens = [t for t in tokens if t != ")"]
    sans = []
    for tok in tokens:
        if tok in RESULTS:
            result = tok
        elif tok:
            sans.append(tok)
    return sans, result


# A move written with a lower-case piece letter ("nf3", "qxd5"); b is left out, as "bxc5" is
# a pawn's capture. python-chess's reader turns "nf3" into the pawn move f3 without a word.
_LOWER_PIECE = re.compile(r"[nrqk][a-h]?[1-8]?[\-x]?[a-h][1-8](?:=?[nbrqkNBRQK])?")


def _junk(body: str) -> Rejected:
    """The rejection of movetext holding something that is no move: the word where it is and
    its ply, and for a lower-case piece letter what to write instead."""
    end = 0
    for m in _NOT_JUNK.finditer(body):
        if m.start() > end:
            break
        end = m.end()
    left = end
    while left > 0 and not body[left - 1].isspace():
        left -= 1
    right = end
    while right < len(body) and not body[right].isspace():
        right += 1
    word = body[left:right]
    ply = _mainline_plies(body[:left])
    move = word.lstrip("0123456789. ")
    if _LOWER_PIECE.fullmatch(move.rstrip("+#!?")):
        return Rejected(
            "unparsable_move",
            f"move {move!r} at ply {ply + 1}: piece letters must be upper case (N, B, R, Q, K); "
            f"write {move[0].upper() + move[1:]!r}",
            ply,
        )
    return Rejected(
        "unparsable_move",
        f"unrecognised text {word[:40]!r} at ply {ply + 1} of the movetext: not a move, move number, "
        "comment, NAG or result",
        ply,
    )


def _mainline_plies(body: str) -> int:
    """Mainline moves in movetext without comments (variations left out)."""
    depth = plies = 0
    for tok in _SCAN.findall(body):
        if tok == "(":
            depth += 1
        elif tok == ")":
            depth = max(0, depth - 1)
        elif tok and depth == 0 and tok not in RESULTS:
            plies += 1
    return plies


def parse_elo(value: str | None) -> int | None:
    if not value:
        return None
    value = value.strip()
    return int(value) if value.isdigit() and len(value) < 6 else None


def detect_source(headers: dict[str, str]) -> str:
    site = headers.get("Site", "")
    event = headers.get("Event", "")
    if "FICSGamesDBGameNo" in headers or "FICS" in site or "freechess" in site.lower():
        return "fics"
    if "lichess.org" in site.lower():
        return "lichess"
    if "CCRL" in event or "CCRL" in site:
        return "ccrl"
    if site == "chess-pipeline selfplay":
        return "selfplay"
    return "other"


def time_control(headers: dict[str, str]) -> str | None:
    tc = headers.get("TimeControl")
    if tc and tc not in ("?", "-"):
        return tc
    m = _CCRL_TC.search(headers.get("Event", ""))
    if m:
        # CCRL names its time control in Event, e.g. "CCRL 40/15": 40 moves in 15 minutes.
        return f"{m.group(1)}/{int(m.group(2)) * 60}"
    return tc


def _initial_board(headers: dict[str, str]) -> tuple[chess.Board, str | None]:
    variant = headers.get("Variant", "").strip().lower()
    if variant not in _STANDARD_VARIANTS:
        raise Rejected("variant", f"variant {headers['Variant']!r} is not standard chess")
    fen = headers.get("FEN")
    if fen is None:
        if headers.get("SetUp", "0").strip() == "1":
            raise Rejected("bad_fen", "SetUp is 1 but the game has no FEN tag")
        return chess.Board(), None
    try:
        board = chess.Board(fen)
    except ValueError as e:
        raise Rejected("bad_fen", f"invalid FEN setup {fen!r}: {e}") from e
    for clock, value in (("halfmove clock", board.halfmove_clock), ("fullmove number", board.fullmove_number)):
        if value > MAX_FEN_CLOCK:
            raise Rejected("bad_fen", f"FEN setup {fen!r}: {clock} {value} is out of range (at most {MAX_FEN_CLOCK:,})")
    if board.has_chess960_castling_rights() or "960" in variant:
        raise Rejected("variant", f"FEN setup {fen!r} has Chess960 castling rights")
    status = board.status()
    if status != chess.STATUS_VALID:
        names = [s.name for s in chess.Status if s and s in status]
        raise Rejected("bad_fen", f"FEN setup {fen!r} is not a legal position: {', '.join(names)}")
    return board, board.fen()


def _board_result(board: chess.Board) -> str | None:
    if board.is_checkmate():
        return "0-1" if board.turn == chess.WHITE else "1-0"
    if board.is_stalemate() or board.is_insufficient_material():
        return "1/2-1/2"
    return None


def _outcome(tag: str | None, movetext: str | None, board: str | None) -> tuple[str, bool]:
    known = [r for r in (board, movetext, tag) if r in ("1-0", "0-1", "1/2-1/2")]
    mismatch = len(set(known)) > 1
    return (known[0] if known else "*"), mismatch


_SIDES = pa.array(["b", "w"], type=pa.string())
"""side_to_move by the turn (False: black, True: white)."""


@dataclass
class ChunkBuilder:
    """Accumulates the rows of a batch of games; to_tables() makes Arrow tables."""

    archive: str
    games: dict[str, list] = field(default_factory=lambda: {n: [] for n in GAMES_SCHEMA.names})
    rejected: dict[str, list] = field(default_factory=lambda: {n: [] for n in REJECTED_SCHEMA.names})
    records: list = field(default_factory=list)
    pos_game: list = field(default_factory=list)
    pos_ply: list = field(default_factory=list)
    pos_turn: list = field(default_factory=list)
    pos_games: list = field(default_factory=list)
    """Each game's result and Elos, once: the positions' columns repeat them (to_tables)."""
    pos_counts: list = field(default_factory=list)
    pos_fullmove: list = field(default_factory=list)
    pos_move: list = field(default_factory=list)
    pos_capture: list = field(default_factory=list)

    def add(self, raw: RawGame) -> bool:
        """Add one game; True if it went to games, False if rejected."""
        try:
            self._add_game(raw)
            return True
        except Rejected as r:
            self._reject(raw, r.code, r.reason, r.ply)
            return False

    def _reject(self, raw: RawGame, code: str, reason: str, ply: int | None) -> None:
        rj = self.rejected
        rj["archive"].append(self.archive)
        rj["game_index"].append(raw.index)
        rj["reason_code"].append(code)
        rj["reason"].append(reason)
        rj["ply"].append(ply)
        rj["excerpt"].append(raw.text[:EXCERPT_CHARS].replace("\x00", "\u2400"))  # NUL shown as the NUL symbol

    def _add_game(self, raw: RawGame) -> None:
        if raw.problem is not None:  # over-long: the reader kept only its start
            raise Rejected("too_long", raw.problem)
        if "\x00" in raw.text:
            # Binary content past the archive's first 4,096 bytes (those are checked whole by
            # pipeline.ingest.archive): this game is damaged, the others are read.
            line = raw.text.count("\n", 0, raw.text.index("\x00")) + 1
            raise Rejected(
                "binary_data",
                f"NUL byte at line {line} of the game: binary data, not PGN text "
                "(a damaged or partly overwritten archive?)",
            )
        headers, movetext = split_game(raw.text)
        if not raw.terminated:
            raise Rejected("truncated", "archive ends inside this game (no result marker): the last game is truncated")
        sans, result_movetext = tokenize(movetext)
        board, start_fen = _initial_board(headers)
        state = State.from_board(board)
        start_turn, start_fullmove = state.turn, state.fullmove
        try:
            records, ucis, captures = replay(state, sans)
        except ReplayError as e:
            code = "illegal_move"
            text = str(e)
            if "ambiguous" in text:
                code = "ambiguous_move"
            elif "unparsable" in text:
                code = "unparsable_move"
            elif "null move" in text or "drop" in text:
                code = "unsupported_move"
            raise Rejected(code, text, e.ply) from e
        final = state.to_board()
        result_tag = headers.get("Result")
        result_board = _board_result(final)
        outcome, mismatch = _outcome(result_tag, result_movetext, result_board)
        gid = game_id(self.archive, raw.index)
        welo, belo = parse_elo(headers.get("WhiteElo")), parse_elo(headers.get("BlackElo"))

        g = self.games
        g["game_id"].append(gid)
        g["archive"].append(self.archive)
        g["game_index"].append(raw.index)
        g["source"].append(detect_source(headers))
        for tag, col in COLUMN_HEADERS.items():
            g[col].append(headers.get(tag))
        g["time_control"][-1] = time_control(headers)
        g["white_elo"].append(welo)
        g["black_elo"].append(belo)
        g["ply_count"].append(len(ucis))
        g["moves_uci"].append(" ".join(ucis))
        g["start_fen"].append(start_fen)
        g["result_movetext"].append(result_movetext)
        g["result_board"].append(result_board)
        g["result_mismatch"].append(mismatch)
        g["outcome"].append(outcome)
        g["extra_headers"].append([(k, v) for k, v in headers.items() if k not in COLUMN_HEADERS])

        n = len(records)
        self.records.append(records)
        self.pos_game.append(np.full(n, gid, dtype=np.int64))
        self.pos_ply.append(np.arange(n, dtype=np.uint32))
        # Side to move alternates from the start position's.
        turn = np.zeros(n, dtype=bool)
        turn[(0 if start_turn else 1) :: 2] = True
        self.pos_turn.append(turn)
        plies_before = np.arange(n) + (0 if start_turn else 1)
        self.pos_fullmove.append((start_fullmove + plies_before // 2).astype(np.uint32))
        self.pos_move.extend(ucis)
        self.pos_move.append(None)
        self.pos_capture.append(_NO_CAPTURE)
        self.pos_capture.append(captures)
        self.pos_games.append((outcome, welo, belo))
        self.pos_counts.append(n)

    def to_tables(self) -> tuple[pa.Table, pa.Table, pa.Table]:
        games = pa.Table.from_pydict(self.games, schema=GAMES_SCHEMA)
        rejected = pa.Table.from_pydict(self.rejected, schema=REJECTED_SCHEMA)
        return games, rejected, self._positions()

    def _positions(self) -> pa.Table:
        if not self.records:
            return POSITIONS_SCHEMA.empty_table()
        rec = np.concatenate(self.records)
        n = len(rec)
        turn = np.concatenate(self.pos_turn)
        planes, castling, ep, keys = encode_records(rec, turn)
        packed = encoding.pack_planes(planes)
        planes_arr = pa.FixedSizeBinaryArray.from_buffers(pa.binary(96), n, [None, pa.py_buffer(packed.reshape(-1))])
        # Columns that repeat one value a game (or one of two): Arrow's take repeats them.
        game_of = pa.array(np.repeat(np.arange(len(self.pos_counts), dtype=np.int32), self.pos_counts))
        outcome, welo, belo = zip(*self.pos_games)
        return pa.Table.from_arrays(
            [
                pa.array(keys, type=pa.uint64()),
                pa.array(np.concatenate(self.pos_game), type=pa.int64()),
                pa.array(np.concatenate(self.pos_ply), type=pa.uint32()),
                planes_arr,
                _SIDES.take(pa.array(turn.view(np.int8))),
                pa.array(castling, type=pa.uint8()),
                pa.array(ep, type=pa.int8(), mask=ep < 0),
                pa.array(rec[:, 9].astype(np.uint32), type=pa.uint32()),
                pa.array(np.concatenate(self.pos_fullmove), type=pa.uint32()),
                pa.array(self.pos_move, type=pa.string()),
                pa.array(np.concatenate(self.pos_capture), type=pa.bool_()),
                pa.array(rec[:, 10].astype(bool), type=pa.bool_()),
                pa.array(outcome, type=pa.string()).take(game_of),
                pa.array(welo, type=pa.int32()).take(game_of),
                pa.array(belo, type=pa.int32()).take(game_of),
            ],
            schema=POSITIONS_SCHEMA,
        )


def process_games(archive: str, raws: list[RawGame]) -> tuple[pa.Table, pa.Table, pa.Table]:
    """Parse and replay a batch of games (the unit of work sent to worker processes)."""
    builder = ChunkBuilder(archive)
    for raw in raws:
        builder.add(raw)
    return builder.to_tables()
