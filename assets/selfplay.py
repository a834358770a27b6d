"""Learning by self-play (Hui 2018) as assets: generations of TD self-play, their evaluation,
the KRvK check and the representation comparison. The logic is training/td/; these read
their inputs, call it, write, and return metadata.

- td_selfplay: cfg.generations generations of the line cfg.name; each writes its games as a
  PGN archive into the store's archives (added as a partition of archive_tables, so ingest puts
  them into games/positions) and a checkpoint; metadata: the learning curve per generation.
- td_evaluation: the checkpoint td_selfplay last recorded against the random mover (batches of
  games within 80 plies) and the traditional evaluation at equal depth; games into match_games
  (so elo_ratings rates them) and an Elo of the pool.
- td_krk: generations of KRvK self-play until the learned evaluation mates from the position.
- hui_representations: the five representations on hui_checkmate, several seeds each.
"""

import dataclasses
import json

import dagster as dg

from assets.config import config_from
from assets.metadata import md_cell, png_md
from assets.partitions import archives_partitions
from assets.progress import run_progress
from assets.resources import StoreResource
from pipeline.research.published import HUI_RANDOM, HUI_RANDOM_PEAK_TEXT, HUI_RANDOM_RANGE_TEXT
from pipeline.store.storage_paths import StorePath
from training.td.config import KRK_TD_UNUSED, KRKCheck, RepresentationConfig, TDConfig, TDEvaluation, krk_selfplay

GROUP = "selfplay"
PUBLISHED_RANDOM = (
    f"Hui: {HUI_RANDOM_RANGE_TEXT} of 100-game batches won against the random mover within 80 plies, "
    f"peak {HUI_RANDOM_PEAK_TEXT}"
)

TDSelfPlayConfig = config_from(TDConfig, name="TDSelfPlayConfig")


TDEvaluationConfig = config_from(TDEvaluation, name="TDEvaluationConfig")
KRKCheckConfig = config_from(
    TDConfig,
    name="KRKCheckConfig",
    exclude=KRK_TD_UNUSED,
    defaults=dataclasses.asdict(krk_selfplay()),
    base=config_from(KRKCheck, name="KRKCheckSettings", exclude=["td"]),
    doc="Derived from training.td.config.KRKCheck, its self-play (field td) from training.td.config.TDConfig."
    "\n\nDefaults: the check's self-play, training.td.config.krk_selfplay ("
    + ", ".join(
        f"{n} {v}"
        for n, v in dataclasses.asdict(krk_selfplay()).items()
        if v != getattr(TDConfig(), n) and n not in KRK_TD_UNUSED
    )
    + ").",
)
"""td_krk's run config: the check's own settings and, flat beside them, its self-play's."""


def krk_check_config(check: KRKCheck) -> KRKCheckConfig:
    """A KRvK check as td_krk's run config."""
    own = {n: v for n, v in dataclasses.asdict(check).items() if n != "td"}
    values = {**dataclasses.asdict(check.td), **own}
    return KRKCheckConfig(**{n: values[n] for n in KRKCheckConfig.model_fields})


def krk_check(config: KRKCheckConfig) -> KRKCheck:
    """td_krk's run config as the KRvK check (the self-play fields it leaves out: krk_selfplay's)."""
    unused = {n: getattr(krk_selfplay(), n) for n in KRK_TD_UNUSED}
    return config.to_dataclass(KRKCheck, td=config.to_dataclass(TDConfig, **unused))


RepresentationsConfig = config_from(RepresentationConfig, name="RepresentationsConfig")


def _history_md(history: list[dict]) -> str:
    lines = [
        "| generation | games | results | games/s | positions searched/s | TD error | win ratio vs random |",
        "|---|---|---|---|---|---|---|",
    ]
    for h in history:
        wr = (
            ""
            if h.get("win_ratio") is None
            else f"{h['win_ratio']:.0%} ({h['win_interval'][0]:.0%}-{h['win_interval'][1]:.0%})"
        )
        lines.append(
            f"| {h['generation']} | {h['games']} | {md_cell(json.dumps(h['results']))} | {h['games_per_second']:.3f} "
            f"| {h['nodes_per_second']:,.0f} | {h['td_error']:.5f} | {wr} |"
        )
    return "\n".join(lines)


def _last_checkpoint(context: dg.AssetExecutionContext, line: str = "") -> StorePath | None:
    """The checkpoint recorded by td_selfplay's latest materialisation of the line `line` (any
    line when empty): lineage, not the newest file in the folder. A file, or an object of an
    S3 store (the metadata records its s3:// URI)."""
    from training.checkpoints import store_location

    records = context.instance.fetch_materializations(dg.AssetKey("td_selfplay"), limit=200).records
    for record in records:
        meta = record.asset_materialization.metadata if record.asset_materialization else {}
        if "checkpoint" not in meta:
            continue
        path = store_location(meta["checkpoint"].value)
        # selfplay/<line>/gen-NNNN.pt: the folder names the line
        if not line or (meta["line"].value if "line" in meta else path.parent.name) == line:
            return path
    return None


@dg.asset(
    group_name=GROUP,
    description="Generations of TD(lambda) / TD-Leaf(lambda) self-play (Hui 2018): each writes its games as "
    "an archive into the store (a partition of archive_tables) and a checkpoint of the weights; the "
    "learning curve (win ratio against the random mover, TD error) per generation in the metadata.",
)
def td_selfplay(context: dg.AssetExecutionContext, config: TDSelfPlayConfig, store: StoreResource):
    from pipeline.plots import selfplay_curve_png
    from training.td.play import play_line

    cfg = config.to_dataclass()
    if cfg.generations < 1:
        raise dg.Failure("generations 0: nothing to play (at least 1)")
    st = store.get()
    progress = run_progress(context, "games", cfg.generations * cfg.games)
    line = play_line(st, cfg, _last_checkpoint(context, cfg.name), on_game=progress.step, log=context.log.info)
    # This request's generations, those a killed run of it played included (play_line continues it).
    gens = line.history[-cfg.generations :]
    keys = [h["archive"] for h in gens]
    known = set(context.instance.get_dynamic_partitions(archives_partitions.name))
    if new := [k for k in keys if k not in known]:
        context.instance.add_dynamic_partitions(archives_partitions.name, new)
    seconds = sum(h["seconds"] for h in gens)
    games = sum(h["games"] for h in gens)
    png = selfplay_curve_png(line.history, f"{cfg.name}: td_{cfg.model} {cfg.learner}, lambda {cfg.lam}, lr {cfg.lr}")
    return dg.MaterializeResult(
        metadata={
            "checkpoint": dg.MetadataValue.path(str(line.checkpoints[-1])),
            "line": cfg.name,
            "generation": line.history[-1]["generation"],
            "archives": dg.MetadataValue.json(keys),
            "games": games,
            "games_per_second": round(games / seconds, 4) if seconds else 0.0,
            "positions_searched_per_second": round(sum(h["nodes"] for h in gens) / seconds, 1) if seconds else 0.0,
            "generations": dg.MetadataValue.md(_history_md(line.history)),
            "learning_curve": png_md(png, "self-play learning curve"),
            "history": dg.MetadataValue.json(line.history),
        }
    )


@dg.asset(
    group_name=GROUP,
    deps=[td_selfplay],
    description="The published checks of the checkpoint td_selfplay last recorded: 10 batches of 100 games "
    f"against the random mover within 80 plies (mean, 95% interval, peak; Hui {HUI_RANDOM}), a match "
    "against the traditional evaluation at equal depth; the games into match_games (elo_ratings rates "
    "them) and an Elo of this pool.",
)
def td_evaluation(context: dg.AssetExecutionContext, config: TDEvaluationConfig, store: StoreResource):
    from pipeline.play.evaluation import write_results
    from pipeline.play.matches import MatchResult, fit_elo, write_games
    from pipeline.store import storage
    from training.td.checkpoints import load_checkpoint
    from training.td.checks import vs_traditional, win_ratio_batches
    from training.td.play import GamePool, player_name

    ev = config.to_dataclass()
    ck = _last_checkpoint(context, ev.line)
    if ck is None or not storage.exists(ck):
        which = f"of the line {ev.line!r} " if ev.line else ""
        raise dg.Failure(
            f"td_selfplay has no checkpoint {which}: materialise it first (chess-pipeline selfplay --generations 1)"
        )
    params, cfg, meta = load_checkpoint(ck)
    if ev.eval_depth:
        cfg = dataclasses.replace(cfg, depth=ev.eval_depth)  # the player's name says the depth it searched
    name = player_name(cfg, meta["generation"])
    st = store.get()
    total = ev.batches * ev.batch_games + 2 * ev.openings
    progress = run_progress(context, "games", total)
    with GamePool(ev.workers) as pool:
        figures, random_games = win_ratio_batches(params, cfg, ev.batches, ev.batch_games, pool, progress.step, name)
        trad = (
            vs_traditional(params, cfg, ev.openings, ev.max_plies, pool, progress.step, name) if ev.openings else None
        )
    vs_random = MatchResult("td vs random", name, "random")
    vs_random.games = random_games
    matches = [vs_random] + ([trad] if trad else [])
    pgn, n = write_games(st, "td_evaluation", context.run.run_id, matches)
    finished = [(g.white, g.black, g.white_score) for m in matches for g in m.games if g.white_score is not None]
    elo = fit_elo(finished, "random") if any("random" in (w, b) for w, b, _ in finished) else None
    lo, hi = figures["interval"]
    rows = [
        (
            "random",
            "win_ratio_batches",
            figures["mean"],
            figures["batches"] * figures["games_per_batch"],
            f"95% interval {lo:.3f}-{hi:.3f}, peak {figures['peak']:.2f}; {PUBLISHED_RANDOM}",
        ),
    ]
    trad_line = ""
    if trad:
        pts, w, d, lost, u = trad.score(name)
        rows.append(
            (
                trad.b,
                "score",
                pts / len(trad.games),
                len(trad.games),
                f"{w} won, {d} drawn, {lost} lost, {u} unfinished",
            )
        )
        trad_line = f"{w} won, {d} drawn, {lost} lost, {u} unfinished of {len(trad.games)}"
    if elo:
        rows.append(("elo", "elo", elo.ratings[name], elo.games[name], f"+/-{elo.errors[name]:.0f}, random = 0"))
    write_results(st, "td_evaluation", context.run.run_id, [(name, *r) for r in rows])
    return dg.MaterializeResult(
        metadata={
            "checkpoint": dg.MetadataValue.path(str(ck)),
            "player": name,
            "win_ratio_mean": figures["mean"],
            "win_ratio_interval": dg.MetadataValue.json(figures["interval"]),
            "win_ratio_peak": figures["peak"],
            "batch_ratios": dg.MetadataValue.json(figures["ratios"]),
            "batch_games": figures["games_per_batch"],
            "published": PUBLISHED_RANDOM,
            "vs_traditional": trad_line,
            **({"elo": round(elo.ratings[name], 1), "elo_interval": round(elo.errors[name], 1)} if elo else {}),
            "pgn": dg.MetadataValue.path(str(pgn)),
            "games": n,
        }
    )


@dg.asset(
    group_name=GROUP,
    description="KRvK (Hui's check): TD-Leaf self-play on random king-and-rook-against-king positions, "
    "generation after generation, until the learned evaluation's search mates from a mate-in-3 position "
    "against a defender that sees every mate in its horizon; the number of generations it took.",
)
def td_krk(context: dg.AssetExecutionContext, config: KRKCheckConfig, store: StoreResource):
    from training.td.checks import KRK_FEN, krk_generations

    k = krk_check(config)
    cfg = k.td_config()
    progress = run_progress(context, "games", k.max_generations * k.td.games)  # a mate ends it sooner
    out = krk_generations(
        cfg,
        k.max_generations,
        check_depth=k.check_depth,
        mate_plies=k.mate_plies,
        defender_depth=k.defender_depth,
        lead_plies=k.lead_plies,
        on_generation=lambda g, p: context.log.info(
            f"KRvK generation {g}: mate in {p} plies"
            if p
            else f"KRvK generation {g}: no mate within {k.mate_plies} plies"
        ),
        on_game=progress.step,
    )
    return dg.MaterializeResult(
        metadata={
            "fen": KRK_FEN,
            "criterion": f"a mate within {k.mate_plies} plies, {k.check_depth}-ply search, "
            f"against a {k.defender_depth}-ply defender (the traditional evaluation)",
            "generations_to_mate": out["generations"] if out["generations"] is not None else -1,
            "lead_criterion": f"a mate within {k.lead_plies} plies, the same search and defender",
            "generations_to_lead": out["generations_to_lead"] if out["generations_to_lead"] is not None else -1,
            "clock_ends": k.td.clock_ends,
            "generations": dg.MetadataValue.md(krk_curve_md(out["curve"])),
            "curve": dg.MetadataValue.json(out["curve"]),
        }
    )


def krk_curve_md(curve: list[dict]) -> str:
    """td_krk's curve as a table: per generation the self-play games (results, the share ending
    in mate, TD error) and the check from the mate-in-3 position (its moves, mate or not)."""
    lines = [
        "| generation | self-play results | self-play mate rate | TD error | check: moves | check: mate |",
        "|---|---|---|---|---|---|",
    ]
    for c in curve:
        if "results" in c:
            played = f"{md_cell(json.dumps(c['results']))} | {c['mate_rate']:.0%} | {c['td_error']:.5f}"
        else:
            played = "(untrained) | | "
        mate = f"in {c['mate_plies']} plies" if c["mate_plies"] else "no"
        if c["mate_plies"] and not c.get("mate_in_3", True):
            mate += " (a lead, not the mate in 3)"
        lines.append(f"| {c['generation']} | {played} | {md_cell(c.get('moves', ''))} | {mate} |")
    return "\n".join(lines)


@dg.asset(
    group_name=GROUP,
    deps=["hui_checkmate"],
    description="Hui's representations (mailbox, piece list, compressed piece list, bitboard, antisymmetric "
    "bitboard) compared on hui_checkmate (who gets mated): the same small network, several seeds each, "
    "test accuracy mean and standard deviation.",
)
def hui_representations(context: dg.AssetExecutionContext, config: RepresentationsConfig, store: StoreResource):
    from training.td.study import compare_representations

    st = store.get()
    rows = compare_representations(st.root, config.to_dataclass(), log=context.log.info)
    head = "| representation | encoder | seeds | test accuracy mean | std |\n|---|---|---|---|---|\n"
    table = head + "\n".join(
        f"| {r['representation']} | {r['encoder']} | {r['seeds']} | {r['mean_accuracy']:.4f} "
        f"| {r['std_accuracy']:.4f} |"
        for r in rows
    )
    return dg.MaterializeResult(metadata={"table": dg.MetadataValue.md(table), "rows": dg.MetadataValue.json(rows)})


selfplay_assets = [td_selfplay, td_evaluation, td_krk, hui_representations]
