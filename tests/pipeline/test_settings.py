"""pipeline.settings: the dataclass is the schema; docs, CLI flags and the dataclass built back
from parsed flags all come from it (fast tier: no engine, no shared data)."""

from __future__ import annotations

import argparse
import enum
from dataclasses import dataclass, field, make_dataclass
from typing import Literal

import pytest

from pipeline.settings import add_arguments, field_docs, from_namespace


@dataclass
class Base:
    """A class docstring, not a field's."""

    workers: int = 0
    """Worker processes;
        0 means one per core."""
    pov: Literal["white", "side_to_move"] = "white"
    """Whose point of view the score takes."""
    undocumented: str = "x"
    hidden: tuple[int, ...] = ()
    """Hidden widths (empty keeps the preset's)."""


class Speed(enum.Enum):
    SLOW = "slow"
    FAST = "fast"


@dataclass
class Child(Base):
    rate: float = 0.5
    """Learning rate, 50% of the usual."""
    amp: bool = True
    """bfloat16 autocast."""
    pov: Literal["white", "side_to_move"] = "side_to_move"
    depth: int | None = None
    """Search depth; none: the engine's default."""
    names: list[str] = field(default_factory=lambda: ["a", "b"])
    """Some names."""
    speed: Speed = Speed.FAST
    """How fast."""


def parser_for(cls, **kwargs) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="t", exit_on_error=False)
    add_arguments(ap, cls, **kwargs)
    return ap


def test_field_docs_collapse_whitespace_and_skip_undocumented_fields():
    assert field_docs(Base) == {
        "workers": "Worker processes; 0 means one per core.",
        "pov": "Whose point of view the score takes.",
        "hidden": "Hidden widths (empty keeps the preset's).",
    }


def test_inherited_fields_keep_their_docs_and_a_redeclared_field_keeps_its_base_doc():
    docs = field_docs(Child)
    assert docs["workers"] == "Worker processes; 0 means one per core."
    assert docs["rate"] == "Learning rate, 50% of the usual."
    # Child redeclares pov (a new default) without a docstring: the base's still describes it.
    assert docs["pov"] == "Whose point of view the score takes."
    assert list(docs) == ["workers", "pov", "hidden", "rate", "amp", "depth", "names", "speed"]


def test_a_missing_docstring_is_an_error_only_when_required():
    assert "undocumented" not in field_docs(Base)
    with pytest.raises(ValueError, match=r"Base: no docstring under field\(s\) undocumented"):
        field_docs(Base, require=True)


def test_a_class_without_source_has_no_docs_but_still_its_flags():
    made = make_dataclass("Made", [("n", int, 3)])
    assert field_docs(made) == {}
    assert from_namespace(made, parser_for(made).parse_args(["--n", "4"])).n == 4


def test_flags_defaults_and_parsed_values():
    ap = parser_for(Child)
    flags = {a.dest: a.option_strings for a in ap._actions if a.dest != "help"}
    assert flags["workers"] == ["--workers"]
    assert flags["amp"] == ["--amp", "--no-amp"]
    cfg = from_namespace(Child, ap.parse_args([]))
    assert cfg == Child()  # every default is the dataclass's
    cfg = from_namespace(
        Child,
        ap.parse_args(["--workers", "3", "--rate", "0.25", "--no-amp", "--hidden", "64", "32", "--depth", "8"]),
    )
    assert (cfg.workers, cfg.rate, cfg.amp, cfg.hidden, cfg.depth) == (3, 0.25, False, (64, 32), 8)
    assert isinstance(cfg.hidden, tuple)


def test_bool_flags_both_ways():
    ap = parser_for(Child, names=["amp"])
    assert ap.parse_args([]).amp is True
    assert ap.parse_args(["--no-amp"]).amp is False
    assert ap.parse_args(["--no-amp", "--amp"]).amp is True


def test_tuples_and_lists_take_zero_or_more_values():
    ap = parser_for(Child, names=["hidden", "names"])
    assert from_namespace(Child, ap.parse_args(["--hidden"]), names=["hidden", "names"]).hidden == ()
    cfg = from_namespace(Child, ap.parse_args(["--hidden", "1", "2", "3", "--names", "x"]), names=["hidden", "names"])
    assert cfg.hidden == (1, 2, 3) and cfg.names == ["x"]
    assert from_namespace(Child, ap.parse_args([])).names == ["a", "b"]
    with pytest.raises(argparse.ArgumentError, match="invalid int value: 'wide'"):
        ap.parse_args(["--hidden", "wide"])


def test_literal_gives_choices_and_a_misspelled_choice_names_the_valid_values():
    ap = parser_for(Child, names=["pov"])
    assert from_namespace(Child, ap.parse_args(["--pov", "white"])).pov == "white"
    assert from_namespace(Child, ap.parse_args([])).pov == "side_to_move"  # the subclass's default
    with pytest.raises(argparse.ArgumentError, match=r"invalid choice: 'whte' \(choose from 'white', 'side_to_move'\)"):
        ap.parse_args(["--pov", "whte"])


def test_an_enum_field_offers_its_values_and_comes_back_as_the_member():
    ap = parser_for(Child, names=["speed"])
    assert from_namespace(Child, ap.parse_args(["--speed", "slow"])).speed is Speed.SLOW
    assert from_namespace(Child, ap.parse_args([])).speed is Speed.FAST
    with pytest.raises(argparse.ArgumentError, match=r"choose from 'slow', 'fast'"):
        ap.parse_args(["--speed", "medium"])


def test_help_is_the_docstring_plus_the_default():
    ap = parser_for(Child)
    help_of = {a.dest: a.help for a in ap._actions}
    assert help_of["workers"] == "Worker processes; 0 means one per core. (default 0)"
    assert help_of["undocumented"] == "(default x)"
    assert help_of["amp"] == "bfloat16 autocast. (default on)"
    assert help_of["hidden"] == "Hidden widths (empty keeps the preset's). (default none)"
    text = ap.format_help()  # a % in a docstring is not an argparse format
    assert "Learning rate, 50% of the usual. (default 0.5)" in " ".join(text.split())


def test_names_exclude_defaults_and_prefix():
    ap = argparse.ArgumentParser(exit_on_error=False)
    add_arguments(ap, Base, ["pov", "workers"], defaults={"workers": 2})
    add_arguments(ap, Child, exclude=["undocumented", "hidden", "names", "speed"], flag_prefix="child-")
    assert [a.option_strings[0] for a in ap._actions[1:3]] == ["--pov", "--workers"]  # in the order asked
    ns = ap.parse_args(["--child-workers", "5", "--pov", "side_to_move"])
    base = from_namespace(Base, ns, ["pov", "workers"])
    assert (base.pov, base.workers) == ("side_to_move", 2)
    child = from_namespace(Child, ns, flag_prefix="child-", rate=0.1)
    assert (child.workers, child.pov, child.rate, child.hidden) == (5, "side_to_move", 0.1, ())
    assert "--child-hidden" not in ap.format_help() and "--undocumented" not in ap.format_help()


def test_from_namespace_only_takes_the_fields_that_were_added():
    ap = parser_for(Base, names=["workers"])
    ap.add_argument("--other")  # not a field: ignored
    assert from_namespace(Base, ap.parse_args(["--workers", "4", "--other", "o"])) == Base(workers=4)
    with pytest.raises(ValueError, match="--hidden was not added"):
        from_namespace(Base, argparse.Namespace(workers=4), names=["workers", "hidden"])


def test_mistakes_in_the_call_are_named():
    with pytest.raises(ValueError, match=r"Base has no field\(s\) wokers"):
        add_arguments(argparse.ArgumentParser(), Base, exclude=["wokers"])
    with pytest.raises(ValueError, match="defaults for field.*hidden"):
        add_arguments(argparse.ArgumentParser(), Base, ["workers"], defaults={"hidden": (1,)})
    with pytest.raises(ValueError, match=r"has no field\(s\) colour"):
        from_namespace(Base, argparse.Namespace(), colour="red")
    with pytest.raises(TypeError, match="is not a dataclass"):
        field_docs(int)

    @dataclass
    class Nested:
        inner: Base = field(default_factory=Base)
        """Not a flag."""

    with pytest.raises(TypeError, match=r"Nested.inner: no CLI flag for a field of type"):
        add_arguments(argparse.ArgumentParser(), Nested)
    add_arguments(argparse.ArgumentParser(), Nested, exclude=["inner"])  # fine once excluded


def test_a_field_without_a_default_is_a_required_flag():
    @dataclass
    class Needs:
        path: str
        """Where."""

    ap = parser_for(Needs)
    assert ap._actions[1].help == "Where. (required)"
    assert parser_for(Needs, defaults={"path": ""})._actions[1].help == 'Where. (default "")'
    with pytest.raises(SystemExit):  # argparse exits on a missing required flag
        ap.parse_args([])
    assert from_namespace(Needs, ap.parse_args(["--path", "/x"])).path == "/x"


def test_choices_name_a_registry_for_a_str_field():
    ap = parser_for(Base, names=["undocumented"], choices={"undocumented": {"x": 1, "y": 2}})
    assert from_namespace(Base, ap.parse_args(["--undocumented", "y"])).undocumented == "y"
    with pytest.raises(argparse.ArgumentError, match=r"invalid choice: 'z' \(choose from 'x', 'y'\)"):
        ap.parse_args(["--undocumented", "z"])
    with pytest.raises(ValueError, match="choices for field.*pov"):
        add_arguments(argparse.ArgumentParser(), Base, ["workers"], choices={"pov": ("white",)})


def test_the_training_cli_is_train_config_with_its_docstrings(capsys):
    """python -m training.train's flags: one per TrainConfig field, each with its docstring and default."""
    import dataclasses

    from training.train import TrainConfig, main

    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    for f in dataclasses.fields(TrainConfig):
        assert "--" + f.name.replace("_", "-") in text
    assert "--epochs EPOCHS Most epochs; early stopping may end sooner. (default 20)" in text
    assert "--amp, --no-amp bfloat16 autocast on CUDA. (default on)" in text
