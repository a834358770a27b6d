"""TD(lambda) / TD-Leaf(lambda) self-play (training/td/): the update by hand, the leaf rule,
learning on KRvK, the archives through ingest, reproducibility, the representations."""

import dataclasses
import math

import chess
import chess.pgn
import numpy as np
import pytest
import torch

from pipeline.play.search import AlphaBeta, MaterialEvaluator, board_arrays
from pipeline.store.store import Store
from training.encoders import ENCODERS, Batch
from training.td import play
from training.td.checkpoints import load_checkpoint
from training.td.checks import KRK_FEN, krk_generations, krk_mate_rate, pgn_games, vs_traditional, win_ratio_batches
from training.td.config import KRKCheck, TDConfig, TDEvaluation, krk_selfplay
from training.td.models import (
    FEATURES,
    MATERIAL_PAWNS,
    LinearValue,
    NetworkValue,
    ResidualValue,
    TDEvaluator,
    antisymmetric_features,
    initial_params,
    make_model,
)
from training.td.play import (
    GamePool,
    _leaf,
    _selfplay_end,
    play_line,
    play_selfplay_game,
    player_name,
    run_generation,
)
from training.td.update import GameRecord, td_coefficients, td_final, td_update

P, Q = 0, 4  # piece-type blocks of the 384 features


def idx(piece_type: int, square: int) -> int:
    return piece_type * 64 + square


def feats(*fens: str) -> np.ndarray:
    return antisymmetric_features([chess.Board(f) for f in fens])


def test_antisymmetric_features_negate_under_colour_flip_and_vanish_at_the_start():
    board = chess.Board("r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3")
    x, xm = antisymmetric_features([board, board.mirror()])
    assert np.array_equal(xm, -x) and x.any()
    assert not antisymmetric_features([chess.Board()]).any()  # the start is symmetric: all zero
    # A White pawn on e4 is +1 at (P, e4); a Black pawn on e5 is -1 at (P, e4) (ranks flipped).
    (e4,) = feats("4k3/8/8/8/4P3/8/8/4K3 w - - 0 1")
    (e5,) = feats("4k3/8/8/4p3/8/8/8/4K3 w - - 0 1")
    assert e4[idx(P, chess.E4)] == 1 and e5[idx(P, chess.E4)] == -1
    assert np.count_nonzero(e4) == 1 and np.count_nonzero(e5) == 1  # the kings cancel (e1 / e8)


def test_torch_encoders_match_the_numpy_features_and_shapes():
    boards = [
        chess.Board(),
        chess.Board("8/7k/8/5K2/8/8/8/4R3 b - - 0 1"),
        chess.Board("4k3/8/8/3q4/4P3/8/8/4K3 w - - 0 1"),
    ]
    planes, white, castling = board_arrays(boards)
    batch = Batch(
        torch.from_numpy(planes), torch.from_numpy(white), torch.from_numpy(castling), torch.zeros(3, dtype=torch.bool)
    )
    anti = ENCODERS["antisymmetric_bitboard"](batch).numpy()
    assert np.array_equal(anti, antisymmetric_features(boards))
    cpl = ENCODERS["compressed_piece_list"](batch)
    assert cpl.shape == (3, 32)
    # KRvK (Black to move, not mirrored): White's king f5 = 37 in the king slot, rook e1 = 4.
    krk = cpl[1].tolist()
    king_slot, rook_slot = 8 + 2 + 2 + 2 + 1, 8 + 2 + 2  # slots: P8 N2 B2 R2 Q1 K1 per colour
    assert krk[king_slot] == pytest.approx(38 / 64) and krk[rook_slot] == pytest.approx(5 / 64)
    assert sum(v > 0 for v in krk) == 3


def test_td_lambda_update_on_a_hand_computed_three_position_game():
    """Positions: the start (A), after 1.e4 (B), after 1.e4 e5 (C); White won. Weights: 0.5 on a
    White pawn on e4, else 0. Features: A = 0 and C = 0 (symmetric), B = +1 at (P, e4) and -1 at
    (P, e2) (Black's e7 pawn, flipped). So J = tanh(w.x) = 0, tanh(0.5) = 0.46211716, 0.
    d0 = 0.46211716, d1 = -0.46211716, d2 = 1 - 0 = 1 (the result).
    c2 = 1, c1 = d1 + 0.7 * c2 = 0.23788284, c0 = d0 + 0.7 * c1 = 0.62863515.
    grad J = (1 - J^2) x: zero at A and C, 0.78644773 * x_B at B.
    dw = 0.01 * c1 * 0.78644773 * x_B = +/-0.00187083 at (P, e4) / (P, e2), zero elsewhere."""
    x = feats(
        chess.STARTING_FEN,
        "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1",
        "rnbqkbnr/pppp1ppp/8/4p3/4P3/8/PPPP1PPP/RNBQKBNR w KQkq - 0 2",
    )
    w = np.zeros(FEATURES)
    w[idx(P, chess.E4)] = 0.5
    model = LinearValue(w)
    d, c = td_coefficients(model.value(x), 1.0, 0.7)
    assert d == pytest.approx([0.46211716, -0.46211716, 1.0])
    assert c == pytest.approx([0.62863515, 0.23788284, 1.0])
    record = GameRecord("", "1-0", 3, 0, 0.0, x.astype(np.int8), x.astype(np.int8), np.full(3, np.nan))
    delta, _ = td_update(model, record, "td_lambda", lam=0.7, lr=0.01)
    expected = np.zeros(FEATURES)
    expected[idx(P, chess.E4)], expected[idx(P, chess.E2)] = 0.00187083, -0.00187083
    assert delta == pytest.approx(expected, abs=1e-8)
    # Without a result (a game stopped at the cap) the last position gets no update: c = [c0', c1'].
    record.result = "*"
    _, c_cap = td_coefficients(model.value(x), None, 0.7)
    assert c_cap == pytest.approx([0.46211716 + 0.7 * -0.46211716, -0.46211716])


def test_td_leaf_updates_the_leaf_of_the_principal_variation_not_the_root():
    """White's e4 pawn can take the Black queen on d5. With value on queens, the 1-ply search
    plays exd5: its leaf has a White pawn on d5 and no queen. TD-Leaf moves the (P, d5) weight
    only; TD(lambda) on the root moves (P, e4) and the queen's weight instead."""
    root = chess.Board("4k3/8/8/3q4/4P3/8/8/4K3 w - - 0 1")
    w = np.zeros(FEATURES)
    w[Q * 64 : Q * 64 + 64] = 0.3  # a queen is worth 0.3 anywhere
    model = LinearValue(w)
    res = AlphaBeta(TDEvaluator(model), depth=1).search(root)
    assert res.move == chess.Move.from_uci("e4d5")
    leaf, over = _leaf(root, res.pv)
    assert np.isnan(over)
    x_root, x_leaf = antisymmetric_features([root, leaf])
    record = GameRecord(
        "", "1-0", 1, 0, 0.0, x_root[None].astype(np.int8), x_leaf[None].astype(np.int8), np.array([np.nan])
    )
    leaf_delta, _ = td_update(model, record, "td_leaf", lam=0.7, lr=0.01)
    root_delta, _ = td_update(model, record, "td_lambda", lam=0.7, lr=0.01)
    assert set(np.flatnonzero(leaf_delta)) == {idx(P, chess.D5)}
    assert set(np.flatnonzero(root_delta)) == {idx(P, chess.E4), idx(Q, chess.D4)}  # Black's d5 queen, flipped
    assert leaf_delta[idx(P, chess.D5)] == pytest.approx(0.01 * 1.0)  # d = 1 - tanh(0), grad = 1 * x


def test_a_leaf_the_rules_end_takes_the_result_and_no_gradient():
    board = chess.Board("6k1/5ppp/8/8/8/8/8/R5K1 w - - 0 1")  # Ra8 mates
    res = AlphaBeta(TDEvaluator(LinearValue()), depth=1).search(board)
    leaf, over = _leaf(board, res.pv)
    assert leaf.is_checkmate() and over == 1.0


def test_the_krk_position_is_a_mate_in_three_a_three_ply_search_does_not_see():
    board = chess.Board(KRK_FEN)
    assert AlphaBeta(MaterialEvaluator(), depth=5).search(board).mate_in == 3
    assert AlphaBeta(MaterialEvaluator(), depth=3).search(board).mate_in is None


def test_the_krk_check_reports_a_later_mate_as_a_lead_and_not_as_the_mate_in_three():
    """At 3 plies the untrained weights mate in 5 plies by their move order (1. Kf6 Kg8 2. Rh1
    Kf8 3. Rh8#, the mate in 3): asked for a mate within 5 plies that is generation 0 for both;
    asked for one within 3 (no such mate exists) only the lead, within 9, is found."""
    cfg = KRKCheck(td=dataclasses.replace(krk_selfplay(), workers=1)).td_config()
    out = krk_generations(cfg, 0, mate_plies=5, lead_plies=9, check_depth=3, defender_depth=6)
    assert (out["generations"], out["generations_to_lead"], out["curve"][0]["mate_plies"]) == (0, 0, 5)
    assert out["curve"][0]["moves"] == "1. Kf6 Kg8 2. Rh1 Kf8 3. Rh8#"
    out = krk_generations(cfg, 0, mate_plies=3, lead_plies=9, check_depth=3, defender_depth=6)
    assert (out["generations"], out["generations_to_lead"]) == (None, 0)
    with pytest.raises(ValueError, match="lead_plies must be at least mate_plies"):
        KRKCheck(mate_plies=5, lead_plies=4)
    # Not stopping at the mate: the generations after it are played and checked too, row by row.
    rows = []
    cfg = KRKCheck(td=dataclasses.replace(krk_selfplay(), games=2, workers=1)).td_config()
    out = krk_generations(cfg, 1, mate_plies=5, lead_plies=9, check_depth=3, stop_at_mate=False, on_row=rows.append)
    assert out["generations"] == 0 and [r["generation"] for r in rows] == [0, 1] and rows == out["curve"]
    assert sum(rows[1]["results"].values()) == 2


def test_the_residual_model_starts_as_the_linear_one_and_its_gradient_is_the_derivative():
    linear = make_model(TDConfig())
    residual = make_model(TDConfig(model="residual", hidden=4, seed=1))
    rng = np.random.default_rng(2)
    x = rng.integers(-1, 2, size=(3, FEATURES)).astype(np.float64)
    assert np.allclose(residual.value(x), linear.value(x))  # the hidden layer's output weights start at 0
    residual.params[-4:] = rng.normal(0, 0.5, 4)
    g, eps = residual.grad(x), 1e-6
    for i in (0, 100, FEATURES + 5, FEATURES * 5 - 1, len(residual.params) - 1):
        up, down = residual.params.copy(), residual.params.copy()
        up[i] += eps
        down[i] -= eps
        numeric = (ResidualValue(None, up, 4).value(x) - ResidualValue(None, down, 4).value(x)) / (2 * eps)
        assert np.allclose(numeric, g[:, i], atol=1e-8), i


@pytest.mark.slow  # 4 to 5 s idle: the fast tier stays under 2 minutes
def test_a_few_generations_on_krk_raise_the_mate_rate_over_the_untrained_weights():
    cfg = TDConfig(
        start="krk", init="zero", depth=1, games=30, random_plies=0, curve_games=0, lr=0.2, workers=1, seed=0
    )
    rate = lambda params: krk_mate_rate(make_model(cfg, params), 1, 20, 60, seed=123, defender="random")  # noqa: E731
    params = initial_params(cfg)
    before = rate(params)
    pool = GamePool(1)
    for g in (1, 2):
        params = run_generation(pool, params, cfg, g).params
    after = rate(params)
    assert after >= before + 0.1, (before, after)


def test_krk_selfplay_at_the_checks_settings_keeps_the_rook():
    """A 1-ply search does not see the reply: the attacker leaves its rook en prise and the
    defender takes it, a draw by insufficient material (TD then learns KRvK is worth a draw).
    The check's self-play (KRKCheck: 2 plies, material start) keeps the rook."""
    k = KRKCheck()
    ends = {}
    for init, depth in (("zero", 1), (k.td.init, k.td.depth)):
        cfg = TDConfig(start="krk", init=init, depth=depth, games=4, random_plies=0, max_plies=24, workers=1)
        params = initial_params(cfg)
        ends[depth] = [play_selfplay_game(params, cfg, 1, i).pgn for i in range(4)]
    lost = {d: sum('[Termination "insufficient material"]' in pgn for pgn in games) for d, games in ends.items()}
    assert lost[1] >= 2 and lost[k.td.depth] == 0, lost


def _tiny(**kw) -> TDConfig:
    base = dict(name="t", depth=1, games=3, max_plies=24, curve_games=2, curve_plies=20, workers=1, seed=3)
    return TDConfig(**{**base, **kw})


def test_same_seed_same_games_and_weights_whatever_the_process_count(tmp_path):
    a = play_line(Store(tmp_path / "a").ensure(), _tiny(), log=lambda s: None)
    b = play_line(Store(tmp_path / "b").ensure(), _tiny(workers=2), log=lambda s: None)
    c = play_line(Store(tmp_path / "c").ensure(), _tiny(seed=4), log=lambda s: None)
    assert a.archives[0].read_text() == b.archives[0].read_text()
    assert np.array_equal(a.generations[0].params, b.generations[0].params)
    assert a.archives[0].read_text() != c.archives[0].read_text()
    params, cfg, ck = load_checkpoint(a.checkpoints[0])
    assert np.array_equal(params, a.generations[0].params) and cfg == _tiny() and ck["generation"] == 1


def test_a_line_resumes_from_its_checkpoint(tmp_path):
    store = Store(tmp_path).ensure()
    first = play_line(store, _tiny(), log=lambda s: None)
    second = play_line(store, _tiny(), resume_from=first.checkpoints[-1], log=lambda s: None)
    assert second.history[-1]["generation"] == 2 and second.archives[0].name == "gen-0002.pgn"
    kept = first.archives[0].read_text()
    other = play_line(store, _tiny(lr=0.5), resume_from=first.checkpoints[-1], log=lambda s: None)
    # Other settings: not this line's checkpoint, so untrained weights and a history of its own,
    # numbered after the archives already there (which stay as they were).
    assert len(other.history) == 1 and other.archives[0].name == "gen-0003.pgn"
    assert first.archives[0].read_text() == kept


def test_selfplay_games_land_in_games_through_ingest(tmp_path):
    import dagster as dg

    from pipeline.store import duck
    from tests.stores import materialize_archive

    store = Store(tmp_path / "store").ensure()
    line = play_line(store, _tiny(games=4, curve_games=0), log=lambda s: None)
    written = len(pgn_games(line.archives[0].read_text()))
    key = line.history[-1]["archive"]
    assert key in store.find_archives()
    with dg.instance_for_test() as instance:
        assert materialize_archive(instance, store, key).success
    duck.create_views(store)
    rows = duck.query(store, "SELECT source, count(*) AS n FROM games GROUP BY source").to_pylist()
    assert written == 4 and rows == [{"source": "selfplay", "n": 4}]


def test_win_ratio_batches_interval_and_names(tmp_path):
    cfg = _tiny(curve_plies=12)
    figures, games = win_ratio_batches(initial_params(cfg), cfg, batches=3, games=2)
    assert len(games) == 6 and len(figures["ratios"]) == 3
    lo, hi = figures["interval"]
    assert lo <= figures["mean"] <= hi and figures["peak"] == max(figures["ratios"])
    assert {g.white for g in games[::2]} == {player_name(cfg)}  # colours alternate
    assert {g.black for g in games[1::2]} == {player_name(cfg)}


def test_network_gradient_matches_finite_differences():
    rng = np.random.default_rng(0)
    model = NetworkValue(hidden=4, seed=1)
    x = rng.integers(-1, 2, size=(2, FEATURES)).astype(np.float64)
    g = model.grad(x)
    for k in (0, 5, 4 * FEATURES + 2):
        p = model.params.copy()
        model.params = p.copy()
        model.params[k] += 1e-6
        up = model.value(x)
        model.params[k] -= 2e-6
        down = model.value(x)
        model.params = p
        assert g[:, k] == pytest.approx((up - down) / 2e-6, abs=1e-6)
    assert model.value(-x) == pytest.approx(-model.value(x))  # antisymmetric


def test_bad_settings_say_what_is_valid():
    with pytest.raises(ValueError, match="td_leaf, td_lambda"):
        TDConfig(learner="td")
    with pytest.raises(ValueError, match="eval_depth must be 0 .the line's own depth. or more, got -1"):
        TDEvaluation(eval_depth=-1)
    with pytest.raises(ValueError, match="batch_games must be at least 1, got 0"):
        TDEvaluation(batch_games=0)
    with pytest.raises(ValueError, match="name"):
        TDConfig(name="../x")
    assert math.isfinite(TDConfig().lr)


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("learner", "td", "learner must be one of td_leaf, td_lambda; got 'td'"),
        ("model", "mlp", "model must be one of linear, network, residual; got 'mlp'"),
        ("init", "materal", "init must be one of material, random, zero; got 'materal'"),
        ("start", "kqk", "start must be one of standard, krk; got 'kqk'"),
    ],
)
def test_every_choice_is_refused_in_the_projects_one_wording(field, value, message):
    """The choices come from the Literal annotations (declared once) and are refused the way
    every other choice is (training.choices.check_choice)."""
    with pytest.raises(ValueError) as e:
        TDConfig(**{field: value})
    assert str(e.value) == message


def test_match_against_the_traditional_evaluation_in_worker_processes():
    cfg = _tiny(workers=2)
    m = vs_traditional(initial_params(cfg), cfg, openings=1, max_plies=120)
    assert [(g.white == m.a, g.black == m.a) for g in m.games] == [(True, False), (False, True)]
    assert m.b == "material_pst alpha-beta depth 1" and all(g.opening == "sabatelli.01" for g in m.games)
    assert all(len(list(g.game.mainline_moves())) == g.plies for g in m.games)


def test_selfplay_claims_the_fifty_move_rule_where_the_search_has_no_move():
    """Without draw claims a KRvK game reached halfmove clock 100: the search scores that root a
    draw and returns no move (the game crashed pushing None). Self-play claims the fifty moves."""
    board = chess.Board("KR6/3k4/8/8/8/8/8/8 w - - 100 51")
    assert AlphaBeta(TDEvaluator(LinearValue()), depth=1).search(board).move is None
    assert _selfplay_end(board) == ("1/2-1/2", "fifty-move rule (claimed)")
    assert _selfplay_end(chess.Board("KR6/3k4/8/8/8/8/8/8 w - - 99 51")) is None


def test_a_game_the_fifty_move_rule_ends_is_unfinished_where_clock_ends_says_so():
    """A KRvK game of three positions that the fifty-move rule ended (1/2-1/2). As a draw its
    last target is 0; with clock_ends 'unfinished' it has none, exactly as a game stopped at the
    cap ('*'): the last position keeps its value. A mate and a draw by insufficient material stay
    results. The KRvK check learns so; a standard line keeps the draw unless told."""
    x = feats(
        "8/7k/8/5K2/8/8/8/4R3 w - - 97 60", "8/8/6k1/5K2/8/8/8/4R3 w - - 98 60", "8/8/6k1/8/5K2/8/8/4R3 b - - 99 60"
    )
    model = LinearValue(np.repeat(np.array(MATERIAL_PAWNS) * 0.1, 64) + np.linspace(-0.05, 0.05, FEATURES))
    j = model.value(x)
    assert len(set(np.round(j, 6))) == 3 and abs(j[-1]) > 0.3  # distinct values, far from the draw's 0
    fifty = GameRecord("", "1/2-1/2", 100, 0, 0.0, x.astype(np.int8), x.astype(np.int8), np.full(3, np.nan))
    fifty.termination = "fifty-move rule (claimed)"
    capped = GameRecord("", "*", 160, 0, 0.0, x.astype(np.int8), x.astype(np.int8), np.full(3, np.nan))
    as_draw, d_draw = td_update(model, fifty, "td_lambda", lam=0.7, lr=0.01)
    unfinished, d_open = td_update(model, fifty, "td_lambda", lam=0.7, lr=0.01, clock_ends="unfinished")
    cap, _ = td_update(model, capped, "td_lambda", lam=0.7, lr=0.01)
    assert d_draw[-1] == pytest.approx(0.0 - j[-1]) and len(d_open) == 2  # no difference against a result
    assert unfinished == pytest.approx(cap, abs=1e-15) and not np.allclose(unfinished, as_draw)
    for result, termination, value in [("1-0", "checkmate", 1.0), ("1/2-1/2", "insufficient material", 0.0)]:
        r = GameRecord("", result, 9, 0, 0.0, x.astype(np.int8), x.astype(np.int8), np.full(3, np.nan), termination)
        assert td_final(r, "unfinished") == value
    assert KRKCheck().td.clock_ends == "unfinished" and TDConfig().clock_ends == "draw"


def test_selfplay_records_the_fifty_move_end_and_the_generation_learns_it_as_unfinished(monkeypatch):
    """Self-play from a KRvK position 4 half-moves before the fifty moves: the game ends by the
    claimed rule, its record says so, and the generation's update is the unfinished game's (the
    game as '*') under clock_ends 'unfinished', the draw's under 'draw'."""
    monkeypatch.setattr(play, "start_position", lambda cfg, rng: chess.Board("KR6/3k4/8/8/8/8/8/8 w - - 96 51"))
    base = dict(start="krk", depth=1, games=1, random_plies=0, curve_games=0, workers=1)
    params = initial_params(TDConfig(**base))
    record = play_selfplay_game(params, TDConfig(**base), 1, 0)
    assert (record.result, record.termination, record.plies) == ("1/2-1/2", "fifty-move rule (claimed)", 104)
    assert '[Termination "fifty-move rule (claimed)"]' in record.pgn
    model = LinearValue(params.copy())
    as_draw, _ = td_update(model, record, "td_leaf", 0.7, 0.01)
    record.result = "*"
    as_cap, _ = td_update(model, record, "td_leaf", 0.7, 0.01)
    assert not np.allclose(as_draw, as_cap)
    with GamePool(1) as pool:
        for clock_ends, delta in [("unfinished", as_cap), ("draw", as_draw)]:
            gen = run_generation(pool, params, TDConfig(**base, clock_ends=clock_ends), 1)
            assert gen.params == pytest.approx(params + delta, abs=1e-12)


def test_learning_curve_chart_fits_and_shows_both_series():
    from pipeline import plots

    history = [
        {"generation": 1, "td_error": 0.02, "win_ratio": 0.4, "win_interval": [0.2, 0.6]},
        {"generation": 2, "td_error": 0.01, "win_ratio": None, "win_interval": None},
        {"generation": 3, "td_error": 0.015, "win_ratio": 0.7, "win_interval": [0.5, 0.85]},
    ]
    fig = plots.selfplay_curve_figure(history, "a_long_self_play_line_name: td_network td_lambda, lambda 0.7, lr 0.01")
    plots.fit_texts(fig)
    renderer = fig.canvas.get_renderer()
    assert not [t.get_text() for t in plots._texts(fig) if plots.overflows(t, fig, renderer)]
    ax, ax2 = fig.axes
    assert list(ax2.lines[0].get_xdata()) == [1, 2, 3] and ax.get_ylim() == (0, 1)
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["win ratio vs random (95%)", "TD error (mean d^2)"]
    assert plots.selfplay_curve_png(history, "t").startswith(b"\x89PNG")


def test_a_generation_never_writes_over_an_archive_another_run_wrote_meanwhile(tmp_path):
    # Two runs of one line: the other writes and registers gen-0001.pgn while this one plays its
    # generation 1. Its archive keeps its bytes and key; this run's games get a numbered name
    # beside it, as Store.add_archive does with a name already taken.
    store = Store(tmp_path).ensure()
    theirs = store.archives_dir / "selfplay" / "t" / "gen-0001.pgn"
    other = '[Event "the other run"]\n[Result "*"]\n\n*\n'

    def other_run_writes():
        if not theirs.exists():
            theirs.parent.mkdir(parents=True, exist_ok=True)
            theirs.write_text(other)
            store.add_archive(theirs)  # in place, as a file of the archives folder

    line = play_line(store, _tiny(generations=1, curve_games=0), on_game=other_run_writes, log=lambda s: None)
    assert theirs.read_text() == other
    (mine,) = line.archives
    assert mine != theirs and mine.name == "gen-0001-1.pgn"
    assert len(pgn_games(mine.read_text())) == 3
    keys = store.find_archives()
    assert line.history[-1]["archive"] in keys and keys[line.history[-1]["archive"]] == mine
    assert theirs in keys.values()
