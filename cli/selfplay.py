"""`chess-pipeline selfplay --generations N`: TD self-play generations (asset td_selfplay), their
archives ingested at once; `--evaluate` then runs the published checks (td_evaluation), `--krk`
the KRvK check (td_krk: generations of KRvK self-play until the search mates from the mate in 3).

Each setting has one flag, derived from its dataclass (pipeline/settings.py): TDConfig's fields
set the self-play of the line and, with --krk, the self-play of the KRvK check too (KRKCheck holds
a TDConfig); a TDConfig flag left out takes the line's default for the line and the check's
(krk_selfplay) for the check. The check's own settings are --krk-* (KRKCheck's other fields)."""

import argparse
import dataclasses

from cli.progress import run_bar
from cli.runtime import materializations, materialize, open_instance, open_store, require_success
from pipeline.settings import add_arguments, from_namespace
from pipeline.store import duck
from training.td.config import KRK_TD_UNUSED, KRKCheck, TDConfig, TDEvaluation, krk_selfplay


def settings(args: argparse.Namespace) -> tuple[TDConfig, KRKCheck | None]:
    """The line's settings and, with --krk, the KRvK check's: the TDConfig flags given set both
    self-plays, each taking its own defaults (TDConfig's, krk_selfplay's) for the flags left out."""
    given = {n: getattr(args, n) for n in TD_FIELDS if getattr(args, n) is not None}  # None: left out
    cfg = from_namespace(TDConfig, given)
    if not args.krk:
        return cfg, None
    td = from_namespace(TDConfig, {**dataclasses.asdict(krk_selfplay()), **given})
    return cfg, from_namespace(KRKCheck, args, names=CHECK_FIELDS, flag_prefix=KRK_PREFIX, td=td)


def cmd_selfplay(args: argparse.Namespace) -> None:
    try:
        cfg, check = settings(args)
        if args.evaluate:  # its settings checked before any game is played
            from_namespace(TDEvaluation, args, names=EVALUATION_FIELDS)
    except ValueError as e:
        raise SystemExit(f"chess-pipeline selfplay: {e}") from None
    if not args.krk:  # the KRvK check's settings would be ignored
        defaults = {f.name: f.default for f in dataclasses.fields(KRKCheck)}
        given = [n for n in CHECK_FIELDS if getattr(args, KRK_PREFIX + n) != defaults[n]]
        if given:
            flags = ", ".join("--" + (KRK_PREFIX + n).replace("_", "-") for n in given)
            raise SystemExit(f"chess-pipeline selfplay: {flags} {'needs' if len(given) == 1 else 'need'} --krk")
    if cfg.generations == 0 and not args.evaluate and not args.krk:
        raise SystemExit(
            "chess-pipeline selfplay: --generations 0 plays nothing: add --evaluate or --krk, or play 1 or more"
        )
    store = open_store(args.home)
    instance = open_instance(store)
    if cfg.generations:
        play(store, instance, cfg)
    if args.evaluate:
        evaluate(store, instance, args, cfg)
    if check is not None:
        krk(store, instance, check)
    duck.create_views(store)


def run_asset(store, instance, assets: list, name: str, config, bar: str, what: str) -> dict:
    """Materialise asset `name` (of `assets`, the others its inputs) with its run config under a
    progress bar labelled `bar`; its metadata, or one line saying `what` failed."""
    with run_bar(store, "selfplay", bar, "game") as tags:
        result = materialize(assets, store, instance, selection=[name], ops={name: config}, tags=tags)
    require_success(result, what)
    return materializations(result)[name]


def play(store, instance, cfg: TDConfig) -> None:
    """td_selfplay's generations, then their archives ingested."""
    from assets.selfplay import TDSelfPlayConfig, td_selfplay
    from cli.ingest import ingest_archives, print_summary, report

    config = TDSelfPlayConfig(**dataclasses.asdict(cfg))
    meta = run_asset(store, instance, [td_selfplay], "td_selfplay", config, "self-play", "self-play")
    keys = list(meta["archives"].value)
    print(meta["generations"].value)
    print(
        f"{meta['games'].value} games, {meta['games_per_second'].value} games/s, "
        f"{meta['positions_searched_per_second'].value:,} positions searched/s; checkpoint {meta['checkpoint'].value}"
    )
    report(ingest_archives(store, instance, keys, on_done=print_summary))


def evaluate(store, instance, args: argparse.Namespace, cfg: TDConfig) -> None:
    """td_evaluation of the checkpoint td_selfplay last recorded for the line cfg.name."""
    from assets.selfplay import TDEvaluationConfig, td_evaluation, td_selfplay

    ev = from_namespace(TDEvaluation, args, names=EVALUATION_FIELDS, line=cfg.name, workers=cfg.workers)
    config = TDEvaluationConfig(**dataclasses.asdict(ev))
    m = run_asset(
        store, instance, [td_selfplay, td_evaluation], "td_evaluation", config, "evaluate", "the self-play evaluation"
    )
    lo, hi = m["win_ratio_interval"].value
    print(
        f"{m['player'].value}: {m['win_ratio_mean'].value:.1%} won against random (95% {lo:.1%}-{hi:.1%}, "
        f"peak {m['win_ratio_peak'].value:.0%}; {m['published'].value}); vs traditional: "
        f"{m['vs_traditional'].value or 'not played'}; "
        + (f"Elo {m['elo'].value:.0f} (random = 0)" if "elo" in m else "no Elo: the random mover finished no game")
    )


def krk(store, instance, check: KRKCheck) -> None:
    """td_krk: KRvK self-play generations until the learned evaluation mates from the mate in 3."""
    from assets.selfplay import krk_check_config, td_krk

    config = krk_check_config(check)
    m = run_asset(store, instance, [td_krk], "td_krk", config, "KRvK", "the KRvK check")
    print(m["generations"].value)
    n = m["generations_to_mate"].value
    lead = m["generations_to_lead"].value
    print(
        f"KRvK ({m['fen'].value}; {m['criterion'].value}): "
        + (f"mates after {n} generation(s)" if n >= 0 else f"no mate within {check.max_generations} generations")
        + f"; {m['lead_criterion'].value}: "
        + (f"after {lead} generation(s)" if lead >= 0 else "none")
    )


KRK_PREFIX = "krk_"
"""The KRvK check's own flags: --krk-max-generations, --krk-mate-plies, ... (KRKCheck's fields
but its self-play, which the TDConfig flags set)."""
TD_FIELDS = [f.name for f in dataclasses.fields(TDConfig)]
CHECK_FIELDS = [f.name for f in dataclasses.fields(KRKCheck) if f.name != "td"]
EVALUATION_FIELDS = ["batches", "batch_games", "eval_depth", "openings"]
"""TDEvaluation's flags (its line and workers are the line's: --name, --workers)."""


def _krk_defaults() -> str:
    """The KRvK check's self-play defaults where they differ from the line's."""
    line, check = dataclasses.asdict(TDConfig()), dataclasses.asdict(krk_selfplay())
    return ", ".join(
        f"--{n.replace('_', '-')} {v}" for n, v in check.items() if v != line[n] and n not in KRK_TD_UNUSED
    )


def add_parser(sub) -> None:
    s = sub.add_parser("selfplay", help="learn an evaluation by TD self-play (Hui 2018); games go into the store")
    add_arguments(s, TDConfig)
    s.set_defaults(**dict.fromkeys(TD_FIELDS))  # None: left out, the line's or the check's default
    s.add_argument("--evaluate", action="store_true", help="then the published checks of the last checkpoint")
    add_arguments(s, TDEvaluation, names=EVALUATION_FIELDS)
    s.add_argument(
        "--krk",
        action="store_true",
        help="then the KRvK check (asset td_krk): self-play on random KRvK positions until the learned "
        "evaluation's search mates from the mate in 3; settings --krk-*, its self-play the flags above "
        f"(left out: {_krk_defaults()}, the others as above)",
    )
    add_arguments(s.add_argument_group("the KRvK check (--krk)"), KRKCheck, CHECK_FIELDS, flag_prefix=KRK_PREFIX)
    s.set_defaults(func=cmd_selfplay)
