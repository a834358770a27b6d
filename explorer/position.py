"""What the page sends, checked: FENs, moves, set-ups; and the store's key of a position."""

from __future__ import annotations

from dataclasses import dataclass

import chess
import chess.polyglot

from pipeline.play.search import board_arrays

MAX_FEN = 100
"""Longest FEN accepted (the longest legal one is about 90 characters)."""


class InputError(ValueError):
    """Input the page (or a user of the API) sent that cannot be used; the message says why
    and what to send instead. The server answers it with a 4xx."""


class NotFound(LookupError):
    """What was asked for (a game, a search) is not there; the server answers it with a 404."""


def is_placement(text: str | None) -> bool:
    """Whether `text` is a bare piece placement (a FEN's first field alone)."""
    return text is not None and len(text.split()) == 1


def parse_fen(text: str | None) -> chess.Board:
    """A board from a FEN (the piece placement alone is taken as White to move, no castling;
    /api/position matches it on the placement alone: `placement_keys`),
    refused with the reason when it is not a FEN or not a legal position."""
    if text is None or not text.strip():
        raise InputError("fen is missing: send a FEN, e.g. rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1")
    text = " ".join(text.split())
    if len(text) > MAX_FEN:
        raise InputError(f"fen is {len(text)} characters long; a FEN has at most {MAX_FEN}")
    parts = text.split(" ")
    if len(parts) == 1:
        text += " w - - 0 1"
    try:
        board = chess.Board(text)
    except ValueError as e:
        raise InputError(f"not a FEN ({e}): {text!r}") from None
    status = board.status()
    if status != chess.STATUS_VALID:
        raise InputError(f"not a legal position: {_status_text(status)} ({board.fen()})")
    return board


def _status_text(status: chess.Status) -> str:
    reasons = [
        name.lower().replace("_", " ") for name, flag in chess.Status.__members__.items() if flag and flag in status
    ]
    return ", ".join(reasons) or "invalid"


def setup_board(placement: str, turn: str, castling: str) -> tuple[chess.Board, list[str]]:
    """A position from a free set-up: the piece placement, the side to move ('w' or 'b') and the
    castling rights asked for ('KQkq', any subset, '-' for none). Rights the pieces do not allow
    are dropped and named in the notes; an illegal position is refused with the reason."""
    if turn not in ("w", "b"):
        raise InputError(f"turn must be one of w, b; got {turn!r}")
    wanted = "" if castling in ("", "-") else castling
    if any(c not in "KQkq" for c in wanted) or len(set(wanted)) != len(wanted):
        raise InputError(f"castling must be a subset of KQkq (or -); got {castling!r}")
    try:
        board = chess.Board(None)
        board.set_board_fen(placement.strip())
    except ValueError as e:
        raise InputError(f"not a piece placement ({e}): {placement!r}") from None
    board.turn = turn == "w"
    board.set_castling_fen("".join(c for c in "KQkq" if c in wanted) or "-")
    kept = board.clean_castling_rights()
    notes = []
    if kept != board.castling_rights:
        dropped = [
            c
            for c, sq in zip("KQkq", (chess.H1, chess.A1, chess.H8, chess.A8))
            if c in wanted and not kept & chess.BB_SQUARES[sq]
        ]
        notes.append(f"castling {''.join(dropped)} dropped: king or rook not on its square")
        board.castling_rights = kept
    status = board.status()
    if status != chess.STATUS_VALID:
        raise InputError(f"not a legal position: {_status_text(status)}")
    return board, notes


def _legal_text(board: chess.Board) -> str:
    return " ".join(m.uci() for m in board.legal_moves) or "none"


def parse_move(board: chess.Board, text: str | None) -> chess.Move:
    """A legal move of `board` given in UCI (e2e4, e7e8q) or SAN (e4, Nf3, O-O)."""
    if text is None or not text.strip():
        raise InputError("move is missing: send a move in UCI (e2e4) or SAN (e4)")
    text = text.strip()
    if len(text) > 10:
        raise InputError(f"not a move: {text[:20]!r}; send UCI (e2e4) or SAN (e4)")
    try:
        move = chess.Move.from_uci(text)
    except ValueError:
        try:
            return board.parse_san(text)
        except ValueError:
            raise InputError(f"{text!r} is not a legal move in {board.fen()}; legal: {_legal_text(board)}") from None
    if move not in board.legal_moves:
        raise InputError(f"{text} is not a legal move in {board.fen()}; legal: {_legal_text(board)}")
    return move


@dataclass(frozen=True)
class PositionKey:
    """A position as the store matches it: polyglot key, packed planes, side to move, castling
    bits (K=1 Q=2 k=4 q=8) and the en-passant square (polyglot convention, None without one)."""

    key: int
    planes: bytes
    side: str
    castling: int
    ep: int | None

    def params(self) -> dict:
        return {"key": self.key, "planes": self.planes, "side": self.side, "castling": self.castling, "ep": self.ep}


def placement_keys(board: chess.Board) -> list[int]:
    """The polyglot key of every position with `board`'s pieces on their squares: either side
    to move, every castling right the placement allows, every en-passant square a pawn could
    take on (the store keys only those). A bare placement matches the stored rows whose key is
    one of these and whose planes are the placement's."""
    keys = set()
    for turn in (chess.WHITE, chess.BLACK):
        b = board.copy(stack=False)
        b.turn = turn
        b.castling_rights = chess.BB_CORNERS
        allowed = b.clean_castling_rights()
        rights = [r for r in range(16) if _bits_to_mask(r) & ~allowed == 0]
        eps: list[int | None] = [None]
        rank, ahead, behind = (4, 5, 6) if turn == chess.WHITE else (3, 2, 1)
        for f in range(8):  # the opponent's pawn just moved two squares, past ep
            pawn = chess.square(f, rank)
            if b.piece_at(pawn) == chess.Piece(chess.PAWN, not turn) and not b.piece_at(chess.square(f, ahead)):
                if not b.piece_at(chess.square(f, behind)):
                    eps.append(chess.square(f, ahead))
        for r in rights:
            b.castling_rights = _bits_to_mask(r)
            for ep in eps:
                b.ep_square = ep
                keys.add(chess.polyglot.zobrist_hash(b))
        b.ep_square = None
    return sorted(keys)


def _bits_to_mask(bits: int) -> int:
    """Castling bits (K=1 Q=2 k=4 q=8) as python-chess's mask of rook squares."""
    squares = (chess.H1, chess.A1, chess.H8, chess.A8)
    return sum(chess.BB_SQUARES[sq] for i, sq in enumerate(squares) if bits >> i & 1)


def position_key(board: chess.Board) -> PositionKey:
    """The store's encoding of `board` (as ingest writes it; checked against stored rows in the tests)."""
    planes, _, castling = board_arrays([board])
    ep = None
    if board.ep_square is not None:
        pawns = board.pieces_mask(chess.PAWN, board.turn)
        behind = board.ep_square + (-8 if board.turn else 8)
        neighbours = 0
        if chess.square_file(board.ep_square) > 0:
            neighbours |= chess.BB_SQUARES[behind - 1]
        if chess.square_file(board.ep_square) < 7:
            neighbours |= chess.BB_SQUARES[behind + 1]
        if pawns & neighbours:
            ep = board.ep_square
    return PositionKey(
        chess.polyglot.zobrist_hash(board), planes[0].tobytes(), "w" if board.turn else "b", int(castling[0]), ep
    )
