"""The explorer's guard rails, against a real uvicorn server on a loopback port: security
headers on every answer, the Host check (DNS rebinding), every error in the documented JSON
shape (unknown path, wrong method, HEAD, over-long URL or body), the store's summary, and
queries off the event loop so the page answers during a burst."""

import contextlib
import http.client
import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from explorer.app import SERVER_OPTIONS, create_app

START = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serving(app, **config):
    """`app` under uvicorn on a free loopback port, as `chess-pipeline explore` serves it."""
    import uvicorn

    port = _free_port()
    srv = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", **{**SERVER_OPTIONS, **config})
    )
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not srv.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the explorer server did not start"
        time.sleep(0.05)
    try:
        yield port
    finally:
        srv.should_exit = True
        thread.join(timeout=10)


def request(port, method, path, headers=None, body=None, timeout=30):
    """(status, headers, body bytes) of one request, with the Host header as given (default 127.0.0.1:port)."""
    con = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        con.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        hdrs = {"Host": f"127.0.0.1:{port}", **(headers or {})}
        if body is not None:
            hdrs["Content-Length"] = str(len(body))
        for k, v in hdrs.items():
            if v is not None:
                con.putheader(k, v)
        con.endheaders(body)
        r = con.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        con.close()


@pytest.fixture(scope="module")
def port(explorer_store):
    with serving(create_app(explorer_store)) as p:
        yield p


def error_of(status, body) -> str:
    """The documented error shape: JSON {"error": one line}, nothing else."""
    payload = json.loads(body)
    assert set(payload) == {"error"}, (status, payload)
    assert isinstance(payload["error"], str) and payload["error"] and "\n" not in payload["error"]
    return payload["error"]


@pytest.mark.parametrize(
    "path", ["/", "/static/explorer.js", "/api/models", f"/api/fen?fen={START.replace(' ', '%20')}", "/api/nothing"]
)
def test_every_answer_carries_the_security_headers(port, path):
    status, headers, _ = request(port, "GET", path)
    csp = headers["content-security-policy"]
    directives = {d.split()[0]: d.split()[1:] for d in csp.split(";") if d.strip()}
    assert directives["script-src"] == ["'self'"] and directives["object-src"] == ["'none'"]
    assert directives["style-src"] == ["'self'"]  # no <style> element from anywhere else
    assert "'unsafe-inline'" not in directives.get("default-src", [])
    assert headers["x-content-type-options"] == "nosniff"


def test_the_page_has_no_inline_script():
    """The policy allows script files from the server only: the page may hold none inline."""
    html = (Path(__file__).resolve().parents[2] / "explorer" / "static" / "index.html").read_text()
    assert "<script" in html
    for tag in html.split("<script")[1:]:
        head, _, rest = tag.partition(">")
        assert "src=" in head and rest.lstrip().startswith("</script>"), tag[:120]
    assert "onclick=" not in html and "onload=" not in html and "style=" not in html


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::1]", "LOCALHOST:1234", "127.0.0.1:{port}"])
def test_loopback_host_names_are_answered(port, host):
    status, _, body = request(port, "GET", "/api/models", {"Host": host.format(port=port)})
    assert status == 200, body


@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:{port}", "127.0.0.1.evil.example", "localhost.evil:80", "[::2]", ""]
)
def test_other_host_names_are_refused_against_dns_rebinding(port, host):
    """A page elsewhere whose name is rebound to 127.0.0.1 sends its own name: refused, in the
    documented JSON shape, before any query runs."""
    h = host.format(port=port)
    status, headers, body = request(port, "GET", f"/api/position?fen={START.replace(' ', '%20')}", {"Host": h})
    assert status == 421
    assert "not served here" in error_of(status, body)
    assert headers["x-content-type-options"] == "nosniff"


def test_no_api_docs_page_from_a_cdn(port):
    status, _, body = request(port, "GET", "/api/docs")
    assert status == 404 and "no such page" in error_of(status, body)
    status, _, body = request(port, "GET", "/docs")
    assert status == 404
    status, _, body = request(port, "GET", "/api/openapi.json")
    assert status == 200 and "/api/position" in json.loads(body)["paths"]


def test_unknown_paths_and_methods_answer_the_documented_json(port):
    status, _, body = request(port, "GET", "/api/nothing")
    assert status == 404 and "no such page: /api/nothing" in error_of(status, body)
    status, headers, body = request(port, "POST", "/api/models", body=b"")
    assert status == 405 and "POST is not allowed on /api/models; allowed: GET" in error_of(status, body)
    assert headers["allow"] == "GET"
    status, _, body = request(port, "PUT", "/api/search", body=b"{}")
    assert status == 405 and "allowed: POST" in error_of(status, body)


@pytest.mark.parametrize(
    "path", ["/", "/api/models", f"/api/fen?fen={START.replace(' ', '%20')}", "/static/explorer.css"]
)
def test_head_is_answered_for_every_get(port, path):
    got = request(port, "GET", path)
    status, headers, body = request(port, "HEAD", path)
    assert status == 200 == got[0] and body == b""
    assert headers["content-type"] == got[1]["content-type"]
    assert int(headers["content-length"]) == len(got[2])


@pytest.mark.parametrize("length", [9_000, 100_000, 600_000])
def test_an_over_long_url_is_the_json_error(port, length):
    status, _, body = request(port, "GET", "/api/fen?fen=" + "x" * length)
    assert status == 414 and "the URL is" in error_of(status, body)


def test_an_oversized_body_is_the_json_error(port):
    status, _, body = request(
        port, "POST", "/api/search", {"Content-Type": "application/json"}, body=b'{"fen": "' + b"x" * 200_000 + b'"}'
    )
    assert status == 413 and "at most 65536" in error_of(status, body)


def test_the_store_summary_counts_games_or_says_to_ingest(port, explorer_store, tmp_path):
    from pipeline.store import duck
    from pipeline.store.store import Store

    with duck.memory_connection(explorer_store) as con:
        n = con.sql("SELECT count(*) FROM games").fetchall()[0][0]
    status, _, body = request(port, "GET", "/api/store")
    assert status == 200 and json.loads(body) == {"games": n, "note": None}
    empty = Store(tmp_path / "empty").ensure()
    with serving(create_app(empty)) as p:
        status, _, body = request(p, "GET", "/api/store")
    note = json.loads(body)["note"]
    assert status == 200 and json.loads(body)["games"] == 0 and "chess-pipeline ingest PATH" in note


def test_the_page_answers_during_a_burst_of_slow_queries(explorer_store):
    """200 of the slowest query (the start position, every game, 200 listed), 8 at once: the
    index page and a static file still answer within a second each while they run."""
    fen = START.replace(" ", "%20")
    with serving(create_app(explorer_store)) as p:
        assert request(p, "GET", f"/api/position?fen={fen}&games=200")[0] == 200  # the store opened
        done = threading.Event()
        slowest = []

        def burst():
            with ThreadPoolExecutor(8) as pool:
                codes = list(pool.map(lambda _: request(p, "GET", f"/api/position?fen={fen}&games=200")[0], range(200)))
            done.set()
            return codes

        with ThreadPoolExecutor(1) as runner:
            codes = runner.submit(burst)
            time.sleep(0.3)
            while not done.is_set():
                for path in ("/", "/static/explorer.css"):
                    t = time.monotonic()
                    assert request(p, "GET", path)[0] == 200
                    slowest.append(time.monotonic() - t)
                time.sleep(0.05)
            assert set(codes.result()) == {200}
    assert len(slowest) >= 4, "the burst ended before the page was asked"
    assert max(slowest) < 1.0, f"page answers during the burst took up to {max(slowest):.2f} s"
