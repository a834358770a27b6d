"""The README is the front door and docs/ holds the rest: the README stays short, every link in
both resolves (file and anchor), the README's command table is the CLI's parser (every
subcommand, nothing else), the make targets it names exist, every page of docs/ is in
mkdocs.yml's nav, and the site builds with `mkdocs build --strict`."""

import argparse
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MAX_README_LINES = 200


def _pages() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def _prose(text: str) -> str:
    """The text outside fenced code blocks and inline code spans (links there are examples)."""
    out, fence = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fence = not fence
            continue
        if not fence:
            out.append(re.sub(r"`[^`]*`", "", line))
    return "\n".join(out)


def _slug(heading: str) -> str:
    """The anchor of a heading, as Python-Markdown's toc (mkdocs) and GitHub make it."""
    text = re.sub(r"[`*_]", "", heading)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def _anchors(page: Path) -> set[str]:
    heads, fence = set(), False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            fence = not fence
        elif not fence and (m := re.match(r"^#{1,6} (.+?)\s*#*\s*$", line)):
            heads.add(_slug(m.group(1)))
    return heads


LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def link_problems(pages: list[Path]) -> list[str]:
    """Every relative link's file exists, and its #anchor is a heading of that file."""
    problems = []
    for page in pages:
        for target in LINK.findall(_prose(page.read_text(encoding="utf-8"))):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            where = f"{page.relative_to(ROOT)}: {target}"
            if not dest.is_file():
                problems.append(f"{where}: no file {dest}")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                problems.append(f"{where}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    return problems


def cli_commands() -> set[str]:
    """The subcommands the parser of cli defines."""
    from cli.app import build_parser

    subs = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    assert len(subs) == 1
    return set(subs[0].choices)


def readme_command_table(text: str) -> list[str]:
    """The first word of each row of the README's command table: the table whose header starts
    `| command |`, up to its end."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| command |"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append(re.match(r"\| `([\w-]+)", line).group(1))
    return rows


def make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return {m.group(1) for m in re.finditer(r"^([A-Za-z0-9_.-]+)\s*:(?!=)", text, re.M)}


def readme_make_targets(text: str) -> set[str]:
    """`make X` in inline code, and lines of code blocks starting with make."""
    named = set(re.findall(r"`make ([\w-]+)", text))
    named |= set(re.findall(r"^make ([\w-]+)", text, re.M))
    return named


def nav_pages(nav) -> list[str]:
    out = []
    for item in nav:
        values = item.values() if isinstance(item, dict) else [item]
        for v in values:
            out += nav_pages(v) if isinstance(v, list) else [v]
    return out


def test_the_readme_is_at_most_200_lines_and_keeps_the_two_commands():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= MAX_README_LINES, f"README.md has {len(text.splitlines())} lines"
    block = re.search(r"```sh\n(.*?)```", text, re.S).group(1)
    assert re.search(r"^make demo\b", block, re.M) and re.search(r"^make test\b", block, re.M), block


def test_every_relative_link_of_the_readme_and_the_docs_resolves():
    pages = _pages()
    assert len(pages) > 10
    assert link_problems(pages) == []


def test_the_readme_command_table_is_the_cli_parser():
    table = readme_command_table(README.read_text(encoding="utf-8"))
    commands = cli_commands()
    assert len(table) == len(set(table)), f"a command twice in the table: {table}"
    assert commands - set(table) == set(), "subcommands missing from the README's command table"
    assert set(table) - commands == set(), "commands in the README's table that the CLI does not define"


def test_every_make_target_the_readme_names_exists():
    named = readme_make_targets(README.read_text(encoding="utf-8"))
    assert {"demo", "test", "docs"} <= named
    assert named - make_targets() == set(), "make targets named in README.md but not in the Makefile"


def test_every_docs_page_is_in_the_mkdocs_nav_and_every_nav_entry_is_a_page():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    nav = nav_pages(config["nav"])
    pages = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert len(nav) == len(set(nav)), nav
    assert sorted(nav) == pages


def test_the_site_builds_strictly(tmp_path):
    """mkdocs with --strict: a broken link or anchor, or a page outside the nav, fails the build."""
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    site = tmp_path / "site"
    built = {p.relative_to(site).with_suffix(".md").as_posix() for p in site.rglob("*.html")}
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    # every source page is built, and no page exists only in the site (404 is mkdocs' own)
    assert pages <= built and built - pages == {"404.md"}, built ^ pages
