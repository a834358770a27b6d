"""The README's screenshots of the explorer page (docs/explorer-*.png), taken with Debian's
chromium through Playwright from a server over a real store.

    .venv/bin/python scripts/explorer_screenshots.py --home /tmp/xstore [--out docs]

Views: the start position with the store's explorer and the piece values; a position after a
drag with a live Stockfish search; a stored game with its evaluation chart; free set-up.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    import uvicorn
    from playwright.sync_api import sync_playwright

    from explorer.app import create_app
    from pipeline.store.store import Store

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", required=True)
    ap.add_argument("--out", default=str(ROOT / "docs"))
    ap.add_argument("--port", type=int, default=8765)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    srv = uvicorn.Server(
        uvicorn.Config(
            create_app(Store(Path(args.home).resolve())), host="127.0.0.1", port=args.port, log_level="warning"
        )
    )
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    while not srv.started:
        time.sleep(0.05)
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(f"http://127.0.0.1:{args.port}/")
            page.wait_for_function("() => document.querySelector('#games-count').dataset.games")
            page.wait_for_timeout(500)
            page.screenshot(path=str(out / "explorer-start.png"))

            def square(sq: str) -> tuple[float, float]:
                b = page.locator(f"#board rect[data-square='{sq}']").bounding_box()
                return b["x"] + b["width"] / 2, b["y"] + b["height"] / 2

            for a, b in (("e2", "e4"), ("c7", "c5"), ("g1", "f3")):
                page.mouse.move(*square(a))
                page.mouse.down()
                page.mouse.move(*square(b), steps=8)
                page.mouse.up()
                page.wait_for_timeout(700)
            page.fill("#depth", "14")
            page.click("#search")
            page.wait_for_function(
                "() => document.querySelector('#search-status').textContent === 'done'", timeout=60_000
            )
            page.screenshot(path=str(out / "explorer-moves.png"))

            page.locator("#top-games li a", has_text="open").first.click()
            page.wait_for_selector("#game-chart svg path")
            page.wait_for_timeout(500)
            page.screenshot(path=str(out / "explorer-game.png"), full_page=True)

            page.fill("#fen", "r1bqk2r/1pppbppp/p1n2n2/4p3/B3P3/5N2/PPPP1PPP/RNBQ1RK1 w kq - 4 6")
            page.click("#fen-form button[type=submit]")
            page.wait_for_timeout(800)
            page.check("input[name=mode][value=setup]")
            page.wait_for_timeout(300)
            page.screenshot(path=str(out / "explorer-setup.png"))
            browser.close()
    finally:
        srv.should_exit = True
        thread.join(timeout=10)
    for p in sorted(out.glob("explorer-*.png")):
        print(p)


if __name__ == "__main__":
    main()
