"""Position encoding: packed planes, polyglot Zobrist keys and FEN, vectorised with numpy.

Planes are 12 little-endian uint64 bitboards in the order P N B R Q K p n b r q k
(96 bytes). Keys are polyglot Zobrist hashes, equal to chess.polyglot.zobrist_hash.
The en-passant square follows the polyglot convention the key uses: it is set only when
a pawn of the side to move stands beside the pawn that just made a double step.
"""

from __future__ import annotations

import chess
import chess.polyglot
import numpy as np

PLANE_ORDER = "PNBRQKpnbrqk"

MATERIAL_VALUES = (1.0, 3.0, 3.0, 5.0, 9.0, 0.0)
"""Pawns per piece P N B R Q K (kings left out): the book values, as the SQL macro `material`;
the material rule, the baselines' material and the explorer's values all read these."""

# Castling bits as stored: K=1, Q=2, k=4, q=8.
CASTLE_K, CASTLE_Q, CASTLE_k, CASTLE_q = 1, 2, 4, 8

POLYGLOT_KEYS = np.array(chess.polyglot.POLYGLOT_RANDOM_ARRAY, dtype=np.uint64)
"""The 781 polyglot random numbers (uint64): 12 x 64 pieces, 4 castling rights, 8 files, the turn."""


def _byte_tables() -> np.ndarray:
    """T[j, v]: XOR of the polyglot piece keys for byte value v at byte j of the planes."""
    t = np.zeros((96, 256), dtype=np.uint64)
    values = np.arange(256)
    for plane, symbol in enumerate(PLANE_ORDER):
        piece = chess.Piece.from_symbol(symbol)
        kind = 2 * (piece.piece_type - 1) + (1 if piece.color else 0)
        for byte in range(8):
            acc = np.zeros(256, dtype=np.uint64)
            for bit in range(8):
                square = byte * 8 + bit
                key = POLYGLOT_KEYS[64 * kind + square]
                acc ^= np.where((values >> bit) & 1, key, np.uint64(0))
            t[plane * 8 + byte] = acc
    return t


BYTE_KEYS = _byte_tables()
"""(96, 256): the polyglot key part of byte value v at byte j of the planes (`zobrist`'s table;
benchmarks/derived_key.py builds its SQL from it too)."""
CASTLE_KEYS = np.zeros(16, dtype=np.uint64)
"""The polyglot key part of each stored castling value (bits K=1 Q=2 k=4 q=8)."""
for _bits in range(16):
    _acc = np.uint64(0)
    for _i in range(4):
        if _bits >> _i & 1:
            _acc ^= POLYGLOT_KEYS[768 + _i]
    CASTLE_KEYS[_bits] = _acc
EP_KEYS = POLYGLOT_KEYS[772:780]
"""The polyglot key part of an en passant file (a-h)."""
TURN_KEY = POLYGLOT_KEYS[780]
"""The polyglot key part of White to move."""


def planes_from_records(pawns, knights, bishops, rooks, queens, kings, white) -> np.ndarray:
    """(n, 12) uint64 planes from piece-type bitboards and the white occupancy."""
    white = np.asarray(white, dtype=np.uint64)
    black_mask = ~white
    out = np.empty((len(white), 12), dtype=np.uint64)
    for i, bb in enumerate((pawns, knights, bishops, rooks, queens, kings)):
        bb = np.asarray(bb, dtype=np.uint64)
        out[:, i] = bb & white
        out[:, 6 + i] = bb & black_mask
    return out


def castling_bits(rook_squares: np.ndarray) -> np.ndarray:
    """Stored castling bits from python-chess castling_rights (a bitboard of rook squares)."""
    cr = np.asarray(rook_squares, dtype=np.uint64)
    one = np.uint64(1)
    k = (cr >> np.uint64(chess.H1)) & one
    q = (cr >> np.uint64(chess.A1)) & one
    bk = (cr >> np.uint64(chess.H8)) & one
    bq = (cr >> np.uint64(chess.A8)) & one
    return (k * 1 + q * 2 + bk * 4 + bq * 8).astype(np.uint8)


def polyglot_ep(ep: np.ndarray, white_to_move: np.ndarray, planes: np.ndarray) -> np.ndarray:
    """ep square (int8, -1 for none) kept only where a pawn of the side to move can reach it."""
    ep = np.asarray(ep, dtype=np.int16)
    out = np.full(len(ep), -1, dtype=np.int8)
    for i in np.nonzero(ep >= 0)[0]:
        sq = int(ep[i])
        white = bool(white_to_move[i])
        pawns = int(planes[i, 0] if white else planes[i, 6])
        behind = sq - 8 if white else sq + 8
        mask = 0
        if sq & 7:
            mask |= 1 << (behind - 1)
        if sq & 7 != 7:
            mask |= 1 << (behind + 1)
        if pawns & mask:
            out[i] = sq
    return out


def zobrist(planes: np.ndarray, castling: np.ndarray, ep: np.ndarray, white_to_move: np.ndarray) -> np.ndarray:
    """Polyglot keys (uint64) for n positions."""
    as_bytes = np.ascontiguousarray(planes).view(np.uint8).reshape(len(planes), 96)
    h = np.zeros(len(planes), dtype=np.uint64)
    for j in range(96):
        col = as_bytes[:, j]
        if col.any():
            h ^= BYTE_KEYS[j][col]
    h ^= CASTLE_KEYS[np.asarray(castling, dtype=np.uint8)]
    ep = np.asarray(ep)
    has_ep = ep >= 0
    h[has_ep] ^= EP_KEYS[ep[has_ep].astype(np.int64) & 7]
    h[np.asarray(white_to_move, dtype=bool)] ^= TURN_KEY
    return h


def pack_planes(planes: np.ndarray) -> np.ndarray:
    """(n, 12) uint64 -> (n, 96) uint8, little-endian per bitboard (a view, on a little-endian
    machine, of the planes' own memory when they are contiguous)."""
    return np.ascontiguousarray(planes, dtype="<u8").view(np.uint8).reshape(len(planes), 96)


def unpack_planes(blob: bytes) -> list[int]:
    """96 packed bytes -> 12 bitboards."""
    if len(blob) != 96:
        raise ValueError(f"planes must be 96 bytes, got {len(blob)}")
    return [int.from_bytes(blob[i * 8 : (i + 1) * 8], "little") for i in range(12)]


def board_from_row(
    planes: bytes, side_to_move: str, castling: int, ep_square: int | None, halfmove_clock: int, fullmove_number: int
) -> chess.Board:
    """A chess.Board from a stored position row."""
    board = chess.Board(None)
    for bb, symbol in zip(unpack_planes(planes), PLANE_ORDER):
        piece = chess.Piece.from_symbol(symbol)
        for sq in chess.scan_forward(bb):
            board.set_piece_at(sq, piece)
    board.turn = side_to_move == "w"
    rights = 0
    for bit, sq in ((CASTLE_K, chess.H1), (CASTLE_Q, chess.A1), (CASTLE_k, chess.H8), (CASTLE_q, chess.A8)):
        if castling & bit:
            rights |= chess.BB_SQUARES[sq]
    board.castling_rights = rights
    board.ep_square = ep_square if ep_square is not None and ep_square >= 0 else None
    board.halfmove_clock = halfmove_clock
    board.fullmove_number = fullmove_number
    return board


def fen_from_row(*args, **kwargs) -> str:
    """FEN of a stored position row (en passant shown where a legal capture exists)."""
    return board_from_row(*args, **kwargs).fen()


_FEN_CHARS = np.frombuffer(b"." + PLANE_ORDER.encode(), dtype=np.uint8)
# Board squares in FEN order: a8..h8, a7..h7, ..., a1..h1.
_FEN_SQUARES = np.array([rank * 8 + file for rank in range(7, -1, -1) for file in range(8)])
_CASTLING_FEN = [
    "".join(c for bit, c in ((CASTLE_K, "K"), (CASTLE_Q, "Q"), (CASTLE_k, "k"), (CASTLE_q, "q")) if bits & bit) or "-"
    for bits in range(16)
]


def fens_from_columns(
    planes: list[bytes],
    side_to_move: list[str],
    castling: list[int],
    ep_square: list[int | None],
    halfmove_clock: int = 0,
    fullmove_number: int = 1,
) -> list[str]:
    """FENs of many stored positions at once (the same strings fen_from_row gives), with the
    given clocks: a few microseconds a position instead of a chess.Board each."""
    n = len(planes)
    if n == 0:
        return []
    raw = np.frombuffer(b"".join(planes), dtype=np.uint8).reshape(n, 12, 8)
    bits = np.unpackbits(raw, axis=2, bitorder="little").reshape(n, 12, 64)
    codes = (bits * np.arange(1, 13, dtype=np.uint8)[None, :, None]).max(axis=1)  # (n, 64), 0 = empty
    boards = _FEN_CHARS[codes[:, _FEN_SQUARES]]
    text = boards.tobytes().decode("ascii")
    tail = f" {halfmove_clock} {fullmove_number}"
    out = []
    for i in range(n):
        b = text[i * 64 : (i + 1) * 64]
        board = "/".join((b[0:8], b[8:16], b[16:24], b[24:32], b[32:40], b[40:48], b[48:56], b[56:64]))
        for run in ("........", ".......", "......", ".....", "....", "...", "..", "."):
            if run in board:
                board = board.replace(run, str(len(run)))
        ep = ep_square[i]
        out.append(
            f"{board} {side_to_move[i]} {_CASTLING_FEN[castling[i]]} "
            f"{chess.SQUARE_NAMES[ep] if ep is not None and ep >= 0 else '-'}{tail}"
        )
    return out
