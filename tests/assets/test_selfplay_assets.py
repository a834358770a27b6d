"""The self-play assets through Dagster: td_selfplay's lineage to td_evaluation and td_krk."""

import dagster as dg
import duckdb

from assets.resources import StoreResource
from assets.selfplay import KRKCheckConfig, TDEvaluationConfig, TDSelfPlayConfig, td_evaluation, td_krk, td_selfplay
from pipeline.store import duck
from pipeline.store.store import Store

TINY = dict(depth=1, games=2, max_plies=20, curve_games=2, curve_plies=16, workers=1)


def _run(instance, root, assets, selection, ops):
    return dg.materialize(
        assets,
        selection=selection,
        instance=instance,
        resources={"store": StoreResource(root=str(root))},
        run_config=dg.RunConfig(ops=ops),
    )


def test_evaluation_checks_the_line_it_names_from_its_last_checkpoint(tmp_path, instance):
    root = tmp_path / "store"
    a = _run(instance, root, [td_selfplay], None, {"td_selfplay": TDSelfPlayConfig(name="a", **TINY)})
    b = _run(instance, root, [td_selfplay], None, {"td_selfplay": TDSelfPlayConfig(name="b", seed=1, **TINY)})
    assert a.success and b.success
    ck_a = a.asset_materializations_for_node("td_selfplay")[0].metadata["checkpoint"].value
    ev = TDEvaluationConfig(line="a", batches=2, batch_games=2, openings=1, max_plies=40, workers=1)
    r = _run(instance, root, [td_selfplay, td_evaluation], ["td_evaluation"], {"td_evaluation": ev})
    assert r.success
    meta = r.asset_materializations_for_node("td_evaluation")[0].metadata
    assert meta["checkpoint"].value == ck_a  # line a's checkpoint, though b was materialised last
    assert meta["player"].value == "td_linear td_leaf gen 1 depth 1" and meta["games"].value == 6
    store = Store(root)
    duck.create_views(store)
    with duckdb.connect(str(store.duckdb_path), read_only=True) as con:
        matches = dict(con.sql("SELECT match, count(*) FROM match_games GROUP BY 1").fetchall())
    assert matches == {"td vs random": 4, "td depth 1 vs traditional": 2}
    # elo_ratings depends on td_evaluation (a new evaluation makes it stale) and rates its player.
    from assets.evaluation import elo_ratings

    assert dg.AssetKey("td_evaluation") in elo_ratings.asset_deps[elo_ratings.key]
    elo = _run(instance, root, [td_selfplay, td_evaluation, elo_ratings], ["elo_ratings"], {})
    table = elo.asset_materializations_for_node("elo_ratings")[0].metadata["ratings"].value
    assert "| td_linear td_leaf gen 1 depth 1 |" in table and "| random |" in table
    # The same checkpoint evaluated at another depth than it was trained at (eval_depth).
    deeper = TDEvaluationConfig(line="a", batches=1, batch_games=1, eval_depth=2, openings=0, workers=1)
    r2 = _run(instance, root, [td_selfplay, td_evaluation], ["td_evaluation"], {"td_evaluation": deeper})
    assert r2.asset_materializations_for_node("td_evaluation")[0].metadata["player"].value == (
        "td_linear td_leaf gen 1 depth 2"
    )
    missing = TDEvaluationConfig(line="nope", batches=1, batch_games=1, openings=0, workers=1)
    failed = dg.materialize(
        [td_selfplay, td_evaluation],
        selection=["td_evaluation"],
        instance=instance,
        resources={"store": StoreResource(root=str(root))},
        run_config=dg.RunConfig(ops={"td_evaluation": missing}),
        raise_on_error=False,
    )
    assert not failed.success


def test_krk_check_records_its_curve(tmp_path, instance):
    cfg = KRKCheckConfig(max_generations=1, games=2, depth=1, workers=1, lead_plies=9)
    r = _run(instance, tmp_path / "store", [td_krk], None, {"td_krk": cfg})
    meta = r.asset_materializations_for_node("td_krk")[0].metadata
    curve = meta["curve"].value
    assert [c["generation"] for c in curve][0] == 0 and meta["generations_to_mate"].value in (-1, 0, 1)
    lead = meta["generations_to_lead"].value  # a mate within 9 plies: never later than the mate in 3
    mated = [c["generation"] for c in curve if c["mate_plies"]]
    assert lead == (mated[0] if mated else -1)
    strict = meta["generations_to_mate"].value
    assert strict == -1 or 0 <= lead <= strict  # a mate in 3 is a mate within 9 plies
    assert meta["clock_ends"].value == "unfinished"  # a fifty-move end teaches no draw (krk_selfplay)
    assert all(c["moves"].startswith("1. ") for c in curve)  # the check's game from the position
    for c in curve[1:]:  # a generation played: its self-play games and the share that ended in mate
        assert sum(c["results"].values()) == 2 and c["mate_rate"] == c["results"].get("1-0", 0) / 2
    assert meta["generations"].value.startswith("| generation | self-play results | self-play mate rate |")
