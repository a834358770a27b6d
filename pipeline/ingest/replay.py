"""Fast mainline replay of SAN moves, with python-chess as the authority.

python-chess's read_game + push_san is correct but slow (~50k plies/s here): every SAN
move generates legal moves, and every push copies the board state onto a stack. The
replay below keeps the position as eight plain integers (six piece-type bitboards, the
white occupancy and the full occupancy) and resolves the common SAN shapes (pawn
pushes, pawn captures of a piece, piece moves with a single candidate) with
python-chess's own attack tables. After each move it verifies that the mover's king is
not attacked, which together with the pseudo-legal resolution is a complete legality
test for these shapes.

Everything else (castling, promotions, en passant, disambiguation between several
candidates, anything the fast path finds odd) goes through python-chess: the state is
loaded into a chess.Board, parse_san decides (and words the error for illegal or
ambiguous moves), and push applies the move. The tests replay thousands of real and
random games both ways and compare every position.

The same loop exists compiled (pipeline/ingest/_replay.c, built by the install when a C compiler is
there): it resolves every SAN shape python-chess's parse_san accepts except long algebraic
pawn moves, and stops at the first move it cannot resolve to exactly one legal move, which
then goes to python-chess as above. Without the compiled module the Python loop below runs.
"""

from __future__ import annotations

from dataclasses import dataclass

import chess
import numpy as np
from chess import (
    BB_DIAG_ATTACKS,
    BB_DIAG_MASKS,
    BB_FILE_ATTACKS,
    BB_FILE_MASKS,
    BB_KING_ATTACKS,
    BB_KNIGHT_ATTACKS,
    BB_PAWN_ATTACKS,
    BB_RANK_ATTACKS,
    BB_RANK_MASKS,
    BB_RAYS,
)

from pipeline.ingest import encoding

try:
    from pipeline.ingest import _replay as compiled
except ImportError:  # no C compiler at install time: the Python loop does the work
    compiled = None

SQUARE_NAMES = chess.SQUARE_NAMES
BB_RANK_1 = chess.BB_RANK_1
BB_RANK_8 = chess.BB_RANK_8
_WHITE_PAWN_ATT = BB_PAWN_ATTACKS[chess.WHITE]
_BLACK_PAWN_ATT = BB_PAWN_ATTACKS[chess.BLACK]

PAWN_PUSH, PAWN_CAPTURE, PIECE, SLOW = 0, 1, 2, 3
NO_EP = 64

_NULL_MOVES = frozenset(("--", "Z0", "0000", "@@@@"))

# Position record: (pawns, knights, bishops, rooks, queens, kings, white, castling_rights,
# ep_square or 64 for none (python-chess semantics: set after every double push), halfmove_clock,
# in_check). replay() returns them as the rows of an (n, 11) uint64 array.
Record = tuple
RECORD_FIELDS = 11


def encode_records(rec: np.ndarray, white_to_move: np.ndarray) -> tuple[np.ndarray, ...]:
    """The store's encoding of records (rows of an (n, RECORD_FIELDS) array) and their sides to
    move, as ingest writes positions: planes (n, 12) uint64, castling bits, the polyglot en
    passant square (int8, -1 for none) and the keys (pipeline.ingest.encoding). By the compiled
    loop where it is built (a position at a time: the numpy steps below took a fifth of a
    worker's time, the keys' 96 table lookups a position most of it)."""
    if compiled is not None:
        planes, castling, ep, keys = compiled.encode(
            np.ascontiguousarray(rec, dtype=np.uint64), np.ascontiguousarray(white_to_move, dtype=np.uint8), _KEYS
        )
        return (
            np.frombuffer(planes, dtype=np.uint64).reshape(-1, 12),
            np.frombuffer(castling, dtype=np.uint8),
            np.frombuffer(ep, dtype=np.int8),
            np.frombuffer(keys, dtype=np.uint64),
        )
    planes = encoding.planes_from_records(*rec[:, :7].T)
    castling = encoding.castling_bits(rec[:, 7])
    ep_raw = rec[:, 8].astype(np.int16)
    ep_raw[ep_raw == NO_EP] = -1
    ep = encoding.polyglot_ep(ep_raw, white_to_move, planes)
    return planes, castling, ep, encoding.zobrist(planes, castling, ep, white_to_move)


_KEYS = encoding.POLYGLOT_KEYS.tobytes()


class ReplayError(ValueError):
    """A mainline move could not be replayed."""

    def __init__(self, ply: int, san: str, message: str):
        super().__init__(f"ply {ply + 1} ({san!r}): {message}")
        self.ply = ply
        self.san = san


@dataclass
class State:
    pawns: int
    knights: int
    bishops: int
    rooks: int
    queens: int
    kings: int
    white: int
    occupied: int
    turn: bool
    castling: int
    ep: int
    halfmove: int
    fullmove: int

    @classmethod
    def from_board(cls, b: chess.Board) -> State:
        return cls(
            b.pawns,
            b.knights,
            b.bishops,
            b.rooks,
            b.queens,
            b.kings,
            b.occupied_co[chess.WHITE],
            b.occupied,
            b.turn,
            b.clean_castling_rights(),
            NO_EP if b.ep_square is None else b.ep_square,
            b.halfmove_clock,
            b.fullmove_number,
        )

    def to_board(self) -> chess.Board:
        b = chess.Board(None)
        b.pawns, b.knights, b.bishops = self.pawns, self.knights, self.bishops
        b.rooks, b.queens, b.kings = self.rooks, self.queens, self.kings
        b.occupied_co[chess.WHITE] = self.white
        b.occupied_co[chess.BLACK] = self.occupied & ~self.white
        b.occupied = self.occupied
        b.promoted = 0
        b.turn = self.turn
        b.castling_rights = self.castling
        b.ep_square = None if self.ep == NO_EP else self.ep
        b.halfmove_clock = self.halfmove
        b.fullmove_number = self.fullmove
        return b

    def load(self, b: chess.Board) -> None:
        """Take the position of a board (after python-chess made a move)."""
        self.pawns, self.knights, self.bishops, self.rooks = b.pawns, b.knights, b.bishops, b.rooks
        self.queens, self.kings, self.white, self.occupied = b.queens, b.kings, b.occupied_co[chess.WHITE], b.occupied
        self.turn, self.castling, self.halfmove, self.fullmove = (
            b.turn,
            b.castling_rights,
            b.halfmove_clock,
            b.fullmove_number,
        )
        self.ep = NO_EP if b.ep_square is None else b.ep_square

    def compiled_args(self) -> tuple:
        """The state as pipeline.ingest._replay.replay takes it (and returns it)."""
        return (
            self.pawns,
            self.knights,
            self.bishops,
            self.rooks,
            self.queens,
            self.kings,
            self.white,
            self.turn,
            self.castling,
            self.ep,
            self.halfmove,
            self.fullmove,
        )

    def set_compiled(self, values: tuple) -> None:
        """Take the state pipeline.ingest._replay.replay returns."""
        (
            self.pawns,
            self.knights,
            self.bishops,
            self.rooks,
            self.queens,
            self.kings,
            self.white,
            turn,
            self.castling,
            self.ep,
            self.halfmove,
            self.fullmove,
        ) = values
        self.turn = bool(turn)
        self.occupied = self.pawns | self.knights | self.bishops | self.rooks | self.queens | self.kings

    def record(self, check: bool) -> Record:
        return (
            self.pawns,
            self.knights,
            self.bishops,
            self.rooks,
            self.queens,
            self.kings,
            self.white,
            self.castling,
            self.ep,
            self.halfmove,
            check,
        )


_SAN_CACHE: dict[str, tuple] = {}


def _san_info(san: str) -> tuple:
    info = _SAN_CACHE.get(san)
    if info is not None:
        return info
    m = chess.SAN_REGEX.match(san)
    if m is None:
        info = (SLOW, 0, 0, 0)
    else:
        piece, ffile, frank, to_name, promo = m.groups()
        to_sq = SQUARE_NAMES.index(to_name)
        to_rank = to_sq >> 3
        from_mask = chess.BB_ALL
        if ffile:
            from_mask &= chess.BB_FILES[ord(ffile) - 97]
        if frank:
            from_mask &= chess.BB_RANKS[int(frank) - 1]
        if promo or (piece is None and to_rank in (0, 7)):
            info = (SLOW, 0, 0, 0)
        elif piece is None:
            if ffile and frank:
                info = (SLOW, 0, 0, 0)  # long algebraic pawn move: python-chess find_move
            elif ffile and ord(ffile) - 97 != (to_sq & 7):
                info = (PAWN_CAPTURE, ord(ffile) - 97 - (to_sq & 7), 0, to_sq)
            elif ffile:
                info = (SLOW, 0, 0, 0)
            else:
                info = (PAWN_PUSH, 0, 0, to_sq)
        else:
            info = (PIECE, "PNBRQK".index(piece) + 1, from_mask, to_sq)
    _SAN_CACHE[san] = info
    return info


def _attacked(sq: int, by: int, occ: int, P: int, N: int, B: int, R: int, Q: int, K: int, by_white: bool) -> int:
    """Nonzero when square sq is attacked by the pieces in occupancy `by`."""
    return (
        (BB_KNIGHT_ATTACKS[sq] & N & by)
        or (BB_KING_ATTACKS[sq] & K & by)
        or ((_BLACK_PAWN_ATT[sq] if by_white else _WHITE_PAWN_ATT[sq]) & P & by)
        or (BB_DIAG_ATTACKS[sq][BB_DIAG_MASKS[sq] & occ] & (B | Q) & by)
        or (
            (BB_RANK_ATTACKS[sq][BB_RANK_MASKS[sq] & occ] | BB_FILE_ATTACKS[sq][BB_FILE_MASKS[sq] & occ]) & (R | Q) & by
        )
    )


def replay(state: State, sans: list[str]) -> tuple[np.ndarray, list[str], np.ndarray]:
    """Replay SAN moves from `state` (which is modified to the final position).

    Returns one record per position (an (len(sans) + 1, 11) uint64 array), the UCI of each
    move, and for each move whether it captured. Raises ReplayError on the first move that
    is not legal.
    """
    if compiled is None:
        records, ucis, captures = replay_python(state, sans)
        return np.array(records, dtype=np.uint64).reshape(-1, RECORD_FIELDS), ucis, np.array(captures, dtype=bool)
    parts: list[bytes] = []
    ucis: list[str] = []
    captures: list[bytes] = []
    start = 0
    while True:
        stop, records, done, caps, after = compiled.replay(state.compiled_args(), sans, start, start == 0)
        parts.append(records)
        ucis += done
        captures.append(caps)
        state.set_compiled(after)
        if stop == len(sans):
            break
        # A move the compiled loop leaves to python-chess (which decides, or raises).
        board = state.to_board()
        move = _parse_san_or_raise(board, sans[stop], stop)
        captures.append(b"\x01" if board.is_capture(move) else b"\x00")
        ucis.append(move.uci())
        board.push(move)
        state.load(board)
        parts.append(np.array(state.record(board.is_check()), dtype=np.uint64).tobytes())
        start = stop + 1
    records = np.frombuffer(b"".join(parts), dtype=np.uint64).reshape(-1, RECORD_FIELDS)
    return records, ucis, np.frombuffer(b"".join(captures), dtype=bool)


def replay_python(state: State, sans: list[str]) -> tuple[list[Record], list[str], list[bool]]:
    """The Python replay loop: records as tuples, the UCI of each move, captures."""
    P, N, B, R, Q, K = state.pawns, state.knights, state.bishops, state.rooks, state.queens, state.kings
    W, O = state.white, state.occupied
    turn, cr, ep, hm, fm = state.turn, state.castling, state.ep, state.halfmove, state.fullmove
    us = W if turn else O & ~W
    ksq = (K & us).bit_length() - 1
    check = bool(ksq >= 0 and _attacked(ksq, O & ~us, O, P, N, B, R, Q, K, not turn))
    records: list[Record] = [(P, N, B, R, Q, K, W, cr, ep, hm, check)]
    ucis: list[str] = []
    captures: list[bool] = []
    rec_append, uci_append, cap_append = records.append, ucis.append, captures.append
    san_cache = _SAN_CACHE
    for ply, san in enumerate(sans):
        info = san_cache.get(san) or _san_info(san)
        kind = info[0]
        them = O & ~us
        frm = -1
        if kind == PAWN_PUSH:
            to = info[3]
            tb = 1 << to
            if not (O & tb):
                step = -8 if turn else 8
                src = to + step
                if P & us & (1 << src):
                    frm = src
                elif not (O & (1 << src)) and (to >> 3) == (3 if turn else 4):
                    src += step
                    if P & us & (1 << src):
                        frm = src
            if frm >= 0:
                fb = 1 << frm
                P ^= fb | tb
                if turn:
                    W ^= fb | tb
                O ^= fb | tb
                captured = False
        elif kind == PAWN_CAPTURE:
            to = info[3]
            tb = 1 << to
            df = info[1]
            if (df == 1 or df == -1) and (them & tb):
                src = to + (-8 if turn else 8) + df
                if 0 <= src < 64 and P & us & (1 << src):
                    frm = src
                    fb = 1 << frm
                    nt = ~tb
                    N &= nt
                    B &= nt
                    R &= nt
                    Q &= nt
                    K &= nt
                    P = (P & nt & ~fb) | tb
                    if turn:
                        W = (W & ~fb) | tb
                    else:
                        W &= nt
                    O &= ~fb
                    captured = True
        elif kind == PIECE:
            to = info[3]
            tb = 1 << to
            if not (us & tb):
                pt = info[1]
                if pt == 2:
                    cands = BB_KNIGHT_ATTACKS[to] & N
                elif pt == 3:
                    cands = BB_DIAG_ATTACKS[to][BB_DIAG_MASKS[to] & O] & B
                elif pt == 4:
                    cands = (
                        BB_RANK_ATTACKS[to][BB_RANK_MASKS[to] & O] | BB_FILE_ATTACKS[to][BB_FILE_MASKS[to] & O]
                    ) & R
                elif pt == 5:
                    cands = (
                        BB_DIAG_ATTACKS[to][BB_DIAG_MASKS[to] & O]
                        | BB_RANK_ATTACKS[to][BB_RANK_MASKS[to] & O]
                        | BB_FILE_ATTACKS[to][BB_FILE_MASKS[to] & O]
                    ) & Q
                else:
                    cands = BB_KING_ATTACKS[to] & K
                cands &= us & info[2]
                if cands and not (cands & (cands - 1)):
                    frm = cands.bit_length() - 1
                    fb = 1 << frm
                    captured = bool(them & tb)
                    if captured:
                        nt = ~tb
                        P &= nt
                        N &= nt
                        B &= nt
                        R &= nt
                        Q &= nt
                        K &= nt
                        if not turn:
                            W &= nt
                    mv = fb | tb
                    if pt == 2:
                        N ^= mv
                    elif pt == 3:
                        B ^= mv
                    elif pt == 4:
                        R ^= mv
                    elif pt == 5:
                        Q ^= mv
                    else:
                        K ^= mv
                    if turn:
                        W ^= mv
                    O = (O & ~fb) | tb
        if frm >= 0:
            # Fast path applied. The move is pseudo-legal; it is illegal only if it leaves
            # the mover's king attacked, which needs a full scan only for a king move, a
            # move made in check, or a piece leaving a line through its own king.
            if kind == PIECE and info[1] == 6:
                illegal = _attacked(to, O & ~W if turn else W, O, P, N, B, R, Q, K, not turn)
            elif check:
                illegal = _attacked(ksq, O & ~W if turn else W, O, P, N, B, R, Q, K, not turn)
            elif BB_RAYS[ksq][frm]:
                them = O & ~W if turn else W
                illegal = (BB_DIAG_ATTACKS[ksq][BB_DIAG_MASKS[ksq] & O] & (B | Q) & them) or (
                    (BB_RANK_ATTACKS[ksq][BB_RANK_MASKS[ksq] & O] | BB_FILE_ATTACKS[ksq][BB_FILE_MASKS[ksq] & O])
                    & (R | Q)
                    & them
                )
            else:
                illegal = False
            if illegal:
                P, N, B, R, Q, K, W = records[-1][:7]
                O = P | N | B | R | Q | K
                frm = -1
            else:
                cr &= ~(fb | tb)
                if kind == PIECE and info[1] == 6:
                    cr &= ~(BB_RANK_1 if turn else BB_RANK_8)
                pawn_move = kind != PIECE
                ep = to + (-8 if turn else 8) if (pawn_move and (to - frm == 16 or frm - to == 16)) else NO_EP
                hm = 0 if (pawn_move or captured) else hm + 1
                uci_append(SQUARE_NAMES[frm] + SQUARE_NAMES[to])
                # Does the move give check? Only by the moved piece itself or by a line
                # opened through the from-square; scan fully only in those cases.
                them = O & ~W if turn else W
                oksq = (K & them).bit_length() - 1
                if oksq < 0:
                    gives = False
                elif BB_RAYS[oksq][frm]:
                    gives = True
                elif kind == PIECE:
                    pt = info[1]
                    gives = (pt == 2 and BB_KNIGHT_ATTACKS[to] >> oksq & 1) or (
                        (pt == 3 or pt == 4 or pt == 5) and BB_RAYS[oksq][to]
                    )
                else:
                    gives = (_WHITE_PAWN_ATT[to] if turn else _BLACK_PAWN_ATT[to]) >> oksq & 1
                if gives:
                    check = bool(_attacked(oksq, O & ~them, O, P, N, B, R, Q, K, turn))
                else:
                    check = False
                cap_append(captured)
                if not turn:
                    fm += 1
                turn = not turn
                us = them
                ksq = oksq
                rec_append((P, N, B, R, Q, K, W, cr, ep, hm, check))
                continue
        if frm < 0:
            # Slow path: python-chess decides and applies.
            board = State(P, N, B, R, Q, K, W, O, turn, cr, ep, hm, fm).to_board()
            move = _parse_san_or_raise(board, san, ply)
            captured = board.is_capture(move)
            uci_append(move.uci())
            board.push(move)
            P, N, B, R, Q, K = board.pawns, board.knights, board.bishops, board.rooks, board.queens, board.kings
            W, O = board.occupied_co[chess.WHITE], board.occupied
            cr = board.castling_rights
            ep = NO_EP if board.ep_square is None else board.ep_square
            hm = board.halfmove_clock
        cap_append(captured)
        if not turn:
            fm += 1
        turn = not turn
        us = W if turn else O & ~W
        ksq = (K & us).bit_length() - 1
        check = bool(ksq >= 0 and _attacked(ksq, O & ~us, O, P, N, B, R, Q, K, not turn))
        rec_append((P, N, B, R, Q, K, W, cr, ep, hm, check))
    state.pawns, state.knights, state.bishops, state.rooks, state.queens, state.kings = P, N, B, R, Q, K
    state.white, state.occupied, state.turn, state.castling, state.ep = W, O, turn, cr, ep
    state.halfmove, state.fullmove = hm, fm
    return records, ucis, captures


def _parse_san_or_raise(board: chess.Board, san: str, ply: int) -> chess.Move:
    if san in _NULL_MOVES:
        raise ReplayError(ply, san, "null move in the mainline")
    if "@" in san:
        raise ReplayError(ply, san, "piece drop (a crazyhouse-style move) in a standard game")
    try:
        move = board.parse_san(san)
    except chess.IllegalMoveError as e:
        raise ReplayError(ply, san, f"illegal move in {board.fen()}") from e
    except chess.AmbiguousMoveError as e:
        raise ReplayError(ply, san, f"ambiguous move in {board.fen()}") from e
    except chess.InvalidMoveError as e:
        raise ReplayError(ply, san, f"unparsable move ({e})") from e
    if not move:
        raise ReplayError(ply, san, "null move in the mainline")
    return move
