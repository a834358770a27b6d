"""Scores of one position for the page: every trained value network (their evaluator view,
training/evaluator.py), the traditional evaluation, Stockfish (stored labels, or a live search
in the background), and piece values (a trained piece-value network, else material).

Every score the page shows is from White's point of view, in centipawns."""

from __future__ import annotations

import math
import os
import queue
import signal
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import chess

from explorer.position import InputError, NotFound
from pipeline.ingest.encoding import MATERIAL_VALUES
from pipeline.labels.uci import EngineNotFound, Evaluation, Job, Limit, find_stockfish
from pipeline.play.search import MaterialEvaluator
from pipeline.store import storage
from pipeline.store.storage_paths import ObjectPath, StorePath

PIECE_VALUE_DATASET = "piece_values"
"""A checkpoint that names no preset is taken for a piece-value network when trained on this dataset."""
MATERIAL = dict(zip(chess.PIECE_TYPES, MATERIAL_VALUES, strict=True))
"""Material values in pawns, shown until a piece-value network is trained (the king has none)."""
MIN_DEPTH, MAX_DEPTH = 1, 30
"""Depths a live Stockfish search may be asked for."""


@dataclass(frozen=True)
class TrainedModel:
    """A trained checkpoint the page can use: its model asset's name, the checkpoint its latest
    materialisation recorded (a file, or an object of an S3 store), and the dataset it was trained on."""

    name: str
    checkpoint: StorePath
    dataset: str
    preset: str = ""
    """The model preset (training/models.py PRESETS) it was trained as; its kind says what it is."""

    @property
    def kind(self) -> str:
        """'value' (an MLP or CNN scoring a position: training/evaluator.py), 'piece_values'
        (Team 44's piece-value network), or the preset's kind for models the page does not show
        (DeepChess compares two positions, it scores none)."""
        if not self.preset:
            return "piece_values" if self.dataset == PIECE_VALUE_DATASET else "value"
        from training.models import PRESETS

        spec = PRESETS.get(self.preset)
        kind = spec.kind if spec is not None else "unknown"
        return "value" if kind in ("mlp", "cnn") else kind

    @property
    def piece_values(self) -> bool:
        return self.kind == "piece_values"

    @property
    def sigmoid_output(self) -> bool:
        """A piece-value network regressed through a sigmoid to the game result (values in logits)."""
        from training.models import PRESETS

        spec = PRESETS.get(self.preset)
        return spec is not None and getattr(spec, "output", "linear") == "sigmoid"


def stored_checkpoint(recorded: str) -> StorePath | None:
    """The checkpoint a model asset's materialisation recorded (a file, or an s3:// object of the
    store, as training.checkpoints.store_location reads it), or None when it is gone."""
    from training.checkpoints import store_location

    where = store_location(recorded)
    if isinstance(where, ObjectPath):
        return where if storage.head(where) is not None else None
    return where if where.is_file() else None


def checkpoint_version(path: StorePath) -> tuple:
    """What changes when a checkpoint is replaced: a file's mtime and size, an object's ETag (one
    HEAD). FileNotFoundError when it is gone."""
    if isinstance(path, ObjectPath):
        meta = storage.head(path)
        if meta is None:
            raise FileNotFoundError(f"{path}: no such object in the store")
        return (meta["ETag"],)
    stat = Path(path).stat()
    return (stat.st_mtime_ns, stat.st_size)


class Networks:
    """The trained models (from `list_models`, asked again every `refresh_s`) and their
    evaluators, loaded on first use and kept while their checkpoint (a file, or an object of an
    S3 store) is unchanged."""

    def __init__(self, list_models: Callable[[], list[TrainedModel]], refresh_s: float = 10.0):
        self._list = list_models
        self._refresh_s = refresh_s
        self._models: list[TrainedModel] = []
        self._listed_at = -1e9
        self._evaluators: dict[tuple[str, str], tuple[tuple, object]] = {}
        """(name, checkpoint path) -> (the checkpoint's version, what was loaded from it): one entry
        per checkpoint, replaced when its version changes."""
        self._lock = threading.Lock()

    def models(self) -> list[TrainedModel]:
        with self._lock:
            if time.monotonic() - self._listed_at > self._refresh_s:
                self._models = sorted(self._list(), key=lambda m: m.name)
                self._listed_at = time.monotonic()
            return list(self._models)

    def value_networks(self) -> list[TrainedModel]:
        return [m for m in self.models() if m.kind == "value"]

    def piece_networks(self) -> list[TrainedModel]:
        return [m for m in self.models() if m.piece_values]

    def note(self) -> str | None:
        """What to run when no network scores positions yet (None when one does)."""
        if self.value_networks() or self.piece_networks():
            return None
        return (
            "none trained yet: run `chess-pipeline train` (a value network) or "
            f"`chess-pipeline train {_piece_value_model()}` (a piece-value network)"
        )

    def evaluator(self, model: TrainedModel):
        from training.evaluator import NetworkEvaluator

        return self._cached(
            (model.name, str(model.checkpoint)),
            model.checkpoint,
            lambda: NetworkEvaluator(model.checkpoint, model.name, device="cpu", threads=1),
        )

    def piece_model(self, model: TrainedModel):
        """A piece-value network's model, loaded once per version of its checkpoint."""
        from training.piece_values import load_piece_value_net

        return self._cached(
            ("pieces", str(model.checkpoint)), model.checkpoint, lambda: load_piece_value_net(model.checkpoint)
        )

    def _cached(self, key: tuple[str, str], checkpoint, load: Callable[[], object]):
        """What `load` gives for `key`, loaded again (replacing the old entry) when the
        checkpoint's version has changed since."""
        version = tuple(checkpoint_version(checkpoint))
        with self._lock:
            held = self._evaluators.get(key)
            if held is None or held[0] != version:
                self._evaluators[key] = (version, load())
            return self._evaluators[key][1]

    def scores(self, board: chess.Board) -> list[dict]:
        """Every value network's score of `board` (White's view, centipawn-like units as
        training/evaluator.py maps each kind of output), then every piece-value network's
        (White's values minus Black's: centipawns, or through its sigmoid the expected result
        for White), or why it could not score it."""
        out = []
        for m in self.value_networks() + self.piece_networks():
            row = {"model": m.name, "kind": m.kind, "dataset": m.dataset, "checkpoint": str(m.checkpoint)}
            if board.is_game_over():
                row["error"] = f"the game is over ({board.result()}): networks score positions with moves to play"
            else:
                try:
                    row.update(self._score(m, board))
                except Exception as e:  # a checkpoint that cannot be read is shown as such, not a 500
                    row["error"] = f"{type(e).__name__}: {e}"
            out.append(row)
        return out

    def _score(self, m: TrainedModel, board: chess.Board) -> dict:
        if not m.piece_values:
            stm = float(self.evaluator(m).evaluate([board])[0])
            return {"score": round(stm if board.turn else -stm, 1)}
        from training.piece_values import piece_values as network_values

        values = _square_values(board, network_values(board.fen(), self.piece_model(m)))
        diff = sum(v if board.color_at(chess.parse_square(sq)) else -v for sq, v in values.items())
        if m.sigmoid_output:
            return {"score": None, "expected_result": round(1 / (1 + math.exp(-diff)), 3)}
        return {"score": round(100 * diff, 1)}

    def piece_network(self, name: str | None) -> TrainedModel | None:
        """The piece-value network `name` (None or '': the first trained one; None when none is)."""
        nets = self.piece_networks()
        if not name:
            return nets[0] if nets else None
        for m in nets:
            if m.name == name:
                return m
        valid = ", ".join(m.name for m in nets) or "none trained yet (material values are shown)"
        raise InputError(f"no piece-value model {name!r}; trained piece-value models: {valid}")


def traditional_score(board: chess.Board) -> float:
    """The traditional evaluation (material + piece-square tables), White's view, centipawns."""
    stm = float(MaterialEvaluator().evaluate([board])[0])
    return round(stm if board.turn else -stm, 1)


def material_values(board: chess.Board) -> dict[str, float]:
    """Each piece's material value in pawns, by square name."""
    return {chess.square_name(sq): MATERIAL[p.piece_type] for sq, p in board.piece_map().items()}


def piece_values(board: chess.Board, networks: Networks, model: str | None = None) -> dict:
    """Each piece's value (pawns) by square, the totals per side, and where they come from:
    a trained piece-value network (training/piece_values.py), or material values, saying so,
    while none is trained."""
    net = networks.piece_network(model)
    if net is None:
        values = material_values(board)
        source = {
            "source": "material",
            "model": None,
            "note": "no piece-value network is trained yet: material values shown "
            f"(run `chess-pipeline train {_piece_value_model()}` to see learned values)",
        }
    else:
        from training.piece_values import piece_values as network_values

        values = _square_values(board, network_values(board.fen(), networks.piece_model(net)))
        units = "logits of the expected result" if net.sigmoid_output else "pawns"
        source = {"source": "network", "model": net.name, "note": f"values learned by {net.name} ({units})"}
    pieces = []
    totals = {"white": 0.0, "black": 0.0}
    for sq, p in sorted(board.piece_map().items()):
        name = chess.square_name(sq)
        v = round(float(values.get(name, 0.0)), 2)
        side = "white" if p.color else "black"
        totals[side] += v
        pieces.append({"square": name, "piece": p.symbol(), "color": side, "value": v})
    return {
        **source,
        "fen": board.fen(),
        "pieces": pieces,
        "totals": {k: round(v, 2) for k, v in totals.items()},
        "models": [m.name for m in networks.piece_networks()],
    }


def _piece_value_model() -> str:
    """The piece-value model asset `chess-pipeline train` trains when named (the catalog's first)."""
    from training.catalog import PIECE_VALUE_MODELS

    return PIECE_VALUE_MODELS[0]


def _square_values(board: chess.Board, raw: dict) -> dict[str, float]:
    """training.piece_values' answer ({square name: value}) checked to value every piece."""
    values = {str(k): float(v) for k, v in raw.items()}
    missing = [chess.square_name(sq) for sq in board.piece_map() if chess.square_name(sq) not in values]
    if missing:
        raise ValueError(f"the piece-value network gave no value for the pieces on {', '.join(missing)}")
    return values


def check_depth(depth) -> int:
    try:
        d = int(depth)
    except (TypeError, ValueError):
        raise InputError(f"depth must be an integer from {MIN_DEPTH} to {MAX_DEPTH}, got {depth!r}") from None
    if not MIN_DEPTH <= d <= MAX_DEPTH:
        raise InputError(f"depth must be from {MIN_DEPTH} to {MAX_DEPTH}, got {d}")
    return d


class LiveSearches:
    """Stockfish searches the page asks for, on one engine in a background thread: `start`
    returns at once with a search id, `get` says how it stands. A search asked for again (same
    FEN and depth) is the same search; a new one supersedes every earlier search still queued
    or running (the page wants the position it shows now): those end as "stopped", and the
    engine searching one is killed at once (the pool is started afresh for the next search).
    The engine is the project's pool (pipeline/labels/engine.py): replies tied to their request and
    validated before they are shown."""

    KEPT = 256
    ACTIVE = ("queued", "running")

    def __init__(self, stockfish: str | None = None, timeout_s: float = 600.0):
        self._explicit = stockfish
        self._timeout_s = timeout_s
        self._queue: queue.Queue = queue.Queue()
        self._jobs: OrderedDict[str, dict] = OrderedDict()
        self._by_key: dict[tuple[str, int], str] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._pool = None
        self._running: str | None = None
        """The search the engine is on (set and cleared by the worker, under the lock)."""
        self._kills = 0
        """Engines killed to stop a search; the worker starts a fresh pool when it has grown."""

    def engine_path(self) -> str:
        """The Stockfish binary; InputError-like EngineNotFound when there is none."""
        return find_stockfish(self._explicit)

    def start(self, board: chess.Board, depth: int) -> dict:
        depth = check_depth(depth)
        if board.is_game_over():
            raise InputError(f"the game is over in this position ({board.result()}): nothing to search")
        self.engine_path()  # EngineNotFound now, not later in the thread
        key = (board.fen(), depth)
        with self._lock:
            held = self._jobs.get(self._by_key.get(key, ""))
            if held is not None and held["status"] not in ("failed", "stopped"):
                return dict(held)
            job_id = uuid.uuid4().hex
            for other in list(self._jobs):
                self._stop_locked(other, f"superseded by a newer search ({board.fen()}, depth {depth})")
            state = {
                "id": job_id,
                "fen": board.fen(),
                "depth": depth,
                "status": "queued",
                "url": f"/api/search/{job_id}",
            }
            self._jobs[job_id] = state
            self._by_key[key] = job_id
            while len(self._jobs) > self.KEPT:
                old, st = self._jobs.popitem(last=False)
                self._by_key.pop((st["fen"], st["depth"]), None)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._work, name="explorer-stockfish", daemon=True)
                self._thread.start()
        self._queue.put(job_id)
        return dict(state)

    def cancel(self, job_id: str) -> dict:
        """Stop a queued or running search; a finished one is answered as it stands."""
        with self._lock:
            if job_id not in self._jobs:
                raise NotFound(f"no search {job_id[:40]!r}: start one with POST /api/search")
            self._stop_locked(job_id, "stopped at the page's request")
            return dict(self._jobs[job_id])

    def _stop_locked(self, job_id: str, why: str) -> None:
        state = self._jobs[job_id]
        if state["status"] not in self.ACTIVE:
            return
        state.update(status="stopped", error=why, finished=time.time())
        if self._running == job_id and self._pool is not None:
            for pid in self._pool.pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self._kills += 1

    def get(self, job_id: str) -> dict:
        with self._lock:
            if job_id not in self._jobs:
                raise NotFound(f"no search {job_id[:40]!r}: start one with POST /api/search")
            return dict(self._jobs[job_id])

    def _finish(self, job_id: str, **fields) -> None:
        """The worker's outcome of a search, unless it was stopped meanwhile."""
        with self._lock:
            self._running = None
            state = self._jobs.get(job_id)
            if state is not None and state["status"] == "running":
                state.update(fields, finished=time.time())

    def _work(self) -> None:
        from pipeline.labels.pool import EnginePool

        try:
            while not self._stop.is_set():
                try:
                    job_id = self._queue.get(timeout=0.5)
                except queue.Empty:
                    continue
                with self._lock:
                    state = self._jobs.get(job_id)
                    if state is None or state["status"] != "queued":
                        continue  # stopped (superseded) before it started
                    state.update(status="running", started=time.time())
                    self._running = job_id
                    kills = self._kills
                try:
                    if self._pool is None:
                        # retries=0: a search whose engine was killed to stop it is not searched again
                        self._pool = EnginePool(
                            self.engine_path(), workers=1, timeout_s=self._timeout_s, retries=0
                        ).__enter__()
                    pool = self._pool
                    if self.get(job_id)["status"] != "running":  # stopped while the engine started
                        self._finish(job_id)
                        continue
                    board = chess.Board(state["fen"])
                    job = Job(job_id, board.fen(), board.turn)
                    results = list(pool.run([job], Limit("depth", state["depth"])))
                    r = results[0] if results else None
                    if isinstance(r, Evaluation):
                        self._finish(job_id, status="done", result=_evaluation_dict(r, pool.name, board))
                    else:
                        why = r.reason if r is not None else "the engine gave no result"
                        self._finish(job_id, status="failed", error=why)
                except (EngineNotFound, OSError, RuntimeError, ValueError) as e:
                    self._finish(job_id, status="failed", error=str(e))
                    self._close_pool()
                with self._lock:
                    restart = self._kills != kills
                if restart:
                    self._close_pool()
        finally:
            self._close_pool()

    def _close_pool(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    def close(self) -> None:
        self._stop.set()
        with self._lock:
            for job_id in list(self._jobs):
                self._stop_locked(job_id, "the server stopped")
        if self._thread is not None:
            self._thread.join(timeout=5)


def _evaluation_dict(ev: Evaluation, engine: str, board: chess.Board) -> dict:
    pv_san = []
    b = board.copy(stack=False)
    for uci in (ev.pv or "").split():
        move = chess.Move.from_uci(uci)
        pv_san.append(b.san(move))
        b.push(move)
    return {
        "engine": engine,
        "setting": f"depth {ev.depth}",
        "cp": ev.cp,
        "mate": ev.mate,
        "score": ev.score,
        "best_move": ev.best_move,
        "pv": ev.pv,
        "pv_san": " ".join(pv_san),
        "depth": ev.depth,
        "nodes": ev.nodes,
        "time_ms": ev.time_ms,
    }
