"""Lubeck's experiment grid: the W/D/L network against the traditional evaluation, both in the
same search, per (depth, time a move, kind of start position); no Dagster here.

Lubeck's report defines the grid (search depths 2, 4 and 6 plies; 1, 2 and 5 seconds a move;
quiet against tactical starting positions) and never fills it in. Here a cell is one match:

- Both players are `pipeline.play.search.AlphaBeta` (iterative deepening, the same move ordering and
  transposition table), one with the network as its evaluator, one with the traditional
  evaluation (`MaterialEvaluator`: material + piece-square tables). Each searches until it has
  finished the cell's depth or spent the cell's budget, whichever comes first.
- The time budget is scaled to this hardware as a node budget per evaluator: t seconds of
  Lubeck's clock are `t x time_scale` seconds here, and an evaluator gets the nodes it searches
  in that time, `round(t x time_scale x nps)`, its nodes per second in this search measured on
  this machine at the start of the run (CPU time, one thread; `calibrate`). The slower network
  so gets fewer nodes than the traditional evaluation in the same time, which is the point of
  the grid; a node budget, unlike a clock, gives the same games whatever else loads the machine.
- Start positions come from the store's games (a reproducible sample by `seed`), classified by
  Stockfish: quiet when its static evaluation and a shallow search (`probe_depth`) agree within
  `quiet_max_gap_cp`; tactical when they differ by `tactical_min_gap_cp` or more (something
  hangs or is about to be won: the static view misses it). Both kinds: not in check (no static
  evaluation there) and the search's score within `max_eval_cp` (a contest, not a won game).
- Each start position is played twice, colours swapped; a game still going after `max_plies`
  is adjudicated by Stockfish at `adjudicate_depth` (beyond +/-`adjudicate_cp` a win, else a
  draw).

The challenger is the network, or (GridConfig.challenger) Stockfish's own static evaluation: a
far better evaluation than the traditional one and a slower one, the reference that shows where
a better evaluation stops paying for itself; "the network" below stands for either.

Per cell: the network's score with a 95% interval, a seeded bootstrap clustered by start
position (a start position's two games, colours swapped, are one unit, and the same start
positions are played in every cell of their kind: start positions are resampled, not games),
and the Elo difference with its interval (the logistic transform of the score and of both ends
of its interval). A cell of fewer than SMALL_N games says it is indicative only.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, get_args

import chess
import numpy as np

from pipeline.labels.pool import EnginePool
from pipeline.labels.uci import Limit
from pipeline.parallel import close, ordered_map, resolve_workers
from pipeline.play.grid_figures import Pooled, elo_difference, fmt_elo, score_interval
from pipeline.play.matches import GameResult, play_game
from pipeline.play.search import AlphaBeta, Evaluator, MaterialEvaluator, SearchPlayer
from pipeline.play.suites import engine_evaluations
from pipeline.research.intervals import SMALL_N, interval_rows, small_sample
from pipeline.store.duck import load_sql

StartKind = Literal["quiet", "tactical"]
START_KINDS: tuple[str, ...] = get_args(StartKind)
Challenger = Literal["network", "stockfish_static"]
GRID_ANCHOR = "Lubeck: network with search vs the traditional evaluation, per depth, time and start kind"
GRID_SUITE = "lubeck_grid/"
"""The start of a grid cell's suite in evaluation_results: lubeck_grid/<kind>/depth<d>/<t>s, and
/captures<n> after it for a grid with the capture search (GridConfig.quiescence)."""


_NAME = re.compile(r"[A-Za-z0-9._-]+")
"""A challenger's name: it names the report's files and the rows' asset."""


@dataclass(frozen=True)
class GridConfig:
    challenger: Challenger = "network"
    """The evaluation played against the traditional one: the W/D/L network (lubeck_wdl_mlp's
    checkpoint), or Stockfish's own static evaluation (its `eval`, pipeline.play.stockfish_eval: far
    better than material and tables, and slower here), the reference of a better but slower
    evaluation."""
    checkpoint: str = ""
    """challenger `network` only: a checkpoint (a file, or an S3 store's object) to play in place
    of lubeck_wdl_mlp's, any model training.evaluator scores (e.g. a CNN trained on a GPU with
    `python -m training.train`), or a model asset's name (e.g. mlp_search_regression: the
    checkpoint of its latest materialisation); its rows, report and player are named after the
    checkpoint's model, encoder and dataset. Empty: lubeck_wdl_mlp's latest materialisation."""
    name: str = ""
    """The challenger's name in place of the one it plays under (lubeck_wdl_mlp, the checkpoint's
    model_encoder_dataset, stockfish_static): its rows, report and PGN player take it, so two
    checkpoints of the same model, encoder and dataset (e.g. trained on more positions) keep a
    report each. Letters, digits, '.', '_' and '-'; empty: the name it plays under."""
    depths: tuple[int, ...] = (2, 4, 6)
    """Search depths (plies): the most each player searches in a cell (Lubeck: 2, 4, 6)."""
    seconds: tuple[float, ...] = (1.0, 2.0, 5.0)
    """Seconds a move on Lubeck's clock (1, 2, 5), each scaled to a node budget per evaluator."""
    time_scale: float = 0.05
    """Seconds here per second of Lubeck's clock: a budget of t s buys each evaluator the nodes
    it searches in t x time_scale s on this machine (its measured nodes/s)."""
    quiescence: int = 0
    """Plies of captures both searches resolve beyond their depth (pipeline.play.search.AlphaBeta's
    capture search, counted in the node budgets); 0: none, a leaf is taken at its face value."""
    kinds: tuple[str, ...] = ("quiet", "tactical")
    """Kinds of start position: quiet (static eval and shallow search agree), tactical (they differ)."""
    positions: int = 16
    """Start positions of each kind; each is played twice (colours swapped) in every cell."""
    max_plies: int = 60
    """A game still going after this many plies is adjudicated by Stockfish."""
    adjudicate_depth: int = 10
    """Stockfish depth that adjudicates an unfinished game."""
    adjudicate_cp: int = 300
    """Beyond +/- this many centipawns (White's view) an adjudicated game is a win, else a draw."""
    probe_depth: int = 8
    """Depth of the shallow Stockfish search a start position's static evaluation is compared with."""
    quiet_max_gap_cp: int = 25
    """Quiet: |static evaluation - shallow search| at most this many centipawns."""
    tactical_min_gap_cp: int = 150
    """Tactical: |static evaluation - shallow search| at least this many centipawns."""
    max_eval_cp: int = 200
    """Both kinds: the shallow search scores the position within +/- this (still a contest)."""
    min_ply: int = 16
    """Start positions from this ply of a game on (past the opening)."""
    max_ply: int = 60
    """... up to this ply."""
    candidates: int = 600
    """Store positions (one per game, a sample by seed) Stockfish classifies to find the starts."""
    seed: int = 0
    """Seed of the sample of candidate positions."""
    material_nps: float = 0.0
    """Nodes/s of the traditional evaluation's search on this machine; 0: measured at the start."""
    network_nps: float = 0.0
    """Nodes/s of the challenger's search (the network's or Stockfish's) on this machine; 0: measured at the start."""
    calibration_depth: int = 3
    """Depth of the searches (on the start positions) that measure each evaluator's nodes/s."""
    workers: int = 2
    """Processes playing games at once (one thread each); the results do not depend on it."""

    def __post_init__(self) -> None:
        problems = []
        if self.challenger not in get_args(Challenger):
            problems.append(f"challenger must be one of {', '.join(get_args(Challenger))}, got {self.challenger!r}")
        elif self.checkpoint and self.challenger != "network":
            problems.append(f"checkpoint is played by the network challenger only, not by {self.challenger}")
        if self.name and not _NAME.fullmatch(self.name):
            problems.append(f"name must be letters, digits, '.', '_' or '-' (it names a file), got {self.name!r}")
        elif self.name == MaterialEvaluator.name:
            problems.append(f"name must not be {MaterialEvaluator.name}, the traditional evaluation's")
        if not self.depths or min(self.depths) < 1:
            problems.append(f"depths must be one or more plies of at least 1, got {list(self.depths)}")
        if not self.seconds or min(self.seconds) <= 0:
            problems.append(f"seconds must be one or more times above 0, got {list(self.seconds)}")
        bad = [k for k in self.kinds if k not in START_KINDS]
        if bad or not self.kinds:
            problems.append(f"kinds must name one or more of {', '.join(START_KINDS)}, got {list(self.kinds)}")
        if self.time_scale <= 0:
            problems.append(f"time_scale must be above 0, got {self.time_scale:g}")
        if self.positions < 1 or self.workers < 1 or self.candidates < 1:
            problems.append(
                f"positions, workers and candidates must be at least 1, got {self.positions}, "
                f"{self.workers}, {self.candidates}"
            )
        if self.quiescence < 0:
            problems.append(f"quiescence must be 0 (none) or plies of captures, got {self.quiescence}")
        for name in ("probe_depth", "adjudicate_depth", "calibration_depth", "max_eval_cp"):
            if getattr(self, name) < 1:
                problems.append(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.quiet_max_gap_cp >= self.tactical_min_gap_cp:
            problems.append(
                f"quiet_max_gap_cp ({self.quiet_max_gap_cp}) must be below tactical_min_gap_cp "
                f"({self.tactical_min_gap_cp}): a position cannot be both"
            )
        if self.max_plies < 1 or self.min_ply > self.max_ply:
            problems.append(
                f"max_plies must be at least 1 and min_ply at most max_ply, got {self.max_plies}, "
                f"{self.min_ply}..{self.max_ply}"
            )
        if problems:
            raise ValueError("lubeck grid settings: " + "; ".join(problems))


QUICK_GRID = {"positions": 2, "depths": (2,), "seconds": (1.0,)}
"""GridConfig's fields for a first look (`reproduce --quick-eval`): two start positions of each
kind, one depth and one time: one cell a kind, four games each, instead of the full grid."""


@dataclass(frozen=True)
class StartPosition:
    kind: str
    id: str
    fen: str
    static_cp: int
    """Stockfish's static evaluation, White's view."""
    search_cp: int
    """Stockfish at probe_depth, White's view."""

    @property
    def gap_cp(self) -> int:
        return abs(self.static_cp - self.search_cp)

    @property
    def board(self) -> chess.Board:
        return chess.Board(self.fen)


def classify(static_cp: int | None, search_cp: int | None, cfg: GridConfig) -> str | None:
    """'quiet', 'tactical' or None (neither, or no figure: in check, a mate score) from White's-view
    centipawns of the static evaluation and the shallow search."""
    if static_cp is None or search_cp is None or abs(search_cp) > cfg.max_eval_cp:
        return None
    gap = abs(static_cp - search_cp)
    if gap <= cfg.quiet_max_gap_cp:
        return "quiet"
    if gap >= cfg.tactical_min_gap_cp:
        return "tactical"
    return None


def candidate_fens(con, cfg: GridConfig) -> list[str]:
    """A reproducible sample (by seed) of the store's positions: one per game, between min_ply
    and max_ply, not in check, the game not over there."""
    rows = con.sql(
        load_sql("queries/lubeck_grid_candidates"),
        params={"min_ply": cfg.min_ply, "max_ply": cfg.max_ply, "seed": cfg.seed, "candidates": cfg.candidates},
    ).fetchall()
    out = []
    for (fen,) in rows:
        board = chess.Board(fen)
        if board.is_valid() and not board.is_check() and not board.is_game_over(claim_draw=True):
            out.append(fen)
    return out


def pick_positions(
    fens: Sequence[str], pool: EnginePool, cfg: GridConfig, chunk: int = 64
) -> dict[str, list[StartPosition]]:
    """The first `positions` of each kind among fens (in their order), classified by Stockfish's
    static evaluation and its search at probe_depth (both White's view); fens are classified a
    chunk at a time until every kind has its positions."""
    out: dict[str, list[StartPosition]] = {k: [] for k in cfg.kinds}
    for at in range(0, len(fens), chunk):
        if all(len(v) >= cfg.positions for v in out.values()):
            break
        part = list(fens[at : at + chunk])
        boards = [(i, chess.Board(f)) for i, f in enumerate(part)]
        static = {i: e.cp for i, e in _evaluations(pool, Limit("static"), boards).items()}
        probe = {i: e.cp for i, e in engine_evaluations(pool, Limit("depth", cfg.probe_depth), boards).items()}
        for i, fen in enumerate(part):
            kind = classify(static.get(i), probe.get(i), cfg)
            if kind in out and len(out[kind]) < cfg.positions:
                out[kind].append(StartPosition(kind, f"{kind}.{len(out[kind]) + 1:02d}", fen, static[i], probe[i]))
    return out


def _evaluations(pool: EnginePool, limit: Limit, boards) -> dict:
    """Like engine_evaluations, but a position the engine has no figure for (static evaluation
    in check) is left out rather than an error."""
    from pipeline.labels.uci import Evaluation, Job

    jobs = [Job(key, b.fen(), b.turn == chess.WHITE) for key, b in boards]
    return {r.job.id: r for r in pool.run(jobs, limit) if isinstance(r, Evaluation)}


# --- The players ----------------------------------------------------------------------------


def node_budget(seconds: float, nps: float, time_scale: float) -> int:
    """The nodes t seconds of Lubeck's clock buy an evaluator searching nps nodes/s here."""
    return max(1, round(seconds * time_scale * nps))


def cpu_seconds(evaluator: Evaluator) -> float:
    """CPU seconds of this process and of the evaluator's own engine process, if it has one
    (StockfishStaticEvaluator.cpu_seconds): what a search with it has cost so far."""
    own = getattr(evaluator, "cpu_seconds", None)
    return time.process_time() + (own() if own else 0.0)


def calibrate(evaluator: Evaluator, boards: Sequence[chess.Board], depth: int, quiescence: int = 0) -> float:
    """Nodes per second of CPU time of `evaluator`'s search (AlphaBeta to `depth`, with
    `quiescence` plies of captures) over boards: the speed a time budget is scaled by. CPU time
    (this process's and the evaluator's engine's), so a loaded machine slows it less than a
    wall clock would."""
    nodes, spent = 0, 0.0
    for board in boards:
        search = AlphaBeta(evaluator, depth=depth, quiescence=quiescence)
        t = cpu_seconds(evaluator)
        nodes += search.search(board).nodes
        spent += cpu_seconds(evaluator) - t
    return nodes / max(spent, 1e-9)


class RecordingPlayer(SearchPlayer):
    """A SearchPlayer that keeps the depth reached and the nodes of each of its searches."""

    def __init__(self, search: AlphaBeta, name: str | None = None):
        super().__init__(search, name)
        self.depths: list[int] = []
        self.nodes: list[int] = []

    def choose(self, board: chess.Board) -> chess.Move:
        result = self.search.search(board)
        self.depths.append(result.depth)
        self.nodes.append(result.nodes)
        return result.move


@dataclass(frozen=True)
class Cell:
    kind: str
    depth: int
    seconds: float

    @property
    def name(self) -> str:
        return f"{self.kind} depth {self.depth} {self.seconds:g}s"


def player_name(evaluator: str, cell: Cell, quiescence: int = 0) -> str:
    """A player's name in the games' PGN headers: its evaluator, the cell, and the capture
    search when there is one."""
    return f"{evaluator} depth {cell.depth} {cell.seconds:g}s" + (f" captures {quiescence}" if quiescence else "")


@dataclass(frozen=True)
class Task:
    cell: Cell
    start: StartPosition
    network_nodes: int
    material_nodes: int
    max_plies: int
    network_name: str
    quiescence: int = 0


@dataclass
class TaskResult:
    task: Task
    games: list[GameResult]
    network: list[list[tuple[int, int]]]
    """Per game, the network's searches in order: (depth finished, nodes)."""
    material: list[list[tuple[int, int]]]
    """Per game, the traditional evaluation's searches."""
    seconds: float
    """CPU seconds the two games took (the challenger's engine's included)."""

    def depths(self, side: str) -> list[int]:
        return [d for game in getattr(self, side) for d, _ in game]


def play_task(task: Task, network: Evaluator) -> TaskResult:
    """One start position of one cell: two games, colours swapped (the network White first),
    each between fresh players (empty transposition tables), so each game depends only on its
    start, the evaluators and the budgets."""
    cell, d = task.cell, task.cell.depth
    games, net_searches, mat_searches = [], [], []
    t = cpu_seconds(network)
    for j in range(2):
        n = RecordingPlayer(
            AlphaBeta(network, nodes=task.network_nodes, max_depth=d, quiescence=task.quiescence),
            player_name(task.network_name, cell, task.quiescence),
        )
        m = RecordingPlayer(
            AlphaBeta(MaterialEvaluator(), nodes=task.material_nodes, max_depth=d, quiescence=task.quiescence),
            player_name(MaterialEvaluator.name, cell, task.quiescence),
        )
        white, black = (n, m) if j == 0 else (m, n)
        games.append(
            play_game(
                white,
                black,
                task.start.board,
                task.max_plies,
                True,
                task.start.id,
                f"lubeck grid: {cell.name}",
                f"{task.start.id}.{j + 1}",
            )
        )
        net_searches.append(list(zip(n.depths, n.nodes)))
        mat_searches.append(list(zip(m.depths, m.nodes)))
    return TaskResult(task, games, net_searches, mat_searches, cpu_seconds(network) - t)


def play_tasks(
    tasks: Sequence[Task],
    network_factory: Callable[[], Evaluator],
    workers: int,
    progress: Callable[[int, int], None] | None = None,
) -> list[TaskResult]:
    """Every task, in `workers` processes (one: in this process); results in the tasks' order.
    Each task starts fresh players (empty transposition tables), so a result does not depend on
    which process played it or what it played before."""
    return ordered_map(play_task, tasks, workers, network_factory, progress=progress)


# --- Adjudication and figures ---------------------------------------------------------------


def adjudicate(games: Sequence[GameResult], pool: EnginePool, cfg: GridConfig) -> int:
    """Unfinished games ('*') get Stockfish's verdict on their final position (adjudicate_depth;
    beyond +/-adjudicate_cp White's view a win, else a draw), in the result and the PGN headers.
    Returns how many were adjudicated."""
    open_games = [(i, g.game.end().board()) for i, g in enumerate(games) if g.result == "*"]
    if not open_games:
        return 0
    evals = engine_evaluations(pool, Limit("depth", cfg.adjudicate_depth), open_games)
    for i, _ in open_games:
        g, e = games[i], evals[i]
        score = e.score  # White's view; mates beyond any cp bound
        g.result = "1-0" if score > cfg.adjudicate_cp else "0-1" if score < -cfg.adjudicate_cp else "1/2-1/2"
        g.termination = f"{g.termination}; adjudicated: Stockfish depth {cfg.adjudicate_depth} " + (
            f"mate {e.mate}" if e.mate is not None else f"{e.cp:+d} cp"
        )
        g.game.headers["Result"] = g.result
        g.game.headers["Termination"] = g.termination
    return len(open_games)


@dataclass
class CellResult:
    cell: Cell
    games: int
    wins: int
    draws: int
    losses: int
    adjudicated: int
    score: float
    """The network's points per game."""
    score_low: float
    score_high: float
    elo: float
    elo_low: float
    elo_high: float
    network_nodes: int
    """The network's node budget a move."""
    material_nodes: int
    network_depth: float
    """Mean depth the network's searches finished."""
    material_depth: float
    seconds: float
    """CPU seconds spent playing the cell (summed over processes)."""
    openings: list[str] = field(default_factory=list)
    points: list[float] = field(default_factory=list)
    """The network's points in each game of the cell."""
    starts: list[str] = field(default_factory=list)
    """The start position of each of those games."""


def cell_result(cell: Cell, results: Sequence[TaskResult], network: str) -> CellResult:
    games = [g for r in results for g in r.games]
    me = player_name(network, cell, results[0].task.quiescence if results else 0)
    w = d = lost = adj = 0
    points, starts = [], []
    for r in results:
        for g in r.games:
            s = g.white_score
            mine = s if g.white == me else 1.0 - s
            w += mine == 1.0
            d += mine == 0.5
            lost += mine == 0.0
            adj += "adjudicated" in g.termination
            points.append(mine)
            starts.append(r.task.start.id)
    n = len(games)
    pts = w + 0.5 * d
    score = pts / n if n else 0.0
    lo, hi = score_interval(points, starts)
    nd = [x for r in results for x in r.depths("network")]
    md = [x for r in results for x in r.depths("material")]
    return CellResult(
        cell,
        n,
        w,
        d,
        lost,
        adj,
        score,
        lo,
        hi,
        elo_difference(score),
        elo_difference(lo),
        elo_difference(hi),
        results[0].task.network_nodes if results else 0,
        results[0].task.material_nodes if results else 0,
        float(np.mean(nd)) if nd else 0.0,
        float(np.mean(md)) if md else 0.0,
        sum(r.seconds for r in results),
        [r.task.start.id for r in results],
        points,
        starts,
    )


@dataclass
class GridResult:
    network: str
    cells: list[CellResult]
    starts: dict[str, list[StartPosition]]
    nps: dict[str, float]
    """Evaluator -> nodes/s the budgets were scaled by."""
    nps_measured: bool
    cfg: GridConfig
    games: list[GameResult]
    wall_seconds: float

    def rows(self, model: str) -> list[tuple[str, str, str, float, int, str]]:
        """evaluation_results rows (model, suite, metric, value, n, detail): per cell the network's
        score and Elo difference, the suite naming the cell."""
        out = []
        for c in self.cells:
            q = self.cfg.quiescence
            suite = f"{GRID_SUITE}{c.cell.kind}/depth{c.cell.depth}/{c.cell.seconds:g}s" + (
                f"/captures{q}" if q else ""
            )
            budgets = (
                f"vs material_pst; budgets {c.network_nodes} / {c.material_nodes} nodes a move "
                f"({self.network} / traditional), depth reached {c.network_depth:.1f} / {c.material_depth:.1f}"
                + (f", then up to {q} plies of captures" if q else "")
            )
            out.append(
                (
                    model,
                    suite,
                    "score",
                    c.score,
                    c.games,
                    f"+{c.wins} ={c.draws} -{c.losses} ({c.adjudicated} adjudicated); 95% "
                    f"{c.score_low:.3f}-{c.score_high:.3f} (clustered by start position, "
                    f"{len(set(c.openings))} of them); "
                    + "; ".join(x for x in (small_sample(c.games), budgets, GRID_ANCHOR) if x),
                )
            )
            how = "seeded bootstrap clustered by start position"
            out += [(model, *r) for r in interval_rows(suite, "score", c.score_low, c.score_high, c.games, how)]
            out.append(
                (
                    model,
                    suite,
                    "elo_difference",
                    c.elo if math.isfinite(c.elo) else math.copysign(9999.0, c.elo),
                    c.games,
                    f"95% CI {fmt_elo(c.elo_low)} to {fmt_elo(c.elo_high)} (from the score's interval; "
                    "+/-9999 stands for an infinite point estimate: every game won or lost)",
                )
            )
        return out

    def pooled(self) -> list[Pooled]:
        """The network's score at each time a move (every kind and depth cap), then over every game."""
        by_time = [Pooled.of(f"{t:g} s/move", [c for c in self.cells if c.cell.seconds == t]) for t in self.cfg.seconds]
        return [*by_time, Pooled.of("all", self.cells)] if len(by_time) > 1 else by_time

    def pooled_md(self) -> str:
        return "\n".join(
            [
                "| Lubeck s/move | games | + = - | score (95% CI) | Elo diff (95% CI) |",
                "|---|---|---|---|---|",
                *(p.line() for p in self.pooled()),
            ]
        )

    def table_md(self) -> str:
        lines = [
            f"| start | depth | Lubeck s/move | nodes/move {self.network} / trad | "
            f"depth reached {self.network} / trad | games | + = - (adj.) | score (95% CI) | Elo diff (95% CI) |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for c in self.cells:
            lines.append(
                f"| {c.cell.kind} | {c.cell.depth} | {c.cell.seconds:g} | {c.network_nodes:,} / {c.material_nodes:,} | "
                f"{c.network_depth:.1f} / {c.material_depth:.1f} | {c.games} | "
                f"{c.wins} {c.draws} {c.losses} ({c.adjudicated}) | "
                f"{c.score:.2f} ({c.score_low:.2f}-{c.score_high:.2f}) | "
                f"{fmt_elo(c.elo)} ({fmt_elo(c.elo_low)} to {fmt_elo(c.elo_high)}) |"
            )
        return "\n".join(lines)

    def report_md(self, command: str = "") -> str:
        cfg = self.cfg
        how = "measured at the start of the run" if self.nps_measured else "as configured"
        per_cell = [c.seconds for c in self.cells]
        processes = resolve_workers(cfg.workers, len(self.games) // 2)  # two games a task
        starts = "\n".join(
            f"| {p.id} | `{p.fen}` | {p.static_cp:+d} | {p.search_cp:+d} | {p.gap_cp} |"
            for kind in self.starts
            for p in self.starts[kind]
        )
        return (
            f"# Lubeck's experiment grid: {self.network} against the traditional evaluation\n\n"
            f"Both players search with the same alpha-beta (iterative deepening, pipeline.play.search.AlphaBeta) "
            f"up to the cell's depth or until their node budget is spent"
            + (
                f", then resolve up to {cfg.quiescence} plies of captures beyond it (in the budget)"
                if cfg.quiescence
                else ", a leaf at its face value (no capture search)"
            )
            + f". A budget of t s on Lubeck's clock "
            f"is t x {cfg.time_scale:g} s here, at each evaluator's nodes/s in this search ({how}: "
            + ", ".join(f"{k} {v:,.0f}" for k, v in self.nps.items())
            + f"). Each start position is played twice, colours swapped; games unfinished after "
            f"{cfg.max_plies} plies are adjudicated by Stockfish depth {cfg.adjudicate_depth} "
            f"(beyond +/-{cfg.adjudicate_cp} cp a win, else a draw). Score: {self.network}'s points per game, "
            f"95% interval by a seeded bootstrap over start positions (a start position's two games are one "
            f"unit; the same start positions recur in every cell of their kind); Elo difference from the score "
            f"and its interval's ends. A cell of fewer than {SMALL_N} games is indicative only.\n\n"
            f"Start positions from the store's games (plies {cfg.min_ply}-{cfg.max_ply}, seed {cfg.seed}): "
            f"quiet when Stockfish's static evaluation and its depth-{cfg.probe_depth} search differ by at most "
            f"{cfg.quiet_max_gap_cp} cp, tactical when by {cfg.tactical_min_gap_cp} cp or more; both not in check "
            f"and the search within +/-{cfg.max_eval_cp} cp.\n\n"
            + self.table_md()
            + "\n\nPooled over the start kinds and depth caps (the interval clustered by start position "
            "across the cells):\n\n"
            + self.pooled_md()
            + f"\n\n{len(self.games)} games, {self.wall_seconds:.0f} s wall with {processes} process(es); "
            f"CPU seconds per cell {min(per_cell, default=0):.0f}-{max(per_cell, default=0):.0f} "
            f"(mean {np.mean(per_cell) if per_cell else 0:.0f}).\n"
            + (f"\nCommand: `{command}`\n" if command else "")
            + "\n## Start positions (White's view, cp)\n\n| id | FEN | static | search | gap |\n|---|---|---|---|---|\n"
            + starts
            + "\n"
        )


def grid_cells(cfg: GridConfig) -> list[Cell]:
    return [Cell(k, d, t) for k in cfg.kinds for d in cfg.depths for t in cfg.seconds]


def run_grid(
    network_name: str,
    network_factory: Callable[[], Evaluator],
    starts: dict[str, list[StartPosition]],
    pool: EnginePool,
    cfg: GridConfig,
    log: Callable[[str], None] = print,
    progress: Callable[[int, int], None] | None = None,
) -> GridResult:
    """Every cell of the grid from the given start positions (pick_positions); `pool` adjudicates."""
    t0 = time.monotonic()
    missing = [k for k in cfg.kinds if len(starts.get(k, ())) < cfg.positions]
    if missing:
        got = ", ".join(f"{k} {len(starts.get(k, ()))}" for k in cfg.kinds)
        log(f"fewer start positions than the {cfg.positions} asked for ({got}): raise candidates for more")
    if not all(starts.get(k) for k in cfg.kinds):
        raise ValueError(
            f"no {' or '.join(k for k in cfg.kinds if not starts.get(k))} start position among the candidates: "
            "raise candidates, or widen quiet_max_gap_cp / tactical_min_gap_cp / max_eval_cp"
        )
    measured = not (cfg.material_nps and cfg.network_nps)
    nps = {MaterialEvaluator.name: cfg.material_nps, network_name: cfg.network_nps}
    if measured:
        boards = [p.board for k in cfg.kinds for p in starts[k][:4]]
        if not cfg.material_nps:
            nps[MaterialEvaluator.name] = calibrate(MaterialEvaluator(), boards, cfg.calibration_depth, cfg.quiescence)
        if not cfg.network_nps:
            network = network_factory()
            try:
                nps[network_name] = calibrate(network, boards, cfg.calibration_depth, cfg.quiescence)
            finally:
                close(network)
        log("nodes/s of each search here: " + ", ".join(f"{k} {v:,.0f}" for k, v in nps.items()))
    cells = grid_cells(cfg)
    tasks = [
        Task(
            cell,
            start,
            node_budget(cell.seconds, nps[network_name], cfg.time_scale),
            node_budget(cell.seconds, nps[MaterialEvaluator.name], cfg.time_scale),
            cfg.max_plies,
            network_name,
            cfg.quiescence,
        )
        for cell in cells
        for start in starts[cell.kind]
    ]
    results = play_tasks(tasks, network_factory, cfg.workers, progress)
    games = [g for r in results for g in r.games]
    adjudicated = adjudicate(games, pool, cfg)
    log(f"{len(games)} games, {adjudicated} adjudicated after {cfg.max_plies} plies")
    by_cell = {c: [r for r in results if r.task.cell == c] for c in cells}
    out = [cell_result(c, by_cell[c], network_name) for c in cells]
    for c in out:
        log(
            f"{c.cell.name}: score {c.score:.2f} ({c.score_low:.2f}-{c.score_high:.2f}), Elo {fmt_elo(c.elo)}, "
            f"depth {c.network_depth:.1f} / {c.material_depth:.1f}, {c.seconds:.0f} s"
        )
    result = GridResult(network_name, out, starts, nps, measured, cfg, games, time.monotonic() - t0)
    for p in result.pooled():
        log(f"{p.label}: score {p.score:.3f} ({p.score_low:.3f}-{p.score_high:.3f}) over {p.games} games")
    return result
