"""lubeck_grid: Lubeck's experiment grid filled in (pipeline/play/lubeck_grid.py has the logic).

The W/D/L network (`lubeck_wdl_mlp`) against the traditional evaluation in the same search, per
search depth x seconds a move (scaled to this machine as node budgets) x quiet / tactical start
positions. Writes reports/lubeck_grid.md and reports/lubeck_grid.png in the store, the games as
PGN under matches/lubeck_grid/, and per cell the network's score and Elo difference into
evaluation_results (suite lubeck_grid/<kind>/depth<d>/<t>s).

With `checkpoint: FILE` it plays that checkpoint (any trained model the evaluator scores, e.g.
one trained on a GPU) in place of lubeck_wdl_mlp's, named <name>, the checkpoint's
model_encoder_dataset; `checkpoint: MODEL`, a model asset's name, plays the checkpoint of its
latest materialisation the same way. With `challenger: stockfish_static` it plays Stockfish's own static
evaluation instead of the network (no checkpoint needed), the reference of a better but slower
evaluation, named stockfish_static. Either way its report is reports/lubeck_grid_<name>.md (and
.png, the checkpoint's path in it) and its rows go under model <name> and asset
lubeck_grid_<name> (evaluation_results keeps the newest run of each asset), so the network's
report and rows stay as they were. `name: NAME` names the challenger (its report, rows and
PGN player) in place of either, so two checkpoints of the same model, encoder and dataset
(trained on more positions, say) keep a report each.
"""

import dataclasses
import functools
import time

import dagster as dg

from assets.config import config_from
from assets.metadata import png_md
from assets.progress import run_progress
from assets.resources import StockfishResource, StoreResource
from assets.shared import EVALUATION_GROUP as GROUP
from assets.shared import checkpoint_of, write_png
from pipeline.play.lubeck_grid import GridConfig
from pipeline.store.store_files import atomic_path
from training.catalog import MODELS

MODEL = "lubeck_wdl_mlp"
"""The model asset the grid plays (Lubeck's W/D/L network)."""


def played_checkpoint(cfg: GridConfig) -> str:
    """The name config.checkpoint plays under (its model_encoder_dataset), after loading it once
    here: a file that is not a checkpoint the evaluator can play fails the run with one line before
    any game (in the playing processes it would be a traceback), and so does DeepChess's comparator,
    whose scores order the positions of one call only: the grid's searches go deeper than 1 ply
    and resolve captures a position at a time."""
    from training.evaluator import load_evaluator

    try:
        evaluator = load_evaluator(cfg.checkpoint)
    except Exception as e:  # a missing file, not a torch file, weights of another shape: all one line
        why = " ".join(f"{type(e).__name__}: {e}".split())
        raise dg.Failure(
            f"checkpoint {cfg.checkpoint} cannot be played ({why[:300]}); give a checkpoint.pt "
            "that training wrote (chess-pipeline train, python -m training.train)"
        ) from None
    if getattr(evaluator, "max_depth", None) is not None:  # training.deepchess.ComparisonEvaluator
        raise dg.Failure(
            f"checkpoint {cfg.checkpoint} is DeepChess's comparator, which plays 1-ply comparisons only "
            "(its scores order one call's positions): the grid needs an evaluator that scores a position alone"
        )
    return evaluator.name


LubeckGridConfig = config_from(
    GridConfig, name="LubeckGridConfig", doc="Lubeck's grid: pipeline.play.lubeck_grid.GridConfig's fields."
)


@dg.asset(
    group_name=GROUP,
    deps=[MODEL],
    description="Lubeck's experiment grid: the W/D/L network against the traditional evaluation in the same "
    "search, per depth (2/4/6), seconds a move (1/2/5, scaled to node budgets here) and quiet / tactical "
    "starts; score and Elo per cell (reports/lubeck_grid.md).",
)
def lubeck_grid(
    context: dg.AssetExecutionContext, config: LubeckGridConfig, store: StoreResource, stockfish: StockfishResource
) -> dg.MaterializeResult:
    from pipeline.labels.engine import EngineError
    from pipeline.play.evaluation import write_results
    from pipeline.play.lubeck_grid import candidate_fens, pick_positions, run_grid
    from pipeline.play.matches import write_pgn
    from pipeline.play.stockfish_eval import StockfishStaticEvaluator
    from pipeline.plots import lubeck_grid_png
    from pipeline.store.duck import memory_connection
    from training.evaluator import load_evaluator

    st = store.get()
    try:
        cfg = config.to_dataclass(GridConfig)
    except ValueError as e:
        raise dg.Failure(str(e)) from None
    if cfg.checkpoint in MODELS:  # a model asset's name: the checkpoint of its latest materialisation
        cfg = dataclasses.replace(cfg, checkpoint=str(checkpoint_of(context, cfg.checkpoint)))
    if cfg.challenger == "network" and cfg.checkpoint:
        own = played_checkpoint(cfg)  # checks the file before any game, whatever the name
    else:
        own = MODEL if cfg.challenger == "network" else StockfishStaticEvaluator.name
    name = cfg.name or own
    taken = {*MODELS, StockfishStaticEvaluator.name}  # other players' rows and reports
    if name != own and name in taken:
        raise dg.Failure(
            f"name {name} is {'a model asset' if name in MODELS else 'another challenger'}'s: its rows and report "
            "would be mixed with this run's; give another name"
        )
    if cfg.challenger == "network":
        factory = functools.partial(load_evaluator, cfg.checkpoint or checkpoint_of(context, MODEL), name)
    else:
        factory = functools.partial(StockfishStaticEvaluator, stockfish.binary())
    stem = "lubeck_grid" if name == MODEL else f"lubeck_grid_{name}"  # report, png and results asset
    start = time.monotonic()
    with memory_connection(st) as con:
        fens = candidate_fens(con, cfg)
    if not fens:
        raise dg.Failure("no candidate start positions in the store's games: ingest archives first")
    starts = pick_positions(fens, stockfish.pool, cfg)
    context.log.info(
        f"{len(fens)} candidates: " + ", ".join(f"{len(v)} {k}" for k, v in starts.items()) + " start positions"
    )
    progress = run_progress(context, "start positions played")
    try:
        result = run_grid(
            name,
            factory,
            starts,
            stockfish.pool,
            cfg,
            context.log.info,
            progress.set,
        )
    except (ValueError, EngineError) as e:  # bad settings; the challenger's engine died or spoke garbage
        raise dg.Failure(str(e)) from None
    run_id = context.run.run_id
    pgn = st.root / "matches" / "lubeck_grid" / f"{run_id}.pgn"
    write_pgn(result.games, pgn)
    write_results(st, stem, run_id, result.rows(name))  # each challenger's newest run in evaluation_results
    png = lubeck_grid_png(
        [(c.cell.kind, c.cell.depth, c.cell.seconds, c.score, c.score_low, c.score_high) for c in result.cells],
        f"{name} vs material_pst in the same search ({len(result.games)} games)",
    )
    folder = st.root / "reports"
    write_png(folder / f"{stem}.png", png)
    played = f"\nThe challenger's checkpoint: `{cfg.checkpoint}`.\n" if cfg.checkpoint else ""
    text = result.report_md() + played + f"\n![score per cell]({stem}.png)\n"
    path = folder / f"{stem}.md"
    with atomic_path(path) as tmp:
        tmp.write_text(text)
    return dg.MaterializeResult(
        metadata={
            "table": dg.MetadataValue.md(result.table_md()),
            "pooled": dg.MetadataValue.md(result.pooled_md()),
            "score": result.pooled()[-1].score,
            "chart": png_md(png, "Lubeck's grid"),
            "report": dg.MetadataValue.path(str(path)),
            **({"checkpoint": dg.MetadataValue.path(cfg.checkpoint)} if cfg.checkpoint else {}),
            "pgn": dg.MetadataValue.path(str(pgn)),
            "games": len(result.games),
            "cells": len(result.cells),
            "cell_intervals": dg.MetadataValue.json(
                {
                    c.cell.name: {"n": c.games, "score": c.score, "low95": c.score_low, "high95": c.score_high}
                    for c in result.cells
                }
            ),
            "nodes_per_second": dg.MetadataValue.json({k: round(v) for k, v in result.nps.items()}),
            "seconds": round(time.monotonic() - start, 1),
        }
    )
