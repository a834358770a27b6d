"""Text from the store is data, never markup: an archive whose tags carry script, event
handlers, style and SVG, ingested for real and shown in a real browser (chromium through
Playwright), runs nothing, adds no element and restyles nothing; the text shows literally."""

import pytest

from explorer.app import create_app
from pipeline.ingest.ingest import IngestConfig, ingest_archive
from pipeline.store import duck
from pipeline.store.store import Store
from tests.explorer.test_guard import serving
from tests.explorer.test_page import chromium  # noqa: F401  (the fixture)

HOSTILE = {
    "White": '<img src=x onerror="window.__pwned=1;alert(1)">',
    "Black": "<svg onload=alert(2)><circle r=9 /></svg><script>alert(3)</script>",
    "Date": "<style>body{background:red}</style>",
    "Event": '"><iframe src=javascript:alert(4)>',
    "Site": "<a href=javascript:alert(5)>x</a>",
}
MOVES = "1. e4 {<img src=y onerror=alert(6)>} e5 2. Nf3 Nc6 {<b>bold</b>} 3. Bb5 a6 1-0"


def hostile_pgn() -> str:
    """Three games with the hostile tags (double quotes inside a tag as single ones)."""
    tags = {"Round": "1", "Result": "1-0", "WhiteElo": "2500", "BlackElo": "2400", **HOSTILE}
    head = "".join(f'[{k} "{v.replace(chr(34), chr(39))}"]\n' for k, v in tags.items())
    return "\n".join(head + "\n" + MOVES + "\n" for _ in range(3))


@pytest.fixture(scope="module")
def hostile_store(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    pgn = root / "hostile.pgn"
    pgn.write_text(hostile_pgn())
    store = Store(root / "store").ensure()
    ingest_archive(store, store.add_archive(pgn), pgn, IngestConfig(workers=1))
    duck.create_views(store)
    with duck.memory_connection(store) as con:
        [(white, black, date, n)] = con.sql(
            "SELECT any_value(white), any_value(black), any_value(date), count(*) FROM games"
        ).fetchall()
    assert n == 3 and "<img" in white and "<svg" in black, (white, black, date)
    return store, white, black, date


def test_hostile_tags_show_as_text_and_run_nothing(chromium, hostile_store):  # noqa: F811
    from playwright.sync_api import sync_playwright

    store, white, black, date = hostile_store
    with serving(create_app(store)) as port, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        dialogs, errors = [], []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"http://127.0.0.1:{port}/")
        page.wait_for_function("() => document.querySelector('#games-count').dataset.games === '3'", timeout=15_000)
        page.wait_for_selector("#top-games li")
        page.locator("#top-games li a", has_text="open").first.click()
        page.wait_for_selector("#game-chart svg path[data-series='traditional']")
        page.wait_for_timeout(500)
        assert dialogs == []
        assert page.evaluate("() => window.__pwned") is None
        injected = "img, iframe, script:not([src]), style, a[href^='javascript'], svg circle"
        for where in ("#top-games", "#game-title", "#game-legend", "#explorer-moves", "#evals", "#moves"):
            assert page.locator(f"{where} :is({injected})").count() == 0, where
        assert page.locator("body style, body script:not([src])").count() == 0
        assert page.evaluate("() => getComputedStyle(document.body).backgroundColor") != "rgb(255, 0, 0)"
        listed = page.locator("#top-games li").first.inner_text()
        assert white in listed and black in listed and (date or "") in listed
        title = page.locator("#game-title").inner_text()
        assert white in title and black in title
        assert errors == []
        browser.close()
