"""How well an evaluator plays: test suites, matches, endgame conversion (no Dagster here).

Each function returns figure rows (suite, metric, value, n, detail) for the store's
evaluation_results table, plus the details a report shows; write_results and
write_model_metrics write the figure tables (match_games: pipeline.play.matches.write_games).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import chess
import pyarrow as pa

from pipeline.labels.pool import EnginePool
from pipeline.labels.uci import Limit
from pipeline.parallel import check_workers, ordered_map, resolve_workers
from pipeline.play.lubeck_grid import GRID_SUITE
from pipeline.play.matches import (
    MatchResult,
    MatchSpec,
    match_result,
    pairings,
    play_game,
    play_pairing,
)
from pipeline.play.search import AlphaBeta, Evaluator, RandomPlayer, SearchPlayer, StockfishPlayer
from pipeline.play.suites import (
    DeltaCp,
    EpdFile,
    EpdPosition,
    SuiteError,
    SuiteScore,
    engine_evaluations,
    is_sts,
    kaufman_delta_cp,
    kaufman_rows,
    read_epd,
    score_suite,
)
from pipeline.research.intervals import interval_rows, interval_text, mean_interval, small_sample, wilson_interval
from pipeline.research.published import HUI_RANDOM_PEAK, KAUFMAN_ANCHOR
from pipeline.store.duck import load_sql
from pipeline.store.schemas import METRICS_SCHEMA, RESULTS_SCHEMA
from pipeline.store.store import Store
from pipeline.store.store_files import write_parquet

Row = tuple[str, str, float, int, str]
"""(suite, metric, value, n, detail)"""

STS_ANCHOR = "DeepChess 1-ply: 1,160 / 15,000 (7.73%); Stockfish 5: 70.0%; Giraffe 1 s: 64.3%"
RANDOM_ANCHOR = f"Hui: {HUI_RANDOM_PEAK:.0%} wins against the random mover (peak)"
ENDGAME_MATCH = "endgame conversion"


def write_results(store: Store, asset: str, run_id: str, rows: list[tuple[str, str, str, float, int, str]]) -> Path:
    """(model, suite, metric, value, n, detail) rows into evaluation_results/<asset>/<run_id>.parquet."""
    made = datetime.now(UTC)
    cols = list(zip(*rows)) if rows else [[] for _ in range(6)]
    table = pa.table(
        {
            "model": list(cols[0]),
            "suite": list(cols[1]),
            "metric": list(cols[2]),
            "value": [float(v) for v in cols[3]],
            "n": [int(v) for v in cols[4]],
            "detail": list(cols[5]),
            "asset": [asset] * len(rows),
            "run_id": [run_id] * len(rows),
            "materialised_at": [made] * len(rows),
        },
        schema=RESULTS_SCHEMA,
    )
    return write_parquet(store.root / "evaluation_results" / asset / f"{run_id}.parquet", table)


def write_model_metrics(
    store: Store, model: str, dataset: str, run_id: str, rows: list[tuple[str, str, float]]
) -> Path:
    """A training run's (split, metric, value) rows into model_metrics/<model>/<run_id>.parquet."""
    made = datetime.now(UTC)
    table = pa.table(
        {
            "model": [model] * len(rows),
            "dataset": [dataset] * len(rows),
            "split": [r[0] for r in rows],
            "metric": [r[1] for r in rows],
            "value": [r[2] for r in rows],
            "run_id": [run_id] * len(rows),
            "materialised_at": [made] * len(rows),
        },
        schema=METRICS_SCHEMA,
    )
    return write_parquet(store.root / "model_metrics" / model / f"{run_id}.parquet", table)


def depth_label(depth: int) -> str:
    """Metric suffix of a search depth: 1ply, depth2, ..."""
    return "1ply" if depth == 1 else f"depth{depth}"


def player_name(model: str, depth: int) -> str:
    """'<model> 1-ply' or '<model> depth N': how a network player is named in games and Elo."""
    return f"{model} 1-ply" if depth == 1 else f"{model} depth {depth}"


def suite_files(folder: Path) -> list[Path]:
    """The folder's .epd files (any case of the suffix); a broken link is listed too, so that
    reading it reports the suite as missing rather than leaving it out unsaid."""
    return sorted(p for p in folder.iterdir() if p.suffix.lower() == ".epd" and not p.is_dir())


SearchLimit = int | dict
"""A search's limit: a depth (plies), or AlphaBeta's keyword arguments, e.g. {"nodes": 1261,
"max_depth": 4, "quiescence": 4} for a node budget with a capture search."""


def _search_move(task: tuple[chess.Board, SearchLimit], evaluator: Evaluator) -> chess.Move:
    board, limit = task
    return AlphaBeta(evaluator, **({"depth": limit} if isinstance(limit, int) else limit)).search(board).move


def choose_moves(
    evaluator_factory: Callable[[], Evaluator],
    searches: Sequence[tuple[Sequence[EpdPosition], SearchLimit]],
    workers: int = 1,
    progress: Callable[[int], None] | None = None,
) -> list[list[chess.Move]]:
    """For each (positions, limit) of `searches`, the move the evaluator's search to that depth
    (or within that SearchLimit) plays in each position: every search fresh (an empty
    transposition table), so a move depends on its position alone, and all of them in one pool
    of `workers` processes (evaluator_factory picklable when more than one). progress(1) after
    each position."""
    tasks = [(p.board, limit) for positions, limit in searches for p in positions]
    moves = ordered_map(
        _search_move, tasks, workers, evaluator_factory, progress=progress and (lambda _done, _total: progress(1))
    )
    out, at = [], 0
    for positions, _ in searches:
        out.append(moves[at : at + len(positions)])
        at += len(positions)
    return out


@dataclass
class SuiteReport:
    name: str
    sts: bool
    scores: dict[int, SuiteScore] = field(default_factory=dict)
    """Search depth -> score."""
    kaufman: dict[int, list[DeltaCp]] = field(default_factory=dict)


def load_suite(path: Path, max_positions: int = 0, name: str | None = None) -> EpdFile:
    """A suite's readable positions (the first max_positions of them; 0: all) and the lines that
    failed (read_epd); SuiteError when the file cannot be read at all."""
    suite = read_epd(path, name or suite_name(path))
    if max_positions:
        suite.positions = suite.positions[:max_positions]
    return suite


def suite_name(path: Path) -> str:
    return path.name.split(".")[0]


def load_suites(files: list[Path], max_positions: int = 0) -> tuple[list[EpdFile], dict[str, str]]:
    """Every suite that reads, and for each that does not its name -> the reason: one bad file
    never stops the others. Two files whose names start alike keep their full file names."""
    names = [suite_name(f) for f in files]
    suites, unreadable = [], {}
    for f, name in zip(files, names):
        if names.count(name) > 1:
            name = f.name[: -len(f.suffix)]
        try:
            suites.append(load_suite(f, max_positions, name))
        except SuiteError as e:
            unreadable[name] = str(e)
    return suites, unreadable


def problem_rows(suite: EpdFile | None = None, unreadable: tuple[str, str] | None = None, listed: int = 5) -> list[Row]:
    """evaluation_results rows for what did not load: (suite, positions_failed, count, lines in
    the file, the first `listed` lines and reasons), or (suite, unreadable, 1, 0, the reason)."""
    if unreadable is not None:
        return [(unreadable[0], "unreadable", 1, 0, unreadable[1])]
    if suite is None or not suite.failures:
        return []
    detail = "; ".join(f"line {f.line}: {f.reason}" for f in suite.failures[:listed])
    more = len(suite.failures) - listed
    return [
        (
            suite.name,
            "positions_failed",
            len(suite.failures),
            suite.lines,
            detail + (f"; and {more:,} more" if more > 0 else ""),
        )
    ]


def run_suites(
    evaluator_factory: Callable[[], Evaluator],
    suites: Sequence[tuple[str, list[EpdPosition]]],
    depths: tuple[int, ...],
    pool: EnginePool | None,
    kaufman_limit: Limit | None,
    workers: int = 1,
    log: Callable[[str], None] = print,
    progress: Callable[[int], None] | None = None,
) -> list[tuple[SuiteReport, list[Row]]]:
    """Each (name, positions) suite (load_suite) at each search depth, every search in one pool
    of `workers` processes (choose_moves), then scored per suite (score_searched)."""
    t = time.monotonic()
    moves = iter(choose_moves(evaluator_factory, [(ps, d) for _, ps in suites for d in depths], workers, progress))
    n = sum(len(ps) for _, ps in suites) * len(depths)
    log(f"{n:,} searches in {time.monotonic() - t:.0f} s with {resolve_workers(workers, n)} process(es)")
    return [
        score_searched(name, positions, {d: next(moves) for d in depths}, pool, kaufman_limit, log)
        for name, positions in suites
    ]


def score_searched(
    name: str,
    positions: list[EpdPosition],
    moves: dict[int, list[chess.Move]],
    pool: EnginePool | None,
    kaufman_limit: Limit | None,
    log: Callable[[str], None] = print,
) -> tuple[SuiteReport, list[Row]]:
    """One suite scored from the moves its search played at each depth: STS points (c8/c9 or
    STS-shaped c0), solved counts (bm/am), and for Kaufman's test (a suite named kaufman*)
    delta-cp from the engine pool."""
    report = SuiteReport(name, is_sts(positions))
    rows: list[Row] = []
    for depth, played in moves.items():
        s = score_suite(positions, played)
        report.scores[depth] = s
        d = depth_label(depth)
        log(f"{name} {d}: {s.points}/{s.max_points} points, {s.solved}/{s.scored} solved")
        if report.sts:
            rows += sts_point_rows(name, f"points_{d}", s, None, f"of {s.max_points}")
            rows.append(
                (name, f"percent_{d}", 100.0 * s.points / s.max_points if s.max_points else 0.0, s.pointed, STS_ANCHOR)
            )
            for theme, (_, top, _) in sorted(s.themes.items()):
                rows += sts_point_rows(f"{name}/{theme}", f"points_{d}", s, theme, f"of {top}")
        if s.scored:
            rows.append((name, f"solved_{d}", s.solved, s.scored, f"of {s.scored} with bm/am"))
        if name.lower().startswith("kaufman") and pool is not None and kaufman_limit is not None:
            deltas = kaufman_delta_cp(positions, played, pool, kaufman_limit)
            report.kaufman[depth] = deltas
            mean = sum(x.delta for x in deltas) / len(deltas)
            rows.append((name, f"avg_delta_cp_{d}", mean, len(deltas), f"Stockfish {kaufman_limit}; {KAUFMAN_ANCHOR}"))
            rows.append(
                (
                    name,
                    f"median_delta_cp_{d}",
                    statistics.median(x.delta for x in deltas),
                    len(deltas),
                    f"Stockfish {kaufman_limit}",
                )
            )
            rows += kaufman_rows(name, f"avg_delta_pawns_{d}", deltas, f"Stockfish {kaufman_limit}")
            found = sum(x.move == x.reference for x in deltas)
            rows.append((name, f"best_moves_found_{d}", found, len(deltas), KAUFMAN_ANCHOR))
    return report, rows


def sts_point_rows(suite: str, metric: str, s: SuiteScore, theme: str | None, detail: str) -> list[Row]:
    """STS points of the suite (theme None) or of one theme, with n (its positions) and a seeded
    bootstrap 95% interval over the positions (`metric`_low95 / _high95 rows)."""
    m = s.points_interval(theme)
    if m is None:
        return [(suite, metric, 0.0, 0, detail)]
    how = "seeded bootstrap over the positions"
    text = interval_text(f"{m.mean:g}", f"{m.low:.0f}", f"{m.high:.0f}", m.n)
    return [(suite, metric, m.mean, m.n, f"{detail}; {text}"), *interval_rows(suite, metric, m.low, m.high, m.n, how)]


@dataclass
class MatchConfig:
    openings: int = 20
    """How many of Sabatelli's 20 openings (each played twice, colours swapped)."""
    random_plies: int = 80
    """Hui's test: a game against the random mover counts as won only inside this many plies."""
    stockfish_skills: tuple[int, ...] = (0, 5, 10)
    """Stockfish skill levels (0-20) the 1-ply network plays, one match each (empty skips)."""
    stockfish_depth: int = 6
    """Search depth of those Stockfish opponents."""
    search_depths: tuple[int, ...] = (1, 2)
    """Network vs the traditional evaluation, both searching to each of these depths (1: both
    1-ply, the even match that places the 1-ply network on the Elo scale; empty skips)."""
    movetime: float = 0.05
    """And both at this time per move (seconds); 0 skips that match."""
    time_openings: int = 10
    """Openings of the fixed-time match (it is the slow one)."""
    max_plies: int = 400
    """Other matches: a game still going after this many plies ends unfinished ('*')."""
    seed: int = 0
    """Seed of the random mover's moves (each game's mover starts from it)."""
    workers: int = 0
    """Processes playing the games at once (0: one per core this process may use). Every game
    starts fresh players, so the games do not depend on it, but for the fixed-time match's."""

    def __post_init__(self) -> None:
        check_workers(self.workers)


def match_rows(m: MatchResult, opponent: str, anchor: str = "") -> list[Row]:
    """A match's score and win ratio (an unfinished game: no points, no win), each with n games and
    a seeded bootstrap 95% interval clustered by opening (an opening's two games, colours swapped,
    are one unit: `score_low95` ... rows); a match of fewer than SMALL_N games says it is
    indicative only."""
    pts, w, d, lost, u = m.score(m.a)
    n = len(m.games)
    if not n:
        return [(opponent, "score", 0.0, 0, "no games"), (opponent, "win_ratio", 0.0, 0, "no games")]
    mine = [(g.white_score if g.white == m.a else 1.0 - g.white_score) if g.white_score is not None else 0.0
            for g in m.games]  # fmt: skip
    openings = [g.opening for g in m.games]
    how = "seeded bootstrap clustered by opening"
    flag = small_sample(n)
    rows = []
    for metric, values, first in (
        ("score", mine, f"{w} won, {d} drawn, {lost} lost, {u} unfinished"),
        ("win_ratio", [float(x == 1.0) for x in mine], anchor),
    ):
        c = mean_interval(values, openings)
        text = interval_text(f"{c.mean:.3f}", f"{c.low:.3f}", f"{c.high:.3f}", n) + f", {c.clusters} openings"
        detail = "; ".join(x for x in (first, text, flag) if x)
        rows += [(opponent, metric, c.mean, n, detail), *interval_rows(opponent, metric, c.low, c.high, n, how)]
    return rows


Planned = tuple[MatchSpec, list[EpdPosition], str, str]
"""A match to play: its spec, its openings, the opponent's name in the results, the anchor."""


@dataclass(frozen=True)
class MatchSetup:
    """What run_matches plays: model `model`'s network (evaluator_factory builds it) against the
    random mover, Stockfish and the traditional evaluation (`traditional` builds it), from
    `openings`, as `cfg` says. With more than one worker it travels to the processes playing the
    games: the factories must then be picklable (functools.partial of
    training.evaluator.load_evaluator, a class)."""

    model: str
    evaluator_factory: Callable[[], Evaluator]
    traditional: Callable[[], Evaluator]
    openings: list[EpdPosition]
    stockfish_path: str
    cfg: MatchConfig


def match_plan(setup: MatchSetup) -> list[Planned]:
    """The matches of run_matches; building the plan builds no player."""
    model, evaluator_factory, traditional, cfg = setup.model, setup.evaluator_factory, setup.traditional, setup.cfg
    openings, stockfish_path = setup.openings, setup.stockfish_path
    ops = openings[: cfg.openings]
    one_ply = lambda: SearchPlayer(AlphaBeta(evaluator_factory(), depth=1), player_name(model, 1))  # noqa: E731
    plan: list[Planned] = [
        (
            MatchSpec("vs random", one_ply, lambda: RandomPlayer(cfg.seed), max_plies=cfg.random_plies),
            ops,
            "random",
            RANDOM_ANCHOR,
        )
    ]
    for skill in cfg.stockfish_skills:
        plan.append(
            (
                MatchSpec(
                    f"vs stockfish skill {skill}",
                    one_ply,
                    lambda s=skill: StockfishPlayer(stockfish_path, s, depth=cfg.stockfish_depth),
                    max_plies=cfg.max_plies,
                ),
                ops,
                f"stockfish skill {skill} depth {cfg.stockfish_depth}",
                "",
            )
        )
    for d in cfg.search_depths:
        plan.append(
            (
                MatchSpec(
                    f"depth {d} vs traditional",
                    lambda d=d: SearchPlayer(AlphaBeta(evaluator_factory(), depth=d), player_name(model, d)),
                    lambda d=d: SearchPlayer(AlphaBeta(traditional(), depth=d)),
                    max_plies=cfg.max_plies,
                ),
                ops,
                f"material_pst depth {d}",
                "Lubeck: network with search vs traditional evaluation",
            )
        )
    if cfg.movetime:
        t = cfg.movetime
        plan.append(
            (
                MatchSpec(
                    f"{t:g}s vs traditional",
                    lambda: SearchPlayer(AlphaBeta(evaluator_factory(), movetime=t), f"{model} {t:g}s"),
                    lambda: SearchPlayer(AlphaBeta(traditional(), movetime=t)),
                    max_plies=cfg.max_plies,
                ),
                openings[: cfg.time_openings],
                f"material_pst {t:g} s a move",
                "Lubeck: fixed time per move",
            )
        )
    return plan


def _plan_in_worker(setup: MatchSetup) -> list[Planned]:
    """match_plan's plan again, in a process playing its games: the network loaded once there."""
    net = setup.evaluator_factory()
    return match_plan(dataclasses.replace(setup, evaluator_factory=lambda: net))


def _play_planned(task: tuple[int, int, int], plan: list[Planned]):
    match, index, colour = task
    spec, ops, _, _ = plan[match]
    return play_pairing(spec, ops[index], index, colour)


def run_matches(
    setup: MatchSetup,
    log: Callable[[str], None] = print,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[list[MatchResult], list[Row]]:
    """The network (1-ply, as published) against the random mover (Hui) and Stockfish skill
    levels; with search against the traditional evaluation at a fixed depth and a fixed time
    per move (Lubeck). The games of every match are played in setup.cfg.workers processes.
    progress(games done, games in all) after every game."""
    model, cfg = setup.model, setup.cfg
    plan = match_plan(setup)
    tasks = [(m, i, colour) for m, (_, ops, _, _) in enumerate(plan) for i, colour in pairings(ops)]
    t0 = time.monotonic()
    games = ordered_map(_play_planned, tasks, cfg.workers, _plan_in_worker, (setup,), progress)
    results, rows = [], []
    for m, (spec, _, opponent, anchor) in enumerate(plan):
        match = match_result(spec, [g for task, g in zip(tasks, games) if task[0] == m])
        pts, w, dr, lost, u = match.score(match.a)
        log(f"{model} {spec.name}: +{w} ={dr} -{lost} ({u} unfinished)")
        results.append(match)
        rows += match_rows(match, opponent, anchor)
    n = resolve_workers(cfg.workers, len(tasks))
    log(f"{model}: {len(tasks)} match games in {time.monotonic() - t0:.0f} s with {n} process(es)")
    return results, rows


@dataclass
class EndgameConfig:
    positions: int = 10
    """Won endgames from the store's games to convert (0 skips)."""
    max_material: int = 16
    """Pawns of material on the board, both sides (kings left out)."""
    min_cp: int = 600
    """A candidate is won when Stockfish scores it above this many centipawns for the side to move."""
    verify_depth: int = 14
    """Stockfish depth that must confirm an endgame as won for the side to move (score above min_cp)."""
    defender_depth: int = 8
    """The defending Stockfish (full strength) searches this deep."""
    max_plies: int = 100
    """An endgame counts as converted only when won inside this many plies."""
    player_depth: int = 1
    """The network's search depth (1: the 1-ply player)."""
    seed: int = 0
    """Seed of the random choice among the candidate positions."""


def find_won_endgames(con, pool: EnginePool, cfg: EndgameConfig) -> list[EpdPosition]:
    """Positions from the store's games that a deep search confirms as won for the side to move."""
    rows = con.sql(
        load_sql("queries/won_endgames"),
        params={
            "max_material": cfg.max_material,
            "min_cp": cfg.min_cp,
            "seed": cfg.seed,
            "candidates": 4 * cfg.positions,
        },
    ).fetchall()
    boards = [(i, chess.Board(fen)) for i, (fen, _, _) in enumerate(rows)]
    boards = [(i, b) for i, b in boards if not b.is_game_over(claim_draw=True)]
    evals = engine_evaluations(pool, Limit("depth", cfg.verify_depth), boards)
    out = []
    for i, b in boards:
        e = evals[i]
        if (e.score if b.turn == chess.WHITE else -e.score) > cfg.min_cp:
            out.append(EpdPosition("endgames", len(out), f"endgame.{len(out) + 1:02d}", b))
        if len(out) == cfg.positions:
            break
    return out


def run_endgames(
    model: str,
    evaluator_factory: Callable[[], Evaluator],
    positions: list[EpdPosition],
    stockfish_path: str,
    cfg: EndgameConfig,
    log: Callable[[str], None] = print,
) -> tuple[MatchResult, list[Row]]:
    """The network (1-ply by default) plays the winning side of each position against
    full-strength Stockfish; converted = won inside max_plies."""
    d = cfg.player_depth
    player = SearchPlayer(AlphaBeta(evaluator_factory(), depth=d), player_name(model, d))
    defender = StockfishPlayer(stockfish_path, 20, depth=cfg.defender_depth)
    m = MatchResult(ENDGAME_MATCH, player.name, defender.name)
    try:
        for p in positions:
            white, black = (player, defender) if p.board.turn == chess.WHITE else (defender, player)
            m.games.append(play_game(white, black, p.board, cfg.max_plies, True, p.id, ENDGAME_MATCH, str(p.index + 1)))
    finally:
        defender.close()
    pts, w, d, lost, u = m.score(player.name)
    n = len(m.games)
    lo, hi = wilson_interval(w, n)
    log(f"{model} endgames: {w}/{n} converted, {d} drawn, {lost} lost, {u} unfinished")
    detail = (
        f"{w} won, {d} drawn, {lost} lost, {u} unfinished of {n} (material <= {cfg.max_material}, "
        f"Stockfish depth {cfg.verify_depth} > +{cfg.min_cp / 100:g}); 95% CI {lo:.3f}-{hi:.3f}"
    )
    return m, [(ENDGAME_MATCH, "converted", w / n if n else math.nan, n, detail)]


PUBLISHED = (
    ("Kaufman test (1-ply)", KAUFMAN_ANCHOR),
    ("Strategic Test Suite", STS_ANCHOR),
    ("Random mover, 80 plies", RANDOM_ANCHOR),
    ("MLP vs CNN", "Sabatelli: the CNN on features beat the MLP on bitmaps in his 20-opening match"),
)


def report_markdown(model: str, rows: list[tuple], charts: list[str]) -> str:
    """A model's evaluation figures (the newest of each) beside the published ones; charts are
    paths relative to the report file."""
    lines = [f"# Evaluation of {model}", "", "## Published figures", "", "| test | published |", "|---|---|"]
    lines += [f"| {a} | {b} |" for a, b in PUBLISHED]
    rows = [r for r in rows if not r[1].endswith(("_low95", "_high95"))]  # each figure's detail gives its interval
    main = [r for r in rows if "/" not in r[0] and r[0] != "elo"]
    lines += ["", "## Ours", "", "| suite / opponent | metric | value | n | detail |", "|---|---|---|---|---|"]
    lines += [f"| {s} | {m} | {v:.4g} | {n} | {d.replace('|', chr(92) + '|')} |" for s, m, v, n, d in main]
    elo = [r for r in rows if r[0] == "elo"]
    if elo:
        lines += ["", "## Elo", "", "| player | Elo | games | detail |", "|---|---|---|---|"]
        flagged = [(m, v, n, "; ".join(x for x in (d, small_sample(n)) if x)) for _, m, v, n, d in elo]
        lines += [f"| {m} | {v:.0f} | {n} | {d} |" for m, v, n, d in flagged]
    grid = [r for r in rows if r[0].startswith(GRID_SUITE)]
    if grid:  # Lubeck's grid: a score and an Elo difference per cell (reports/lubeck_grid.md has the table)
        lines += ["", "## Lubeck's grid", "", "| cell | metric | value | games | detail |", "|---|---|---|---|---|"]
        lines += [f"| {s.removeprefix(GRID_SUITE)} | {m} | {v:.4g} | {n} | {d} |" for s, m, v, n, d in grid]
    themes = [r for r in rows if "/" in r[0] and not r[0].startswith(GRID_SUITE)]
    if themes:
        lines += ["", "## STS by theme", "", "| theme | metric | points | positions | detail |"]
        lines += ["|---|---|---|---|---|"]
        lines += [f"| {s.split('/', 1)[1]} | {m} | {v:.0f} | {n} | {d} |" for s, m, v, n, d in themes]
    if charts:
        lines += ["", "## Charts", ""] + [f"![{Path(c).stem}]({c})" for c in charts]
    return "\n".join(lines) + "\n"
