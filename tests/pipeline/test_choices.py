"""The library's string choices are typed and refused when misspelled, with the valid values in
the message: a dataset's pov and target_kind, the split, the label limit kind and the
re-labelling order. The SQL that branches on pov / target_kind raises on an unknown value even
when it is reached without the Python check, and even over a store with no rows."""

from typing import get_args

import duckdb
import pytest

from pipeline.datasets.datasets import (
    DATASETS,
    Pov,
    SplitBy,
    SplitConfig,
    TargetKind,
    _sql,
    build_dataset,
    dataset_values,
    sql_params,
)
from pipeline.labels.setting import ORDERS, LabelRun, Order
from pipeline.labels.uci import LIMIT_KINDS, Limit, LimitKind
from pipeline.store.duck import memory_connection
from pipeline.store.store import Store
from tests.fixtures_pgn import RATED_GAMES
from tests.stores import add_pgn

SABATELLI = [n for n, s in DATASETS.items() if "pov" in s.defaults]


def _listed(message: str, values) -> bool:
    return all(v in message for v in values)


def test_the_choice_types_hold_the_values_the_code_and_sql_branch_on():
    assert get_args(Pov) == ("side_to_move", "white")
    assert get_args(TargetKind) == ("linear", "win_prob")
    assert get_args(SplitBy) == ("game", "position")
    assert get_args(LimitKind) == LIMIT_KINDS == ("depth", "nodes", "static")
    assert get_args(Order) == ORDERS == ("first_seen", "oldest", "most_used")
    for name in SABATELLI:  # the defaults are valid choices
        assert DATASETS[name].defaults["pov"] in get_args(Pov)
    assert DATASETS["sabatelli_regression"].defaults["target_kind"] in get_args(TargetKind)


@pytest.mark.parametrize(
    "name,param,bad,valid",
    [
        *((n, "pov", "whtie", get_args(Pov)) for n in SABATELLI),
        ("sabatelli_regression", "target_kind", "winprob", get_args(TargetKind)),
    ],
)
def test_dataset_values_refuse_a_misspelled_choice_naming_the_valid_values(name, param, bad, valid):
    with pytest.raises(ValueError) as e:
        dataset_values(name, {param: bad})
    assert bad in str(e.value) and param in str(e.value) and _listed(str(e.value), valid)
    for v in valid:
        assert dataset_values(name, {param: v})[param] == v


def test_build_dataset_refuses_a_misspelled_choice_before_reading_the_store(tmp_path):
    store = Store(tmp_path / "store")
    with pytest.raises(ValueError, match="pov must be one of side_to_move, white; got 'blakc'"):
        build_dataset(store, "sabatelli_3class", {"pov": "blakc"})
    assert not (tmp_path / "store").exists()


def test_other_library_choices_name_their_valid_values():
    with pytest.raises(ValueError) as e:
        SplitConfig(by="gmae")
    assert "gmae" in str(e.value) and _listed(str(e.value), get_args(SplitBy))
    with pytest.raises(ValueError) as e:
        Limit("dpeth", 8)
    assert "dpeth" in str(e.value) and _listed(str(e.value), LIMIT_KINDS)
    with pytest.raises(ValueError) as e:
        LabelRun(order="olds")
    assert "olds" in str(e.value) and _listed(str(e.value), ORDERS)


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """An empty store and one holding four rated games (no labels: the SQL needs none)."""
    folder = tmp_path_factory.mktemp("choices")
    games = Store(folder / "games").ensure()
    add_pgn(games, folder, "games.pgn", RATED_GAMES)
    return {"empty": Store(folder / "empty").ensure(), "games": games}


@pytest.mark.parametrize("which", ["empty", "games"])
def test_the_sabatelli_macro_raises_on_an_unknown_pov(stores, which):
    with memory_connection(stores[which]) as con:
        for pov in get_args(Pov):  # the valid ones run
            con.execute("SELECT count(*) FROM sabatelli_positions(0, 'depth', 8, '', ?)", [pov]).fetchall()
        for query in (
            "SELECT * FROM sabatelli_positions(0, 'depth', 8, '', ?)",
            "SELECT count(*) FROM sabatelli_positions(0, 'depth', 8, '', ?)",
            "SELECT game_id FROM sabatelli_positions(0, 'depth', 8, '', ?)",
        ):
            with pytest.raises(
                duckdb.InvalidInputException, match="pov must be one of side_to_move, white; got 'whtie'"
            ):
                con.execute(query, ["whtie"]).fetchall()


@pytest.mark.parametrize("which", ["empty", "games"])
@pytest.mark.parametrize("name", SABATELLI)
def test_every_sabatelli_sql_raises_on_an_unknown_choice_bound_past_python(stores, which, name):
    sql = _sql(name)
    values = {**DATASETS[name].defaults, "min_elo": 0}
    with memory_connection(stores[which]) as con:
        rows = con.execute(f"SELECT count(*) FROM ({sql})", sql_params(sql, values)).fetchall()[0][0]
        assert (rows > 0) == (which == "games")
        with pytest.raises(duckdb.InvalidInputException, match="pov must be one of"):
            con.execute(f"SELECT count(*) FROM ({sql})", sql_params(sql, {**values, "pov": "whtie"})).fetchall()
        if "target_kind" in values:
            for kind in get_args(TargetKind):
                con.execute(f"SELECT * FROM ({sql})", sql_params(sql, {**values, "target_kind": kind})).fetchall()
            for query in (f"SELECT * FROM ({sql})", f"SELECT count(*) FROM ({sql})"):
                with pytest.raises(
                    duckdb.InvalidInputException, match="target_kind must be one of linear, win_prob; got 'winprob'"
                ):
                    con.execute(query, sql_params(sql, {**values, "target_kind": "winprob"})).fetchall()
