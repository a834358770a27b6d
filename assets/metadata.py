"""Helpers for asset metadata: images inline in Markdown, small tables."""

import base64

import dagster as dg


def png_md(png: bytes, alt: str) -> dg.MetadataValue:
    """A PNG shown inline in the Dagster UI (Markdown with a data URI)."""
    return dg.MetadataValue.md(f"![{alt}](data:image/png;base64,{base64.b64encode(png).decode()})")


def md_cell(text) -> str:
    """Text for a Markdown table cell: a '|' in it would end the cell, a '<' start an HTML tag."""
    return str(text).replace("|", "\\|").replace("<", "&lt;")


def md_table(header: tuple[str, str], rows: dict) -> dg.MetadataValue:
    lines = [f"| {md_cell(header[0])} | {md_cell(header[1])} |", "|---|---|"]
    lines += [f"| {md_cell(k)} | {md_cell(v)} |" for k, v in rows.items()] or ["| (none) | 0 |"]
    return dg.MetadataValue.md("\n".join(lines))
