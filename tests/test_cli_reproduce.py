"""`chess-pipeline reproduce` on a tiny real slice: the report's rows, and resuming after kill -9.

One module-scoped run, scaled down: the first 60 games of a shared FICS 2024 archive,
Stockfish's static labels, the 3-class MLP only, quick profile with one epoch, the quick
evaluation with one opening, five positions of each shared suite. The command is SIGKILLed
as soon as the model's run has started (two steps finished), its archive is touched (the same
bytes, a later modification time), then it is run again to the end; the assertions hold whether
or not the model's step finished before the kill landed.
"""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.stores import first_games

pytestmark = pytest.mark.slow

CLI = Path(sys.executable).parent / "chess-pipeline"
MODEL = "mlp_bitmap_3class"
ARGS = [MODEL, "--profile", "quick", "--static", "--quick-eval", "--max-epochs", "1", "--openings", "1"]


def _env(tmp: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("CHESS_PIPELINE_HOME", "CHESS_PIPELINE_DEBUG")}
    env["DAGSTER_HOME"] = str(tmp / "dagster")
    return env


def _latest_runs(tmp: Path) -> dict[str, str]:
    """{asset: run id of its latest materialisation} in the test's instance."""
    import dagster as dg

    out = {}
    with dg.DagsterInstance.from_config(str(tmp / "dagster")) as instance:
        for name in ("sabatelli_3class", "published_split_sabatelli_3class", MODEL, "reproduction_report"):
            event = instance.get_latest_materialization_event(dg.AssetKey(name))
            if event is not None:
                out[name] = event.run_id
    return out


def _run_statuses(tmp: Path, ids: list[str] | None = None) -> dict[str, str]:
    """{run id: status} of the given runs (None: the runs left STARTED) in the test's instance."""
    import dagster as dg

    with dg.DagsterInstance.from_config(str(tmp / "dagster")) as instance:
        if ids is None:
            runs = instance.get_runs(filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED]))
        else:
            runs = [r for r in (instance.get_run_by_id(i) for i in ids) if r is not None]
        return {r.run_id: r.status.value for r in runs}


@pytest.fixture(scope="module")
def reproduced(tmp_path_factory, shared_data, stockfish):
    tmp = tmp_path_factory.mktemp("reproduce")
    (tmp / "data").mkdir()
    first_games(shared_data / "pgn" / "ficsgamesdb_202401_standard2000_nomovetimes_397466.pgn.zst", 60,
                tmp / "data" / "fics2024-60.pgn")  # fmt: skip
    (tmp / "suites").mkdir()
    for suite in ("kaufman.epd", "STS1-STS15_LAN_v3.epd"):
        lines = (shared_data / "epd" / suite).read_text().splitlines()[:5]
        (tmp / "suites" / suite).write_text("\n".join(lines) + "\n")
    argv = [str(CLI), "--home", str(tmp / "store"), "reproduce", *ARGS, "--data", str(tmp / "data"),
            "--suites", str(tmp / "suites")]  # fmt: skip
    first = subprocess.Popen(
        argv, env=_env(tmp), cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip
    seen = []
    deadline = time.monotonic() + 400
    try:
        for line in first.stdout:
            seen.append(line)
            if f"{MODEL}: running" in line:
                # Killed as soon as the model's run has started (its step under way); the assertions
                # hold wherever the kill lands, the model's step finished or not.
                while not _run_statuses(tmp) and time.monotonic() < deadline and first.poll() is None:
                    time.sleep(0.2)
                break
            assert time.monotonic() < deadline, "".join(seen)
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # the command and its engines, mid-step
        first.wait(timeout=60)
    before = _latest_runs(tmp)
    later = time.time() + 60  # the archive touched, its bytes the same: not an archive to ingest again
    os.utime(tmp / "data" / "fics2024-60.pgn", (later, later))
    started = list(_run_statuses(tmp))  # the runs the kill left STARTED (none if it landed before the run began)
    second = subprocess.run(argv, env=_env(tmp), cwd=tmp, capture_output=True, text=True, timeout=600)
    return {
        "tmp": tmp,
        "first": "".join(seen),
        "before": before,
        "second": second,
        "after": _latest_runs(tmp),
        "started": started,
        "started_after": _run_statuses(tmp, started),
    }


def test_resumes_after_sigkill_without_redoing_finished_steps(reproduced):
    second, before, after = reproduced["second"], reproduced["before"], reproduced["after"]
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    # Killed once the model's step started: both datasets were finished (the model maybe).
    assert {"sabatelli_3class", "published_split_sabatelli_3class"} <= set(before), reproduced["first"]
    assert "reproduction_report" not in before
    for name in before:  # the finished steps kept, not redone
        assert after[name] == before[name]
        assert re.search(rf"\] {name}: kept", second.stdout), second.stdout
    assert "ingest: 1 of 1 archives already ingested; 0 to ingest" in second.stdout  # though touched since
    assert re.search(r"labels .*: 0 labelled", second.stdout), second.stdout  # nothing labelled twice
    if MODEL not in before:  # the kill landed inside its step: run again, from its start
        assert re.search(rf"\] {MODEL}: done in", second.stdout), second.stdout
    if reproduced["started"]:  # the kill left a run STARTED: the next command marks it failed
        assert "was left STARTED by process" in second.stderr
        assert set(reproduced["started_after"].values()) == {"FAILURE"}, reproduced["started_after"]


def _latest_metric(store: Path, model: str, metric: str) -> tuple[float, float]:
    """(value, test rows) of the model's newest run, read from the Parquet files themselves."""
    table = pq.read_table(store / "model_metrics" / model).to_pylist()
    newest = max(r["materialised_at"] for r in table)
    rows = {r["metric"]: r["value"] for r in table if r["materialised_at"] == newest and r["split"] == "test"}
    return rows[metric], rows["rows"]


def test_each_finished_step_says_how_many_are_left_and_how_long_they_should_take(reproduced):
    second = reproduced["second"]
    done = [line for line in second.stdout.splitlines() if re.search(r"\] \S+: done in", line)]
    left = [int(m.group(1)) if (m := re.search(r"; (\d+) steps? to go", line)) else 0 for line in done]
    assert len(done) >= 4 and left == list(range(len(done) - 1, -1, -1)), second.stdout  # one fewer a step
    # Once no model run is left (the evaluation), an estimate: the reserve's figures for what is left.
    evaluation = [line for line in done if "] eval_" in line]
    estimate = re.compile(r"to go, about [\d.]+ min by the measured figures$")
    assert evaluation and all(estimate.search(line) for line in evaluation)
    assert done[-1].split("] ")[1].startswith("reproduction_report: done in") and "to go" not in done[-1]


def test_report_has_every_published_figure_beside_ours(reproduced):
    from pipeline.research.published import EVALUATION_FIGURES, MODEL_FIGURES

    store = reproduced["tmp"] / "store"
    text = (store / "reports" / "reproduction.md").read_text()
    table = text.split("## Published figures beside ours", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| ") and f"| {MODEL} |" in line]
    figures = [MODEL_FIGURES[MODEL], *(f for f in EVALUATION_FIGURES if f.model == MODEL)]
    assert len(rows) == len(figures), text
    for f, row in zip(figures, rows, strict=True):
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[1] == f.measure and cells[3] == f.text()
        assert cells[8] != "not measured", row  # ours, leakage-free, beside the published figure
    # The accuracy cells are the model_metrics of each protocol's model.
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    for col, model in ((6, "published_split_" + MODEL), (8, MODEL)):
        value, n = _latest_metric(store, model, "accuracy")
        assert cells[col] == f"{value:.2%}" and cells[col + 1] == f"{int(n):,}"
    assert "quick profile" in cells[10] and "at most 1 epoch(s)" in cells[10]  # the smaller size, stated
    # Every step's time, and the pictures the report links exist.
    # Each step's status is what the second run did with it (kept: finished before the kill).
    before = reproduced["before"]
    statuses = {"archive_tables": "kept", "labels": "kept", "sabatelli_3class": "kept",
                MODEL: "kept" if MODEL in before else "done", f"eval_suites_{MODEL}": "done"}  # fmt: skip
    for step, status in statuses.items():
        assert re.search(rf"\| {step} \| {status} \| \d+m \d\ds \|", text), (step, status)
    links = re.findall(r"!\[[^]]*\]\(([^)]+)\)", text)
    assert any("learning_curves" in p for p in links) and any("confusion_matrix" in p for p in links)
    assert any("kaufman" in p for p in links)
    for p in links:
        assert (store / "reports" / p).is_file(), p
