"""Position encoders: packed planes (96 bytes) -> network inputs, computed on the training device.

Every encoder takes a batch as the loader delivers it (uint8 planes (B, 96), side to move,
castling bits, mirrored flags) and unpacks the bits with tensor ops, so a GPU does the work
when there is one. Each has a version, stored in checkpoints: a model is only ever fed the
encoding it was trained on.

Planes are 12 little-endian uint64 bitboards in the order P N B R Q K p n b r q k; square
0 is a1, 63 is h8. `mirrored` rows (Sabatelli's datasets score positions for the side to
move) are encoded with colours swapped and the board flipped, so the side to move always
plays White's pieces up the board.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from pipeline.ingest.encoding import MATERIAL_VALUES

PIECE_VALUES = (1.0, 3.0, 3.0, 5.0, 9.0, 10.0)
"""Sabatelli's algebraic input: P N B R Q K; Black's pieces negative."""
PIECE_LIST_SLOTS = (8, 2, 2, 2, 1, 1)
"""Hui's piece list: slots per piece type and colour (extra promoted pieces are dropped)."""


@dataclass
class Batch:
    """A batch on the device: what every encoder reads."""

    planes: torch.Tensor  # (B, 96) uint8
    white_to_move: torch.Tensor  # (B,) bool
    castling: torch.Tensor  # (B,) uint8, bits K=1 Q=2 k=4 q=8
    mirrored: torch.Tensor  # (B,) bool
    target: torch.Tensor | None = None

    def to(self, device) -> Batch:
        return Batch(
            *(
                t.to(device, non_blocking=True) if t is not None else None
                for t in (self.planes, self.white_to_move, self.castling, self.mirrored, self.target)
            )
        )


_SHIFTS = torch.arange(8, dtype=torch.uint8)


def unpack(planes: torch.Tensor) -> torch.Tensor:
    """(B, 96) uint8 -> (B, 12, 64) float: bit b of byte j of plane i is square 8j + b."""
    bits = (planes.unsqueeze(-1) >> _SHIFTS.to(planes.device)) & 1
    return bits.reshape(planes.shape[0], 12, 64).float()


def material_balance(board: torch.Tensor) -> torch.Tensor:
    """(B,) material in pawns (MATERIAL_VALUES) of the first six planes minus the last six's, of
    boards (B, 12, ...) as `unpack` or `oriented` give them."""
    counts = board.flatten(2).sum(2)  # (B, 12)
    w = torch.tensor(MATERIAL_VALUES, device=counts.device, dtype=counts.dtype)
    return counts[:, :6] @ w - counts[:, 6:] @ w


def oriented(batch: Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Board (B, 12, 8, 8) [rank, file], castling bits and White-to-move, with mirrored rows
    swapped to the other colour and flipped vertically."""
    board = unpack(batch.planes).reshape(-1, 12, 8, 8)
    castling = batch.castling.long()
    stm = batch.white_to_move
    m = batch.mirrored
    if bool(m.any()):
        flipped = torch.cat([board[:, 6:], board[:, :6]], dim=1).flip(2)
        board = torch.where(m[:, None, None, None], flipped, board)
        swapped = ((castling & 3) << 2) | ((castling >> 2) & 3)
        castling = torch.where(m, swapped, castling)
        stm = torch.where(m, ~stm, stm)
    return board, castling, stm


_REVERSED_BITS = torch.tensor([int(f"{i:08b}"[::-1], 2) for i in range(256)], dtype=torch.uint8)
"""Each byte with its bits in reverse order: a rank of a bitboard mirrored a <-> h."""


def file_mirrorable(batch: Batch) -> torch.Tensor:
    """(B,) bool: rows whose value a file mirror (a <-> h) keeps, those where neither side may
    castle. A mirrored castling right would name a rook and king on squares the rules do not
    know; with none, the mirrored position is legal and of the same value (chess has no other
    file asymmetry; en passant mirrors with its pawns)."""
    return batch.castling == 0


def mirror_files(batch: Batch, rows: torch.Tensor) -> Batch:
    """The batch with `rows` (B,) bool mirrored a <-> h (every bitboard byte bit-reversed); the
    other rows, the side to move, castling, the mirrored flags and the targets as they are.
    Training-time augmentation (ModelSpec.mirror_files): callers pass rows of file_mirrorable only."""
    flipped = _REVERSED_BITS.to(batch.planes.device)[batch.planes.long()]
    planes = torch.where(rows[:, None], flipped, batch.planes)
    return Batch(planes, batch.white_to_move, batch.castling, batch.mirrored, batch.target)


class Encoder:
    name = ""
    version = 1
    shape: tuple[int, ...] = ()

    def __call__(self, batch: Batch) -> torch.Tensor:
        raise NotImplementedError


class Bitmap768(Encoder):
    """12 x 64 piece bits (Sabatelli's bitmap input)."""

    name, shape = "bitmap768", (12, 8, 8)

    def __call__(self, batch):
        return oriented(batch)[0]


class Bitmap773(Encoder):
    """768 piece bits + side to move + 4 castling rights (DeepChess)."""

    name, shape = "bitmap773", (773,)

    def __call__(self, batch):
        board, castling, stm = oriented(batch)
        bits = ((castling[:, None] >> torch.arange(4, device=castling.device)) & 1).float()
        return torch.cat([board.flatten(1), stm.float()[:, None], bits], dim=1)


class Algebraic(Encoder):
    """One 8 x 8 plane of piece values: +1 3 3 5 9 10 for White (the side to move when
    mirrored), negative for Black (Sabatelli's algebraic input)."""

    name, shape = "algebraic", (1, 8, 8)

    def __call__(self, batch):
        board = oriented(batch)[0]
        v = torch.tensor(PIECE_VALUES + tuple(-x for x in PIECE_VALUES), device=board.device)
        return (board * v[None, :, None, None]).sum(1, keepdim=True)


class AlgebraicOneHot(Encoder):
    """The algebraic input's information one-hot: 10 planes, a square's signed value (+1 3 5 9 10
    for White, the side to move when mirrored; the same negated for Black) as one bit. The knight
    and bishop planes are merged, as the algebraic plane merges them (both 3). Not Sabatelli's: a
    study input that tells the information the algebraic plane holds from its one-number-a-square
    form (docs/results/regularised.md)."""

    name, shape = "algebraic_onehot", (10, 8, 8)

    def __call__(self, batch):
        board = oriented(batch)[0]
        return torch.cat([_minor_merged(board[:, :6]), _minor_merged(board[:, 6:])], dim=1)


def _minor_merged(side: torch.Tensor) -> torch.Tensor:
    """One side's 6 planes (P N B R Q K) as 5: P, N or B, R, Q, K."""
    return torch.cat([side[:, :1], side[:, 1:2] + side[:, 2:3], side[:, 3:]], dim=1)


class Mailbox64(Encoder):
    """64 squares, each the signed piece type (1..6 White, -1..-6 Black, 0 empty), scaled by 1/6."""

    name, shape = "mailbox64", (64,)

    def __call__(self, batch):
        board = oriented(batch)[0].flatten(2)  # (B, 12, 64)
        codes = torch.tensor([1, 2, 3, 4, 5, 6, -1, -2, -3, -4, -5, -6], dtype=torch.float32, device=board.device)
        return (board * codes[None, :, None]).sum(1) / 6.0


class PieceList(Encoder):
    """Hui's piece-list coordinates: for each colour and piece type a fixed number of slots
    (8 pawns, 2 knights, 2 bishops, 2 rooks, a queen, a king), each (present, file/7, rank/7),
    pieces in square order; 32 slots, 96 numbers."""

    name, shape = "piece_list", (96,)

    def __call__(self, batch):
        out = []
        for has, order in piece_slots(batch):
            triple = torch.stack([has, has * (order % 8).float() / 7, has * (order // 8).float() / 7], dim=2)
            out.append(triple.flatten(1))  # (B, slots * 3)
        return torch.cat(out, dim=1)


def piece_slots(batch):
    """The piece list's slots, plane by plane (12, in the side to move's orientation): for each,
    (has, order), both (B, slots): order the squares of that plane's pieces in square order,
    then empty squares; has 1 where the slot holds a piece, 0 where it is empty."""
    board = oriented(batch)[0].flatten(2)  # (B, 12, 64)
    squares = torch.arange(64, device=board.device, dtype=torch.float32)
    # Occupied squares first, in square order: key = square, or 64 + square if empty. The keys
    # are distinct, so the 8 smallest of each plane (one topk for all 12 planes, not a full sort
    # a plane) come in the order a sort gives them.
    keys = squares + 64 * (1 - board)
    orders = keys.topk(max(PIECE_LIST_SLOTS), dim=2, largest=False, sorted=True).indices  # (B, 12, 8)
    for plane in range(12):
        order = orders[:, plane, : PIECE_LIST_SLOTS[plane % 6]]
        yield board[:, plane].gather(1, order), order


class Bitmap768Counts(Encoder):
    """The 768 piece bits (`bitmap768`, flattened) followed by the 12 piece counts P N B R Q K
    p n b r q k, the side to move's first when mirrored (780 numbers). Material is a sum over the
    board: given the counts, a network need not learn each piece's value square by square from
    the bits, which it fails to do on a few thousand games (README, Training: issue 19)."""

    name, shape = "bitmap768_counts", (780,)

    def __call__(self, batch):
        board = oriented(batch)[0]
        return torch.cat([board.flatten(1), board.flatten(2).sum(2)], dim=1)


class PieceCounts(Encoder):
    """The 12 piece counts alone (as in `bitmap768_counts`): what a material evaluation sees."""

    name, shape = "piece_counts", (12,)

    def __call__(self, batch):
        return oriented(batch)[0].flatten(2).sum(2)


ENCODERS: dict[str, Encoder] = {
    e.name: e
    for e in (
        Bitmap768(),
        Bitmap773(),
        Algebraic(),
        AlgebraicOneHot(),
        Mailbox64(),
        PieceList(),
        Bitmap768Counts(),
        PieceCounts(),
    )
}


def get_encoder(name: str) -> Encoder:
    try:
        return ENCODERS[name]
    except KeyError:
        raise KeyError(f"no encoder {name!r}; known: {', '.join(ENCODERS)}") from None


# Bitboard arithmetic on int64 tensors (bit k = square k), for the feature encoder. -------


def _i64(x: int) -> int:
    """A 64-bit pattern as a signed int64 value."""
    x &= (1 << 64) - 1
    return x - (1 << 64) if x >= 1 << 63 else x


_FILE_A = 0x0101010101010101
_NOT_A, _NOT_H = _i64(~_FILE_A), _i64(~(_FILE_A << 7))
_NOT_AB, _NOT_GH = _i64(~(_FILE_A | _FILE_A << 1)), _i64(~(_FILE_A << 6 | _FILE_A << 7))
_ALL = -1
_RMASK = [_i64((1 << (64 - n)) - 1) if n else -1 for n in range(64)]
_DIRECTIONS = {  # shift, mask of squares a step may land on
    "n": (8, _ALL),
    "s": (-8, _ALL),
    "e": (1, _NOT_A),
    "w": (-1, _NOT_H),
    "ne": (9, _NOT_A),
    "nw": (7, _NOT_H),
    "se": (-7, _NOT_A),
    "sw": (-9, _NOT_H),
}
_ORTHOGONAL, _DIAGONAL = ("n", "s", "e", "w"), ("ne", "nw", "se", "sw")
_POW2 = [_i64(1 << k) for k in range(64)]


def _shift(b: torch.Tensor, n: int) -> torch.Tensor:
    return b << n if n > 0 else (b >> -n) & _RMASK[-n]  # logical right shift


def _ray(gen: torch.Tensor, empty: torch.Tensor, direction: str) -> torch.Tensor:
    """Kogge-Stone: squares attacked along one direction by the pieces in gen."""
    n, m = _DIRECTIONS[direction]
    pro = empty & m
    gen = gen | (pro & _shift(gen, n))
    pro = pro & _shift(pro, n)
    gen = gen | (pro & _shift(gen, 2 * n))
    pro = pro & _shift(pro, 2 * n)
    gen = gen | (pro & _shift(gen, 4 * n))
    return _shift(gen, n) & m


def _knight(b):
    l1, l2 = (b >> 1) & _RMASK[1] & _NOT_H, (b >> 2) & _RMASK[2] & _NOT_GH
    r1, r2 = (b << 1) & _NOT_A, (b << 2) & _NOT_AB
    h1, h2 = l1 | r1, l2 | r2
    return (h1 << 16) | _shift(h1, -16) | (h2 << 8) | _shift(h2, -8)


def _king(b):
    a = ((b << 1) & _NOT_A) | (_shift(b, -1) & _NOT_H)
    c = b | a
    return a | (c << 8) | _shift(c, -8)


def _pawn_attacks(b, white: bool):
    if white:
        return ((b << 9) & _NOT_A) | ((b << 7) & _NOT_H)
    return (_shift(b, -7) & _NOT_A) | (_shift(b, -9) & _NOT_H)


_POP8 = torch.tensor([bin(i).count("1") for i in range(256)], dtype=torch.int64)


def _popcount(b: torch.Tensor) -> torch.Tensor:
    """Bits set in each int64 (a byte table over the 8 bytes)."""
    return _POP8.to(b.device)[b.contiguous().view(torch.uint8).long()].reshape(*b.shape, 8).sum(-1)


def _union(bb: torch.Tensor, planes) -> torch.Tensor:
    out = torch.zeros_like(bb[:, 0])
    for i in planes:
        out = out | bb[:, i]
    return out


def oriented_bitboards(batch: Batch) -> torch.Tensor:
    """(B, 12) int64 bitboards straight from the packed planes (little-endian), mirrored rows
    with colours swapped and ranks flipped (a byte reversal), as `oriented` does."""
    p = batch.planes.reshape(-1, 12, 8)  # byte j of a plane is rank j
    m = batch.mirrored
    if bool(m.any()):
        flipped = torch.cat([p[:, 6:], p[:, :6]], dim=1).flip(2)
        p = torch.where(m[:, None, None], flipped, p)
    return p.contiguous().view(torch.int64).reshape(-1, 12)


CENTRE = (26, 27, 28, 34, 35, 36)  # c4 d4 e4 c5 d5 e5
F2, F7 = 13, 53
ATTACKER_WEIGHTS = (1, 3, 3, 5, 9, 10)


def attackers_to(bb: torch.Tensor, squares: tuple[int, ...], white: bool) -> list[torch.Tensor]:
    """Bitboards (B, len(squares)) of the pieces of one colour (P N B R Q K) attacking each square."""
    o = 0 if white else 6
    occ = _union(bb, range(12))[:, None]
    target = torch.tensor([_POW2[sq] for sq in squares], dtype=torch.int64, device=bb.device)[None, :]
    target = target.expand(bb.shape[0], -1)
    empty = ~occ
    diag = torch.zeros_like(target)
    orth = torch.zeros_like(target)
    for d in _DIAGONAL:
        diag = diag | _ray(target, empty, d)
    for d in _ORTHOGONAL:
        orth = orth | _ray(target, empty, d)
    p = [bb[:, o + i, None] for i in range(6)]
    return [
        _pawn_attacks(target, not white) & p[0],
        _knight(target) & p[1],
        diag & p[2],
        orth & p[3],
        (diag | orth) & p[4],
        _king(target) & p[5],
    ]


def king_safety(bb: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(in check (B, 2) bool for White and Black, pinned pieces of both colours (B,) bitboard),
    from rays cast out of both kings at once: a piece of the king's colour first on a ray, with
    an enemy slider of that ray's kind behind it, is pinned."""
    occ = _union(bb, range(12))[:, None]
    own = torch.stack([_union(bb, range(0, 6)), _union(bb, range(6, 12))], dim=1)
    king = bb[:, [5, 11]]
    enemy = lambda i: bb[:, [6 + i, i]]  # noqa: E731  (the other colour's plane i, per king)
    diag_sliders, orth_sliders = enemy(2) | enemy(4), enemy(3) | enemy(4)
    empty = ~occ
    pinned = torch.zeros_like(king)
    attacked = torch.zeros_like(king)
    for dirs, sliders in ((_DIAGONAL, diag_sliders), (_ORTHOGONAL, orth_sliders)):
        for d in dirs:
            first = _ray(king, empty, d)
            attacked = attacked | (first & sliders)
            blocker = first & own
            xray = _ray(king, ~(occ ^ blocker), d)
            hit = (xray & ~first & sliders) != 0
            pinned = pinned | torch.where(hit, blocker, torch.zeros_like(blocker))
    pawns = torch.stack([_pawn_attacks(king[:, 0], True), _pawn_attacks(king[:, 1], False)], dim=1)
    attacked = attacked | (_knight(king) & enemy(1)) | (pawns & enemy(0)) | (_king(king) & enemy(5))
    return attacked != 0, pinned[:, 0] | pinned[:, 1]


class Features(Encoder):
    """Sabatelli's feature input as 16 planes: the 12 piece planes; whether the side to move is
    in check (a constant plane); pinned pieces of both sides; control of c4 c5 d4 d5 e4 e5
    (White's attackers minus Black's, / 4, on those squares); attacks on f2 and f7 weighted by
    attacker strength (P 1, N 3, B 3, R 5, Q 9, K 10; Black's attackers of f2 negative, White's
    of f7 positive, / 10). Computed with bitboard arithmetic on the device. Our reading of the
    thesis's description; its exact scaling is not published."""

    name, shape = "features", (16, 8, 8)

    def __call__(self, batch):
        board, _, stm = oriented(batch)
        bb = oriented_bitboards(batch)
        b = board.shape[0]
        in_check, pins = king_safety(bb)
        check = torch.where(stm, in_check[:, 0], in_check[:, 1]).float()
        pin_plane = ((pins.unsqueeze(-1) >> torch.arange(64, device=bb.device)) & 1).float()
        extra = torch.zeros(b, 2, 64, device=board.device)
        squares = CENTRE + (F2, F7)
        w_counts = [_popcount(a) for a in attackers_to(bb, squares, True)]  # per piece type: (B, 8)
        k_counts = [_popcount(a) for a in attackers_to(bb, squares, False)]
        centre = (sum(w_counts) - sum(k_counts))[:, : len(CENTRE)].float() / 4
        extra[:, 0, list(CENTRE)] = centre
        extra[:, 1, F2] = -sum(wt * c[:, len(CENTRE)] for wt, c in zip(ATTACKER_WEIGHTS, k_counts)).float() / 10
        extra[:, 1, F7] = sum(wt * c[:, len(CENTRE) + 1] for wt, c in zip(ATTACKER_WEIGHTS, w_counts)).float() / 10
        planes = torch.cat([board.flatten(2), check[:, None, None].expand(b, 1, 64), pin_plane[:, None], extra], 1)
        return planes.reshape(b, 16, 8, 8)


ENCODERS[Features.name] = Features()


# Per-piece inputs (Team 44's piece-value network). ------------------------------------------

PIECE_SQUARE_BITS = 64
"""The one-hot square of the valued piece that follows the 773 position bits."""


@dataclass
class PieceRows:
    """Every piece of a batch, ready to be valued piece by piece (N pieces, B positions).

    Each piece is seen from its owner's side: a White piece with the position as it is, a Black
    piece with the position mirrored (colours swapped, ranks flipped, castling rights swapped,
    side to move flipped), as Bitmap773 encodes a mirrored row. So one network per piece type
    values both colours, and a value is always what the piece is worth to its owner. The 837
    inputs of piece i are `boards[board[i]]` (773) followed by the one-hot of `square[i]` (64),
    both in the owner's orientation; `dense()` builds them, the model uses the split form."""

    boards: torch.Tensor  # (2B, 773) float: rows 0..B-1 White's view, B..2B-1 Black's (mirrored)
    board: torch.Tensor  # (N,) long: the row of `boards` each piece is seen with
    square: torch.Tensor  # (N,) long: the piece's square in its owner's orientation (0 = a1)
    piece_type: torch.Tensor  # (N,) long: 0..5 = P N B R Q K
    sign: torch.Tensor  # (N,) float: +1 White's piece, -1 Black's
    position: torch.Tensor  # (N,) long: the batch row (position) the piece belongs to
    positions: int  # B
    board_square: torch.Tensor  # (N,) long: the piece's square on the real board (0 = a1)

    def dense(self) -> torch.Tensor:
        """The (N, 837) per-piece input matrix."""
        onehot = torch.nn.functional.one_hot(self.square, PIECE_SQUARE_BITS).to(self.boards.dtype)
        return torch.cat([self.boards[self.board], onehot], dim=1)


class Pieces837(Encoder):
    """One 837-input row per piece (Team 44): the position's 773 bits (768 piece bits, side to
    move, 4 castling rights) seen from the piece owner's side, and the one-hot square of the
    piece being valued; delivered as PieceRows (a variable number of rows per position)."""

    name, shape = "pieces837", (837,)

    def __call__(self, batch: Batch) -> PieceRows:
        b = batch.planes.shape[0]
        as_is = Batch(batch.planes, batch.white_to_move, batch.castling, torch.zeros_like(batch.mirrored))
        flipped = Batch(batch.planes, batch.white_to_move, batch.castling, torch.ones_like(batch.mirrored))
        boards = torch.cat([ENCODERS["bitmap773"](as_is), ENCODERS["bitmap773"](flipped)])
        pos, plane, sq = unpack(batch.planes).nonzero(as_tuple=True)
        black = plane >= 6
        return PieceRows(
            boards=boards,
            board=pos + b * black.long(),
            square=torch.where(black, sq ^ 56, sq),
            piece_type=plane % 6,
            sign=1.0 - 2.0 * black.float(),
            position=pos,
            positions=b,
            board_square=sq,
        )


ENCODERS[Pieces837.name] = Pieces837()


# Hui's representations (training/td/models.py learns over the antisymmetric one). ---------------------


class CompressedPieceList(Encoder):
    """Hui's compressed piece list (our reading): the piece list's 32 slots, each one number,
    (square + 1) / 64 of the piece in it, 0 for an empty slot; 32 numbers."""

    name, shape = "compressed_piece_list", (32,)

    def __call__(self, batch):
        return torch.cat([has * (order.float() + 1) / 64 for has, order in piece_slots(batch)], dim=1)


class AntisymmetricBitboard(Encoder):
    """Hui's antisymmetric bitboard: 6 x 64, +1 for a White piece on its square, -1 for a Black
    piece on its rank-flipped square; swapping the colours negates it (training/td/models.py)."""

    name, shape = "antisymmetric_bitboard", (384,)

    def __call__(self, batch):
        board = oriented(batch)[0]  # (B, 12, 8, 8) [rank, file]
        return (board[:, :6] - board[:, 6:].flip(2)).flatten(1)


ENCODERS[CompressedPieceList.name] = CompressedPieceList()
ENCODERS[AntisymmetricBitboard.name] = AntisymmetricBitboard()
