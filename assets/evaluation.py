"""Evaluation assets: how well each trained model plays, the ways the published work measured it.

Per model: eval_suites_<model> (EPD suites: STS points, Kaufman delta-cp, solved counts),
eval_matches_<model> (random mover, Stockfish skill levels, search vs the traditional evaluation,
endgame conversion) and eval_report_<model>. Across models: eval_head_to_head (network vs
network) and elo_ratings (from every game played). Figures land in evaluation_results, games
in match_games and as PGN under <store>/matches/, reports under <store>/reports/evaluation/.
Each evaluation loads the checkpoint its model asset last materialised (lineage, not the
newest file on disk).
"""

import os
import time
from collections import Counter
from pathlib import Path

import dagster as dg
from pydantic import field_validator

from assets.config import DescribedConfig
from assets.labels import PROGRESS_TAG, WRITE_EVERY_S, write_progress
from assets.metadata import md_cell, png_md
from assets.resources import StockfishResource, StoreResource
from assets.training import MODELS
from pipeline.evaluation import write_results
from pipeline.matches import write_games
from pipeline.store import Store, atomic_path

GROUP = "evaluation"
ELO_ANCHOR = "random"


def suites_folder(configured: str, store: Store) -> Path:
    """The EPD suites: the asset config, else CHESS_PIPELINE_SUITES, else <home>/suites."""
    return Path(configured or os.environ.get("CHESS_PIPELINE_SUITES") or store.root / "suites").expanduser()


def checkpoint_of(context: dg.AssetExecutionContext, model: str) -> Path:
    """The checkpoint the model asset's latest materialisation recorded."""
    event = context.instance.get_latest_materialization_event(dg.AssetKey(model))
    if event is None or event.asset_materialization is None:
        raise dg.Failure(f"model {model} has not been materialised: train it first (chess-pipeline train {model})")
    meta = event.asset_materialization.metadata
    if "checkpoint" not in meta:
        raise dg.Failure(f"model {model}'s latest materialisation records no checkpoint")
    path = Path(meta["checkpoint"].value)
    if not path.exists():
        raise dg.Failure(f"{path}: checkpoint of {model}'s latest materialisation is gone; re-materialise {model}")
    return path


def rows_md(rows) -> str:
    lines = ["| suite | metric | value | n | detail |", "|---|---|---|---|---|"]
    for suite, metric, value, n, detail in rows:
        lines.append(f"| {suite} | {metric} | {value:.4g} | {n} | {md_cell(detail)} |")
    return "\n".join(lines)


def report_dir(st: Store, model: str) -> Path:
    return st.root / "reports" / "evaluation" / model


def write_png(path: Path, png: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(png)


class Progress:
    """Counts work done: a Dagster log line every LOG_EVERY_S with the rate, and the CLI's
    progress file (the run tag PROGRESS_TAG) kept current."""

    LOG_EVERY_S = 15.0

    def __init__(self, context: dg.AssetExecutionContext, what: str, total: int):

        self.context, self.what, self.total, self.done = context, what, total, 0
        self.file = context.run.tags.get(PROGRESS_TAG)
        self.start = self.last = self.last_write = time.monotonic()

    def set(self, done: int, total: int | None = None) -> None:
        self.done, self.total = done, total or self.total
        now = time.monotonic()
        if now - self.last >= self.LOG_EVERY_S or self.done == self.total:
            self.last = now
            rate = self.done / max(now - self.start, 1e-9)
            self.context.log.info(f"{self.done:,} of {self.total:,} {self.what} ({rate:.1f}/s)")
        if self.file and (now - self.last_write >= WRITE_EVERY_S or self.done == self.total):
            self.last_write = now
            write_progress(Path(self.file), self.done, 0, self.total)

    def step(self, n: int = 1) -> None:
        self.set(self.done + n)


class SuitesConfig(DescribedConfig):
    suites_dir: str = ""
    """Folder of .epd files; empty: CHESS_PIPELINE_SUITES, else the store's `suites` folder."""
    depths: list[int] = [1, 2]
    """Search depths to score every suite at (1 = the 1-ply player)."""
    kaufman_depth: int = 16
    """Stockfish depth of Kaufman's delta-cp evaluations."""
    max_positions: int = 0
    """Positions per suite (0: all)."""


class MatchesConfig(DescribedConfig):
    openings: int = 20
    """How many of Sabatelli's 20 openings (each played with both colours)."""
    random_plies: int = 80
    """Hui's test: a game against the random mover counts as won only inside this many plies."""
    stockfish_skills: list[int] = [0, 5, 10]
    """Stockfish skill levels (0-20) the 1-ply network plays, one match each (empty skips)."""
    stockfish_depth: int = 6
    """Search depth of those Stockfish opponents."""
    search_depths: list[int] = [1, 2]
    """Network vs the traditional evaluation, both at each of these depths (empty skips)."""
    movetime: float = 0.05
    """... and at this time per move in seconds (0 skips)."""
    time_openings: int = 10
    """Openings of the fixed-time match (it is the slow one)."""
    max_plies: int = 400
    """Other matches: a game still going after this many plies ends unfinished ('*')."""
    endgames: int = 10
    """Won endgames from the store's games to convert (0 skips)."""
    endgame_verify_depth: int = 14
    """Stockfish depth that must confirm an endgame as won for the side to move."""
    endgame_defender_depth: int = 8
    """The defending Stockfish (full strength) searches this deep."""
    endgame_max_plies: int = 100
    """An endgame counts as converted only when won inside this many plies."""


def suites_asset(model: str) -> dg.AssetsDefinition:
    name = f"eval_suites_{model}"

    @dg.asset(
        name=name,
        group_name=GROUP,
        deps=[model],
        description=f"{model} on the EPD test suites: STS points per theme, Kaufman delta-cp, solved counts.",
    )
    def _suites(
        context: dg.AssetExecutionContext, config: SuitesConfig, store: StoreResource, stockfish: StockfishResource
    ) -> dg.MaterializeResult:
        from pipeline.engine import Limit
        from pipeline.evaluation import load_suites, problem_rows, run_suite, suite_files
        from pipeline.plots import kaufman_png, sts_themes_png
        from training.evaluator import NetworkEvaluator

        st = store.get()
        folder = suites_folder(config.suites_dir, st)
        files = suite_files(folder) if folder.is_dir() else []
        evaluator = NetworkEvaluator(checkpoint_of(context, model), model)
        rows, meta = [], {"suites_folder": dg.MetadataValue.path(str(folder))}
        if not files:
            context.log.warning(f"no .epd suites in {folder}: set CHESS_PIPELINE_SUITES or put suites there")
        suites, unreadable = load_suites(files, config.max_positions)
        for name_, why in unreadable.items():
            context.log.warning(f"suite {name_} left out: {why}")
            rows += problem_rows(unreadable=(name_, why))
        failed = [(s.name, f) for s in suites for f in s.failures]
        for s in suites:
            if s.failures:
                context.log.warning(
                    f"suite {s.name}: {len(s.failures):,} of {s.lines:,} positions left out "
                    f"(line {s.failures[0].line}: {s.failures[0].reason})"
                )
        progress = Progress(context, "suite positions", len(config.depths) * sum(len(s.positions) for s in suites))
        for suite in suites:
            report, suite_rows = run_suite(
                evaluator,
                suite.name,
                suite.positions,
                tuple(config.depths),
                stockfish.pool,
                Limit("depth", config.kaufman_depth),
                context.log.info,
                progress.step,
            )
            rows += suite_rows + problem_rows(suite)
            out = report_dir(st, model)
            for depth, deltas in report.kaufman.items():
                png = kaufman_png(
                    deltas, f"{model}: Kaufman test, depth {depth} player, Stockfish depth {config.kaufman_depth}"
                )
                write_png(out / f"{report.name}_depth{depth}.png", png)
                meta[f"{report.name}_chart_depth{depth}"] = png_md(png, "Kaufman evaluations")
                meta[f"{report.name}_positions_depth{depth}"] = dg.MetadataValue.md(
                    "| position | played | suite's move | after suite's (cp) | after played (cp) | delta |\n"
                    "|---|---|---|---|---|---|\n"
                    + "\n".join(
                        f"| {x.id} | {x.move} | {x.reference} | {x.eval_reference} | {x.eval_move} | {x.delta} |"
                        for x in deltas
                    )
                )
            if report.sts:
                png = sts_themes_png({d: s.themes for d, s in report.scores.items()}, f"{model}: STS by theme")
                write_png(out / f"{report.name}_themes.png", png)
                meta[f"{report.name}_themes"] = png_md(png, "STS points by theme")
        full = [(model, *r) for r in rows]
        write_results(st, name, context.run.run_id, full)
        meta["results"] = dg.MetadataValue.md(rows_md([r for r in rows if "/" not in r[0]]) if rows else "no suites")
        meta["suites"] = len(suites)
        meta["suites_unreadable"] = len(unreadable)
        meta["positions_failed"] = len(failed)
        if unreadable:
            meta["unreadable_suites"] = dg.MetadataValue.md(
                "| suite | why |\n|---|---|\n" + "\n".join(f"| {n} | {md_cell(why)} |" for n, why in unreadable.items())
            )
        if failed:
            meta["failed_positions"] = dg.MetadataValue.md(
                "| suite | line | why |\n|---|---|---|\n"
                + "\n".join(f"| {n} | {f.line} | {md_cell(f.reason)} |" for n, f in failed[:200])
                + (f"\n\n{len(failed) - 200:,} more not listed" if len(failed) > 200 else "")
            )
        return dg.MaterializeResult(metadata=meta)

    return _suites


def matches_asset(model: str) -> dg.AssetsDefinition:
    name = f"eval_matches_{model}"

    @dg.asset(
        name=name,
        group_name=GROUP,
        deps=[model],
        description=f"{model} in matches from Sabatelli's openings (random mover, Stockfish skill levels, "
        "search vs the traditional evaluation) and converting won endgames.",
    )
    def _matches(
        context: dg.AssetExecutionContext, config: MatchesConfig, store: StoreResource, stockfish: StockfishResource
    ) -> dg.MaterializeResult:
        from pipeline.duck import memory_connection
        from pipeline.evaluation import EndgameConfig, MatchConfig, find_won_endgames, run_endgames, run_matches
        from pipeline.openings import sabatelli_openings
        from pipeline.search import MaterialEvaluator
        from training.evaluator import NetworkEvaluator

        st = store.get()
        ck = checkpoint_of(context, model)
        net = NetworkEvaluator(ck, model)
        cfg = MatchConfig(
            openings=config.openings,
            random_plies=config.random_plies,
            stockfish_skills=tuple(config.stockfish_skills),
            stockfish_depth=config.stockfish_depth,
            search_depths=tuple(config.search_depths),
            movetime=config.movetime,
            time_openings=config.time_openings,
            max_plies=config.max_plies,
        )
        start = time.monotonic()
        progress = Progress(context, "games", 0)
        matches, rows = run_matches(
            model,
            lambda: net,
            MaterialEvaluator,
            sabatelli_openings(),
            stockfish.binary(),
            cfg,
            context.log.info,
            progress.set,
        )
        if config.endgames:
            ecfg = EndgameConfig(
                positions=config.endgames,
                verify_depth=config.endgame_verify_depth,
                defender_depth=config.endgame_defender_depth,
                max_plies=config.endgame_max_plies,
            )
            with memory_connection(st) as con:
                positions = find_won_endgames(con, stockfish.pool, ecfg)
            if positions:
                m, erows = run_endgames(model, lambda: net, positions, stockfish.binary(), ecfg, context.log.info)
                matches.append(m)
                rows += erows
            else:
                context.log.warning("no won endgames in the store's labelled positions: conversion skipped")
        pgn, n = write_games(st, name, context.run.run_id, matches)
        write_results(st, name, context.run.run_id, [(model, *r) for r in rows])
        return dg.MaterializeResult(
            metadata={
                "results": dg.MetadataValue.md(rows_md(rows)),
                "games": n,
                "pgn": dg.MetadataValue.path(str(pgn)),
                "seconds": round(time.monotonic() - start, 1),
            }
        )

    return _matches


HEAD_TO_HEAD_MODELS = ["mlp_bitmap_3class", "cnn_features_3class"]
"""The models eval_head_to_head depends on: the only ones its pairs may name."""


class HeadToHeadConfig(DescribedConfig):
    pairs: list[list[str]] = [list(HEAD_TO_HEAD_MODELS)]
    """Model pairs to play against each other (1-ply, as Sabatelli's MLP vs CNN); each names two
    different models of those the asset depends on."""
    openings: int = 20
    """How many of Sabatelli's 20 openings (each played with both colours)."""
    max_plies: int = 400
    """A game still going after this many plies ends unfinished ('*')."""

    @field_validator("pairs")
    @classmethod
    def _pairs_of_dependencies(cls, pairs: list[list[str]]) -> list[list[str]]:
        """A model outside the asset's deps would be played without showing in its lineage."""
        valid = ", ".join(HEAD_TO_HEAD_MODELS)
        for pair in pairs:
            if len(pair) != 2 or pair[0] == pair[1]:
                raise ValueError(f"pairs: {pair} does not name two different models; each pair names two of {valid}")
            unknown = [m for m in pair if m not in HEAD_TO_HEAD_MODELS]
            if unknown:
                raise ValueError(
                    f"pairs: {', '.join(unknown)}: not a model eval_head_to_head depends on; pairs may name {valid}"
                )
        return pairs


@dg.asset(
    group_name=GROUP,
    deps=HEAD_TO_HEAD_MODELS,
    description="Network vs network from Sabatelli's openings, both 1-ply (his MLP vs CNN match).",
)
def eval_head_to_head(
    context: dg.AssetExecutionContext, config: HeadToHeadConfig, store: StoreResource
) -> dg.MaterializeResult:
    from pipeline.evaluation import match_rows, player_name
    from pipeline.matches import MatchSpec, play_match
    from pipeline.openings import sabatelli_openings
    from pipeline.search import AlphaBeta, SearchPlayer
    from training.evaluator import NetworkEvaluator

    st = store.get()
    matches, rows = [], []
    for a, b in config.pairs:
        ea, eb = (NetworkEvaluator(checkpoint_of(context, x), x) for x in (a, b))
        spec = MatchSpec(
            f"{a} vs {b}",
            lambda ea=ea, a=a: SearchPlayer(AlphaBeta(ea, depth=1), player_name(a, 1)),
            lambda eb=eb, b=b: SearchPlayer(AlphaBeta(eb, depth=1), player_name(b, 1)),
            max_plies=config.max_plies,
        )
        m = play_match(spec, sabatelli_openings()[: config.openings])
        matches.append(m)
        rows += [(a, *r) for r in match_rows(m, player_name(b, 1), "Sabatelli: MLP vs CNN")]
        swapped = type(m)(m.name, m.b, m.a, m.games)
        rows += [(b, *r) for r in match_rows(swapped, player_name(a, 1))]
        context.log.info(f"{a} vs {b}: {rows[-4][5]}")
    pgn, n = write_games(st, "eval_head_to_head", context.run.run_id, matches)
    write_results(st, "eval_head_to_head", context.run.run_id, rows)
    return dg.MaterializeResult(
        metadata={
            "results": dg.MetadataValue.md(rows_md([r[1:] for r in rows])),
            "games": n,
            "pgn": dg.MetadataValue.path(str(pgn)),
        }
    )


def player_model(player: str) -> str:
    """The model a player name belongs to ('<model> 1-ply' -> '<model>'), else the player itself."""
    head = player.split(" ", 1)[0]
    return head if head in MODELS else player


@dg.asset(
    group_name=GROUP,
    deps=[f"eval_matches_{m}" for m in MODELS] + ["eval_head_to_head"],
    description="Elo of every player from every finished evaluation game from the openings (the newest "
    "run of each match asset; endgame conversion left out), the random mover = 0, with 95% "
    "error bars against the pool's average.",
)
def elo_ratings(context: dg.AssetExecutionContext, store: StoreResource) -> dg.MaterializeResult:
    from pipeline.duck import memory_connection
    from pipeline.evaluation import ENDGAME_MATCH
    from pipeline.matches import fit_elo
    from pipeline.plots import elo_png

    st = store.get()
    with memory_connection(st) as con:
        # Endgame conversion starts from won positions: no measure of strength between equals.
        games = con.sql(
            "SELECT white, black, CASE result WHEN '1-0' THEN 1.0 WHEN '0-1' THEN 0.0 ELSE 0.5 END "
            "FROM match_games WHERE result IN ('1-0', '0-1', '1/2-1/2') AND match <> $endgames",
            params={"endgames": ENDGAME_MATCH},
        ).fetchall()
    if not games:
        raise dg.Failure("no finished evaluation games in match_games: materialise the eval_matches_* assets first")
    played = Counter(p for white, black, _ in games for p in (white, black))
    # The random mover when it finished a game (its unfinished 80-ply games are no result),
    # else the player with the most finished games.
    anchor = ELO_ANCHOR if ELO_ANCHOR in played else max(sorted(played), key=played.get)
    if anchor != ELO_ANCHOR:
        context.log.warning(f"{ELO_ANCHOR} finished no game: Elo anchored at {anchor} = 0 instead")
    fit = fit_elo(games, anchor)
    order = sorted(fit.ratings, key=lambda p: -fit.ratings[p])
    rows = [
        (
            player_model(p),
            "elo",
            p,
            fit.ratings[p],
            fit.games[p],
            f"+/-{fit.errors[p]:.0f} (95%, against the pool's average), anchor {anchor} = 0",
        )
        for p in order
    ]
    write_results(st, "elo_ratings", context.run.run_id, rows)
    table = "| player | Elo | 95% | games |\n|---|---|---|---|\n" + "\n".join(
        f"| {p} | {fit.ratings[p]:.0f} | +/-{fit.errors[p]:.0f} | {fit.games[p]} |" for p in order
    )
    png = elo_png(fit, "Elo from all evaluation games")
    write_png(st.root / "reports" / "evaluation" / "elo.png", png)
    return dg.MaterializeResult(
        metadata={
            "ratings": dg.MetadataValue.md(table),
            "games": len(games),
            "anchor": anchor,
            "chart": png_md(png, "Elo ratings"),
        }
    )


def report_asset(model: str) -> dg.AssetsDefinition:
    name = f"eval_report_{model}"

    @dg.asset(
        name=name,
        group_name=GROUP,
        deps=[f"eval_suites_{model}", f"eval_matches_{model}", "elo_ratings"],
        description=f"{model}'s evaluation next to the published figures (Markdown, charts; also "
        f"reports/evaluation/{model}.md in the store).",
    )
    def _report(context: dg.AssetExecutionContext, store: StoreResource) -> dg.MaterializeResult:
        from pipeline.duck import memory_connection
        from pipeline.evaluation import report_markdown

        st = store.get()
        with memory_connection(st) as con:
            rows = con.sql(
                "SELECT suite, metric, value, n, detail FROM evaluation_results WHERE model = $m "
                "ORDER BY suite, metric",
                params={"m": model},
            ).fetchall()
        path = st.root / "reports" / "evaluation" / f"{model}.md"
        charts = [c for c in sorted(report_dir(st, model).glob("*.png")) + [path.parent / "elo.png"] if c.exists()]
        text = report_markdown(model, rows, [os.path.relpath(c, path.parent) for c in charts])
        with atomic_path(path) as tmp:
            tmp.write_text(text)
        meta = {"report": dg.MetadataValue.md(text), "path": dg.MetadataValue.path(str(path)), "figures": len(rows)}
        for c in charts:
            meta[c.stem] = png_md(c.read_bytes(), c.stem)
        return dg.MaterializeResult(metadata=meta)

    return _report


evaluation_assets = (
    [suites_asset(m) for m in MODELS]
    + [matches_asset(m) for m in MODELS]
    + [eval_head_to_head, elo_ratings]
    + [report_asset(m) for m in MODELS]
)
