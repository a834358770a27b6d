"""Evaluation assets: how well each trained model plays, the ways the published work measured it.

Per model: eval_suites_<model> (EPD suites: STS points, Kaufman delta-cp, solved counts),
eval_matches_<model> (random mover, Stockfish skill levels, search vs the traditional evaluation,
endgame conversion) and eval_report_<model>. Across models: eval_head_to_head (network vs
network) and elo_ratings (from every game played). Figures land in evaluation_results, games
in match_games and as PGN under <store>/matches/, reports under <store>/reports/evaluation/.
Each evaluation loads the checkpoint its model asset last materialised (lineage, not the
newest file on disk).
"""

import dataclasses
import functools
import os
import time
from collections import Counter
from pathlib import Path

import dagster as dg
from pydantic import field_validator

from assets.config import DescribedConfig, config_from
from assets.metadata import md_cell, png_md
from assets.progress import run_progress
from assets.resources import StockfishResource, StoreResource
from assets.shared import EVALUATION_GROUP as GROUP
from assets.shared import MODEL_TAG, checkpoint_of, report_dir, rows_md, suites_folder, write_png
from pipeline.play.evaluation import EndgameConfig, MatchConfig, write_results
from pipeline.play.matches import write_games
from pipeline.research.published import DEEPCHESS_MODEL
from pipeline.store import storage
from pipeline.store.storage_paths import ObjectPath, StorePath
from pipeline.store.store_files import atomic_path
from training.catalog import MODELS

ELO_ANCHOR = "random"


def local_suite_files(folder: StorePath) -> list[Path]:
    """The folder's .epd files as local files: an S3 prefix's are read from the local cache
    (storage.cached_copy, downloaded when their ETag changed), named as in the store."""
    from pipeline.play.evaluation import suite_files

    if isinstance(folder, ObjectPath):
        return [storage.cached_copy(p) for p in storage.list_files(folder, ".epd")]
    return suite_files(folder) if folder.is_dir() else []


def report_pngs(folder: StorePath) -> list[StorePath]:
    """The charts of a report folder, a local one or one of an S3 store."""
    if isinstance(folder, ObjectPath):
        return [p for p in storage.list_files(folder) if p.name.endswith(".png")]
    return sorted(Path(folder).glob("*.png"))


def relative_to(path: StorePath, base: StorePath) -> str:
    """path from base, as a report links it."""
    if isinstance(path, ObjectPath):
        return str(path.relative_to(base))
    return os.path.relpath(path, base)


def playable_depths(model: str, depths, warn) -> tuple[int, ...]:
    """The search depths model asset `model` can play at: all of them, or for one whose scores
    only order the positions of one call (DeepChess's comparison player, max_depth 1) those up to
    it (training.evaluator.max_depth_of: the catalog decides, no checkpoint is loaded)."""
    from training.evaluator import max_depth_of

    top = max_depth_of(model)
    kept = tuple(d for d in depths if top is None or d <= top)
    if kept != tuple(depths):
        warn(f"{model} compares the positions of one move list: depths {list(depths)} played as {list(kept)}")
    return kept


class SuitesConfig(DescribedConfig):
    suites_dir: str = ""
    """Folder of .epd files; empty: CHESS_PIPELINE_SUITES, else the store's `suites` folder."""
    depths: list[int] = [1, 2]
    """Search depths to score every suite at (1 = the 1-ply player)."""
    kaufman_depth: int = 16
    """Stockfish depth of Kaufman's delta-cp evaluations."""
    max_positions: int = 0
    """Positions per suite (0: all)."""
    workers: int = 0
    """Processes searching at once (0: one per core this process may use). Every search starts
    fresh, so the moves do not depend on it."""

    @field_validator("workers")
    @classmethod
    def _workers(cls, workers: int) -> int:
        from pipeline.parallel import check_workers

        return check_workers(workers)


MatchesConfig = config_from(
    EndgameConfig,
    name="MatchesConfig",
    base=config_from(MatchConfig, name="MatchSettings", exclude=["seed"]),
    names=["positions", "verify_depth", "defender_depth", "max_plies"],
    prefix="endgame_",
    rename={"positions": "endgames"},
    doc="The matches of eval_matches_<model>: pipeline.play.evaluation.MatchConfig's fields, then "
    "EndgameConfig's (positions as `endgames`, the others prefixed `endgame_`).",
)


KAUFMAN_SCALE_DIR = "reports/kaufman_scale"
"""Where the store keeps Stockfish's own Kaufman deltas (the scale), one JSON file per suite,
engine, evaluation depth and player depths."""


def kaufman_scale_rows(st, suite: str, positions, pool, deep_depth: int, meta: dict) -> list:
    """Stockfish's own Kaufman delta (the player at KAUFMAN_SCALE_DEPTHS, scored at `deep_depth`),
    the scale beside the network's: evaluation_results rows avg_delta_pawns_stockfish_depthN
    (with _low95 / _high95) and a `<suite>_scale` table in `meta`. Searched once per store
    (KAUFMAN_SCALE_DIR), not once per model."""
    from pipeline.labels.uci import Limit
    from pipeline.play.suites import kaufman_rows, kaufman_summary, kept_kaufman_scale

    rows, lines = [], ["| player | mean delta | 95% interval | n |", "|---|---|---|---|"]
    scale = kept_kaufman_scale(st.root / KAUFMAN_SCALE_DIR, positions, pool, Limit("depth", deep_depth))
    for depth, deltas in scale.items():
        rows += kaufman_rows(
            suite,
            f"avg_delta_pawns_stockfish_depth{depth}",
            deltas,
            f"scale: Stockfish depth {depth} as the player; Stockfish depth {deep_depth}",
        )
        m = kaufman_summary(deltas)
        lines.append(f"| Stockfish depth {depth} | {m.mean:.2f} pawns | {m.low:.2f}-{m.high:.2f} | {m.n} |")
    meta[f"{suite}_scale"] = dg.MetadataValue.md("\n".join(lines))
    return rows


def suites_asset(model: str) -> dg.AssetsDefinition:
    name = f"eval_suites_{model}"

    @dg.asset(
        name=name,
        group_name=GROUP,
        deps=[model],
        tags={MODEL_TAG: model},
        description=f"{model} on the EPD test suites: STS points per theme, Kaufman delta-cp, solved counts.",
    )
    def _suites(
        context: dg.AssetExecutionContext, config: SuitesConfig, store: StoreResource, stockfish: StockfishResource
    ) -> dg.MaterializeResult:
        from pipeline.labels.uci import Limit
        from pipeline.play.evaluation import load_suites, problem_rows, run_suites
        from pipeline.play.suites import kaufman_summary
        from pipeline.plots import kaufman_png, sts_themes_png
        from training.evaluator import load_evaluator

        st = store.get()
        folder = suites_folder(config.suites_dir, st)
        files = local_suite_files(folder)
        depths = playable_depths(model, config.depths, context.log.warning)
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
        progress = run_progress(context, "suite positions", len(depths) * sum(len(s.positions) for s in suites))
        reports = run_suites(
            functools.partial(load_evaluator, checkpoint_of(context, model), model),  # loaded in each process
            [(s.name, s.positions) for s in suites],
            depths,
            stockfish.pool,
            Limit("depth", config.kaufman_depth),
            config.workers,
            context.log.info,
            progress.step,
        )
        for suite, (report, suite_rows) in zip(suites, reports, strict=True):
            rows += suite_rows + problem_rows(suite)
            out = report_dir(st, model)
            if report.kaufman:
                rows += kaufman_scale_rows(st, report.name, suite.positions, stockfish.pool, config.kaufman_depth, meta)
            for depth, deltas in report.kaufman.items():
                meta[f"{report.name}_avg_delta_depth{depth}"] = kaufman_summary(deltas).text()
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
        tags={MODEL_TAG: model},
        description=f"{model} in matches from Sabatelli's openings (random mover, Stockfish skill levels, "
        "search vs the traditional evaluation) and converting won endgames.",
    )
    def _matches(
        context: dg.AssetExecutionContext, config: MatchesConfig, store: StoreResource, stockfish: StockfishResource
    ) -> dg.MaterializeResult:
        from pipeline.play.evaluation import MatchSetup, find_won_endgames, run_endgames, run_matches
        from pipeline.play.openings import sabatelli_openings
        from pipeline.play.search import MaterialEvaluator
        from pipeline.store.duck import memory_connection
        from training.evaluator import load_evaluator, max_depth_of

        try:
            cfg = config.to_dataclass(MatchConfig)
        except ValueError as e:
            raise dg.Failure(str(e)) from None
        st = store.get()
        ck = checkpoint_of(context, model)
        top = max_depth_of(model)
        if top:  # a comparison player: its 1-ply matches only
            cfg = dataclasses.replace(
                cfg, search_depths=playable_depths(model, cfg.search_depths, context.log.warning), movetime=0.0
            )
        start = time.monotonic()
        progress = run_progress(context, "games")
        matches, rows = run_matches(
            MatchSetup(
                model,
                functools.partial(load_evaluator, ck, model),  # loaded in each process playing games
                MaterialEvaluator,
                sabatelli_openings(),
                stockfish.binary(),
                cfg,
            ),
            context.log.info,
            progress.set,
        )
        if config.endgames:
            ecfg = config.to_dataclass(EndgameConfig)
            if top:
                ecfg = dataclasses.replace(ecfg, player_depth=min(ecfg.player_depth, top))
            with memory_connection(st) as con:
                positions = find_won_endgames(con, stockfish.pool, ecfg)
            if positions:
                factory = functools.partial(load_evaluator, ck, model)  # loaded once, here: the endgames play here
                m, erows = run_endgames(model, factory, positions, stockfish.binary(), ecfg, context.log.info)
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
    from pipeline.play.evaluation import match_rows, player_name
    from pipeline.play.matches import MatchSpec, play_match
    from pipeline.play.openings import sabatelli_openings
    from pipeline.play.search import AlphaBeta, SearchPlayer
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
    # td_evaluation (assets/selfplay.py) writes its games to match_games too: the TD player is rated
    # with the rest, and a new TD evaluation makes the ratings stale.
    deps=[f"eval_matches_{m}" for m in MODELS] + ["eval_head_to_head", "td_evaluation"],
    description="Elo of every player from every finished evaluation game from the openings (the newest "
    "run of each match asset, the self-play line's td_evaluation among them; endgame conversion "
    "left out), the random mover = 0, with 95% "
    "error bars against the pool's average.",
)
def elo_ratings(context: dg.AssetExecutionContext, store: StoreResource) -> dg.MaterializeResult:
    from pipeline.play.evaluation import ENDGAME_MATCH
    from pipeline.play.matches import fit_elo
    from pipeline.plots import elo_png
    from pipeline.research.intervals import small_sample
    from pipeline.store.duck import memory_connection

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
            "; ".join(
                x
                for x in (f"+/-{fit.errors[p]:.0f} (95%, against the pool's average), anchor {anchor} = 0",
                          small_sample(fit.games[p]))
                if x
            ),
        )
        for p in order
    ]  # fmt: skip
    write_results(st, "elo_ratings", context.run.run_id, rows)
    table = "| player | Elo | 95% | games | |\n|---|---|---|---|---|\n" + "\n".join(
        f"| {p} | {fit.ratings[p]:.0f} | +/-{fit.errors[p]:.0f} | {fit.games[p]} | {small_sample(fit.games[p])} |"
        for p in order
    )
    png = elo_png(fit, "Elo from all evaluation games")
    write_png(st.root / "reports" / "evaluation" / "elo.png", png)
    return dg.MaterializeResult(
        metadata={
            "ratings": dg.MetadataValue.md(table),
            "games": len(games),
            "anchor": anchor,
            "intervals": dg.MetadataValue.json(
                {
                    p: {"n": n, "low95": fit.ratings[p] - fit.errors[p], "high95": fit.ratings[p] + fit.errors[p]}
                    for p, n in ((p, fit.games[p]) for p in order)
                }
            ),
            "chart": png_md(png, "Elo ratings"),
        }
    )


REPORT_EXTRA_DEPS = {DEEPCHESS_MODEL: (f"eval_pairs_{DEEPCHESS_MODEL}",)}
"""A model's own evaluation assets (assets/deepchess.py) that its report reads too."""


def report_asset(model: str) -> dg.AssetsDefinition:
    name = f"eval_report_{model}"

    @dg.asset(
        name=name,
        group_name=GROUP,
        deps=[f"eval_suites_{model}", f"eval_matches_{model}", "elo_ratings", *REPORT_EXTRA_DEPS.get(model, ())],
        tags={MODEL_TAG: model},
        description=f"{model}'s evaluation next to the published figures (Markdown, charts; also "
        f"reports/evaluation/{model}.md in the store).",
    )
    def _report(context: dg.AssetExecutionContext, store: StoreResource) -> dg.MaterializeResult:
        from pipeline.play.evaluation import report_markdown
        from pipeline.store.duck import memory_connection

        st = store.get()
        with memory_connection(st) as con:
            rows = con.sql(
                "SELECT suite, metric, value, n, detail FROM evaluation_results WHERE model = $m "
                "ORDER BY suite, metric",
                params={"m": model},
            ).fetchall()
        path = st.root / "reports" / "evaluation" / f"{model}.md"
        charts = [c for c in report_pngs(report_dir(st, model)) + [path.parent / "elo.png"] if storage.exists(c)]
        text = report_markdown(model, rows, [relative_to(c, path.parent) for c in charts])
        with atomic_path(path) as tmp:
            tmp.write_text(text)
        meta = {"report": dg.MetadataValue.md(text), "path": dg.MetadataValue.path(str(path)), "figures": len(rows)}
        for c in charts:
            stem = Path(c.name).stem
            meta[stem] = png_md(storage.read_bytes(c), stem)
        return dg.MaterializeResult(metadata=meta)

    return _report


evaluation_assets = (
    [suites_asset(m) for m in MODELS]
    + [matches_asset(m) for m in MODELS]
    + [eval_head_to_head, elo_ratings]
    + [report_asset(m) for m in MODELS]
)
