"""Encoders against boards worked out by hand."""

import chess
import numpy as np
import torch

from pipeline.ingest.encoding import PLANE_ORDER
from training.encoders import Batch, get_encoder, unpack

CASTLE_BITS = ((chess.BB_H1, 1), (chess.BB_A1, 2), (chess.BB_H8, 4), (chess.BB_A8, 8))


def batch_of(*boards: chess.Board, mirrored=None) -> Batch:
    planes, stm, castling = [], [], []
    for b in boards:
        raw = b"".join(
            int(b.pieces_mask(chess.Piece.from_symbol(s).piece_type, chess.Piece.from_symbol(s).color)).to_bytes(
                8, "little"
            )
            for s in PLANE_ORDER
        )
        planes.append(np.frombuffer(raw, dtype=np.uint8))
        stm.append(b.turn)
        castling.append(sum(bit for sq, bit in CASTLE_BITS if b.castling_rights & sq))
    m = torch.tensor(mirrored if mirrored is not None else [False] * len(boards))
    return Batch(torch.from_numpy(np.stack(planes)), torch.tensor(stm), torch.tensor(castling, dtype=torch.uint8), m)


def test_unpack_puts_each_piece_on_its_square():
    bits = unpack(batch_of(chess.Board()).planes)[0]  # (12, 64)
    assert bits[0].nonzero().flatten().tolist() == list(range(8, 16))  # white pawns a2..h2
    assert bits[5].nonzero().flatten().tolist() == [chess.E1]
    assert bits[11].nonzero().flatten().tolist() == [chess.E8]
    assert bits.sum().item() == 32


def test_bitmap768_start_position():
    x = get_encoder("bitmap768")(batch_of(chess.Board()))[0]  # (12, rank, file)
    assert x.shape == (12, 8, 8)
    assert x[0, 1].tolist() == [1.0] * 8 and x[6, 6].tolist() == [1.0] * 8  # pawns on ranks 2 and 7
    assert x[4, 0, 3] == 1 and x[10, 7, 3] == 1  # queens d1, d8
    assert x.sum() == 32


def test_mirrored_rows_play_the_side_to_move_as_white():
    after_e4 = chess.Board()
    after_e4.push_san("e4")  # Black to move
    x = get_encoder("bitmap768")(batch_of(after_e4, mirrored=[True]))[0]
    # Black's pieces become White's, flipped: full pawn rank 2, king e1.
    assert x[0, 1].tolist() == [1.0] * 8
    assert x[5, 0, 4] == 1
    # White's e4 pawn becomes a black pawn on e5; the other black pawns stand on rank 7.
    assert x[6, 4, 4] == 1 and x[6, 6].tolist() == [1, 1, 1, 1, 0, 1, 1, 1]
    y = get_encoder("bitmap773")(batch_of(after_e4, mirrored=[True]))[0]
    assert y[768] == 1  # the side to move is "White" now
    z = get_encoder("bitmap773")(batch_of(after_e4))[0]
    assert z[768] == 0 and z[769:].tolist() == [1, 1, 1, 1]


def test_mirrored_castling_rights_swap_colours():
    b = chess.Board("r3k2r/8/8/8/8/8/8/4K3 b kq - 0 1")  # only Black may castle
    plain = get_encoder("bitmap773")(batch_of(b))[0][769:].tolist()
    mirrored = get_encoder("bitmap773")(batch_of(b, mirrored=[True]))[0][769:].tolist()
    assert plain == [0, 0, 1, 1] and mirrored == [1, 1, 0, 0]


def test_algebraic_and_mailbox_values():
    a = get_encoder("algebraic")(batch_of(chess.Board()))[0, 0]
    assert a.sum() == 0 and a[0, 4] == 10 and a[7, 4] == -10 and a[0, 3] == 9 and a[1, 0] == 1 and a[0, 1] == 3
    b = chess.Board("4k3/8/8/8/8/8/8/R3K3 w - - 0 1")
    assert get_encoder("algebraic")(batch_of(b))[0, 0].sum() == 5  # R + K - K
    m = get_encoder("mailbox64")(batch_of(b))[0]
    assert m[chess.A1] == 4 / 6 and m[chess.E1] == 1 and m[chess.E8] == -1 and (m != 0).sum() == 3


def test_algebraic_onehot_holds_the_algebraic_plane_one_hot():
    # White: Kg1, Qd1, Nc3, Bf3, Ra1, pawn e4; Black: Ke8, Bc8, Ng8, Ra8, Rh8, pawn d5; Black to move,
    # as it stands and as stored mirrored (colours swapped, ranks flipped, read back the same).
    b = chess.Board("r1b1k1nr/8/8/3p4/4P3/2N2B2/8/R2Q2K1 b - - 0 1")
    seen = []
    for mirrored in (False, True):
        shown = b.mirror() if mirrored else b
        x = get_encoder("algebraic_onehot")(batch_of(shown, mirrored=[mirrored]))[0]
        seen.append(x)
        assert x.shape == (10, 8, 8) and set(x.unique().tolist()) <= {0.0, 1.0}
        assert (x.sum(0) <= 1).all()  # one bit a square at most
        values = torch.tensor([1.0, 3, 5, 9, 10, -1, -3, -5, -9, -10])
        algebraic = get_encoder("algebraic")(batch_of(shown, mirrored=[mirrored]))[0, 0]
        assert torch.equal((x * values[:, None, None]).sum(0), algebraic)
    assert torch.equal(seen[0], seen[1])
    x = seen[0]
    at = lambda plane: sorted(8 * r + f for r, f in x[plane].nonzero().tolist())  # noqa: E731
    assert at(1) == [chess.C3, chess.F3] and at(6) == [chess.C8, chess.G8]  # knights and bishops merged
    assert at(0) == [chess.E4] and at(2) == [chess.A1] and at(3) == [chess.D1] and at(4) == [chess.G1]
    assert at(5) == [chess.D5] and at(7) == [chess.A8, chess.H8] and at(9) == [chess.E8]


def test_piece_list_coordinates():
    b = chess.Board("4k3/8/8/8/8/8/3PP3/R3K3 w - - 0 1")
    x = get_encoder("piece_list")(batch_of(b))[0].reshape(-1, 3).double() * 7  # files and ranks 0..7
    # Slots: white P x8, N x2, B x2, R x2, Q, K, then Black's the same: 16 per side.
    pawns = x[:8]
    assert pawns[:2].round().tolist() == [[7, 3, 1], [7, 4, 1]] and pawns[2:].sum() == 0
    assert x[12].round().tolist() == [7, 0, 0]  # rook a1 (present is 1, times 7)
    assert x[15].round().tolist() == [7, 4, 0]  # king e1
    assert x[16 + 15].round().tolist() == [7, 4, 7]  # black king e8
    assert x[:, 0].sum().round() == 5 * 7


def test_piece_list_slots_are_the_first_pieces_in_square_order_and_drop_the_surplus():
    # Three white queens (one slot: a3, the lowest square), three knights (two slots), 8 pawns.
    b = chess.Board("4k3/8/1N6/8/8/Q3N2Q/PPPPPPPP/1N2K1Q1 b - - 0 1")
    x = get_encoder("piece_list")(batch_of(b))[0].reshape(-1, 3).double() * 7
    coords = lambda squares: [[7, chess.square_file(s), chess.square_rank(s)] for s in squares]  # noqa: E731
    assert x[:8].round().tolist() == coords(chess.SquareSet(chess.BB_RANK_2))
    assert x[8:10].round().tolist() == coords([chess.B1, chess.E3])  # the knight on b6 has no slot
    assert x[14].round().tolist() == coords([chess.G1])[0]  # queens g1, a3, h3: g1 is square 6
    compressed = get_encoder("compressed_piece_list")(batch_of(b))[0] * 64 - 1
    assert compressed[:10].round().long().tolist() == [*range(8, 16), chess.B1, chess.E3]
    assert compressed[10:14].round().tolist() == [-1] * 4 and compressed[14].round() == chess.G1


def _feature_facts(board: chess.Board):
    """What the feature planes must say, from python-chess."""
    pins = {sq for sq in chess.SQUARES if board.piece_at(sq) and board.is_pinned(board.piece_at(sq).color, sq)}
    centre = {
        sq: (len(board.attackers(chess.WHITE, sq)) - len(board.attackers(chess.BLACK, sq))) / 4
        for sq in (chess.C4, chess.D4, chess.E4, chess.C5, chess.D5, chess.E5)
    }
    weight = {chess.PAWN: 1, chess.KNIGHT: 3, chess.BISHOP: 3, chess.ROOK: 5, chess.QUEEN: 9, chess.KING: 10}
    f2 = -sum(weight[board.piece_type_at(s)] for s in board.attackers(chess.BLACK, chess.F2)) / 10
    f7 = sum(weight[board.piece_type_at(s)] for s in board.attackers(chess.WHITE, chess.F7)) / 10
    return board.is_check(), pins, centre, f2, f7


def test_feature_planes_agree_with_python_chess_on_real_positions(fics_2022):
    import io

    import chess.pgn

    from pipeline.ingest.archive import open_archive

    boards = []
    with open_archive(fics_2022) as raw, io.TextIOWrapper(raw, encoding="utf-8") as f:
        while len(boards) < 600:
            game = chess.pgn.read_game(f)
            b = game.board()
            for move in game.mainline_moves():
                b.push(move)
                boards.append(b.copy(stack=False))
    assert sum(b.is_check() for b in boards) > 10
    x = get_encoder("features")(batch_of(*boards))
    assert x.shape == (len(boards), 16, 8, 8)
    flat = x.flatten(2)
    pinned_seen = 0
    for i, b in enumerate(boards):
        check, pins, centre, f2, f7 = _feature_facts(b)
        assert flat[i, 12, 0].item() == float(check), b.fen()
        assert set(flat[i, 13].nonzero().flatten().tolist()) == pins, b.fen()
        pinned_seen += len(pins)
        for sq, v in centre.items():
            assert abs(flat[i, 14, sq].item() - v) < 1e-6, (b.fen(), chess.square_name(sq))
        assert abs(flat[i, 15, chess.F2].item() - f2) < 1e-6 and abs(flat[i, 15, chess.F7].item() - f7) < 1e-6
    assert pinned_seen > 20
    assert torch.equal(x[:, :12], get_encoder("bitmap768")(batch_of(*boards)))


def test_feature_planes_of_a_mirrored_row_are_those_of_the_mirrored_board():
    b = chess.Board("r3k2r/ppp2ppp/2n5/1B1pp3/3P4/2N5/PPP2PPP/R3K2R b KQkq - 0 1")  # Black to move
    mirrored = get_encoder("features")(batch_of(b, mirrored=[True]))
    direct = get_encoder("features")(batch_of(b.mirror()))
    assert torch.equal(mirrored, direct)


def test_bitmap768_counts_and_piece_counts_are_the_bits_and_python_chess_piece_counts():
    # Black to move, mirrored: the side to move's pieces come first (Black's here).
    b = chess.Board("r3k3/pp3ppp/8/8/8/8/PPP5/2KR1Q2 b q - 0 1")
    enc = get_encoder("bitmap768_counts")
    assert enc.shape == (780,)
    for mirrored, first, second in ((False, chess.WHITE, chess.BLACK), (True, chess.BLACK, chess.WHITE)):
        x = enc(batch_of(b, mirrored=[mirrored]))[0]
        assert x.shape == (780,)
        assert torch.equal(x[:768], get_encoder("bitmap768")(batch_of(b, mirrored=[mirrored]))[0].flatten())
        expected = [len(b.pieces(t, c)) for c in (first, second) for t in chess.PIECE_TYPES]
        assert x[768:].tolist() == expected
        assert get_encoder("piece_counts")(batch_of(b, mirrored=[mirrored]))[0].tolist() == expected


def test_mirror_files_is_python_chess_flip_horizontal_on_the_rows_asked():
    from training.encoders import file_mirrorable, mirror_files

    no_rights = chess.Board("4k3/1p4p1/8/2N5/5Pp1/8/P7/R3K3 b - f3 0 1")
    castles = chess.Board()  # both sides may castle: never mirrored
    batch = batch_of(no_rights, castles, no_rights)
    assert file_mirrorable(batch).tolist() == [True, False, True]
    out = mirror_files(batch, torch.tensor([True, False, False]))
    expected = batch_of(no_rights.transform(chess.flip_horizontal), castles, no_rights)
    assert torch.equal(out.planes, expected.planes)
    assert torch.equal(out.castling, batch.castling) and torch.equal(out.white_to_move, batch.white_to_move)
