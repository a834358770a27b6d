"""What the Dagster UI shows as text: every config field described, no description eaten as HTML.

The UI renders descriptions as Markdown with HTML passed through, so `datasets/x/<split>.parquet`
showed as `datasets/x/.parquet`. A `<` that opens a tag (a letter, `/`, `!` or `?` after it)
outside a backtick code span is what gets swallowed.
"""

import re

import dagster as dg
import pytest

from assets.definitions import build_defs

TAG = re.compile(r"<[A-Za-z/!?]")
CODE_SPAN = re.compile(r"`[^`]*`")


def raw_tags(text: str) -> list[str]:
    """The `<...` openings of text that a Markdown renderer would take for HTML tags."""
    return TAG.findall(CODE_SPAN.sub("", text or ""))


@pytest.mark.parametrize(
    "text,tags",
    [
        ("files datasets/x/<split>.parquet", ["<s"]),
        ("`<home>/suites`", []),
        ("|cp| < 30000", []),
        ("under `labels/<engine>_<limit>/`, then <b>bold</b>", ["<b", "</"]),
        ("a &lt;split&gt;", []),
    ],
)
def test_raw_tags_finds_what_a_markdown_renderer_would_swallow(text, tags):
    assert raw_tags(text) == tags


@pytest.fixture(scope="module")
def defs() -> dg.Definitions:
    return build_defs({})


def _fields(config_type, prefix=""):
    """(dotted name, field) of every field of a config type, nested shapes included."""
    for name, field in (getattr(config_type, "fields", None) or {}).items():
        yield prefix + name, field
        yield from _fields(field.config_type, f"{prefix}{name}.")


def config_fields(defs: dg.Definitions):
    """(where, field name, description) of every run-config field of every asset op and resource."""
    seen = set()
    for ad in defs.resolve_asset_graph().assets_defs:
        if not ad.is_executable or ad.node_def.name in seen:
            continue
        seen.add(ad.node_def.name)
        schema = ad.node_def.config_schema
        if schema is not None and schema.config_type is not None:
            for name, field in _fields(schema.config_type):
                yield f"asset op {ad.node_def.name}", name, field.description
    for key, resource in defs.resources.items():
        schema = resource.get_resource_definition().config_schema
        for name, field in _fields(schema.config_type):
            yield f"resource {key} ({type(resource).__name__})", name, field.description


def test_every_config_and_resource_field_has_a_description(defs):
    fields = list(config_fields(defs))
    # Labels, datasets, training, evaluation, ingest; the store and Stockfish resources.
    where = {w.split(" (")[0] for w, _, _ in fields}
    assert {
        "asset op labels",
        "asset op sabatelli_3class",
        "asset op mlp_bitmap_3class",
        "asset op eval_suites_mlp_bitmap_3class",
        "asset op eval_matches_mlp_bitmap_3class",
        "asset op eval_head_to_head",
        "asset op archive_tables",
        "resource store",
        "resource stockfish",
    } <= where
    missing = sorted({n for _, n, d in fields if not (d or "").strip()})
    assert not missing, f"config fields with no description (in {len(fields)} op and resource fields): {missing}"


def texts(defs: dg.Definitions):
    """(what, text) of every description and Markdown metadata the Definitions carry."""
    graph = defs.resolve_asset_graph()
    for ad in graph.assets_defs:
        for key, spec in ad.specs_by_key.items():
            yield f"asset {key.to_user_string()}", spec.description
            for k, v in (spec.metadata or {}).items():
                if isinstance(v, dg.MarkdownMetadataValue):
                    yield f"asset {key.to_user_string()} metadata {k}", v.md_str
        for spec in ad.check_specs:
            yield f"check {spec.key.name} of {spec.asset_key.to_user_string()}", spec.description
    for job in defs.resolve_all_job_defs():
        yield f"job {job.name}", job.description
    for sensor in defs.sensors or []:
        yield f"sensor {sensor.name}", sensor.description
    for schedule in defs.schedules or []:
        yield f"schedule {schedule.name}", schedule.description
    for where, name, description in config_fields(defs):
        yield f"{where} field {name}", description


def test_no_description_has_text_the_ui_would_take_for_an_html_tag(defs):
    found = list(texts(defs))
    assert sum(1 for w, _ in found if w == "asset sabatelli_3class") == 1  # the walk reaches them
    bad = {w: t for w, t in found if raw_tags(t)}
    assert not bad, f"raw <...> outside backticks: {bad}"


def test_table_cells_from_data_cannot_open_a_tag_or_end_a_cell():
    from assets.metadata import md_table

    text = md_table(("reason", "games"), {"illegal move <e9> in a|b": 3}).value
    row = text.splitlines()[2]
    assert "<e9>" not in row and "&lt;e9>" in row
    assert row.count(" | ") == 1  # the escaped '|' does not start a third cell
