"""Scores of one position for the page: every trained value network (their evaluator view,
training/evaluator.py), the traditional evaluation, Stockfish (stored labels, or a live search
in the background), and piece values (a trained piece-value network, else material).

Every score the page shows is from White's point of view, in centipawns."""

from __future__ import annotations

import queue
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import chess

from explorer.position import InputError, NotFound
from pipeline import storage
from pipeline.encoding import MATERIAL_VALUES
from pipeline.engine import EngineNotFound, Evaluation, Job, Limit, find_stockfish
from pipeline.search import MaterialEvaluator
from pipeline.storage import ObjectPath, StorePath

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
        training/evaluator.py maps each kind of output), or why it could not score it."""
        out = []
        for m in self.value_networks():
            row = {"model": m.name, "dataset": m.dataset, "checkpoint": str(m.checkpoint)}
            if board.is_game_over():
                row["error"] = f"the game is over ({board.result()}): networks score positions with moves to play"
            else:
                try:
                    stm = float(self.evaluator(m).evaluate([board])[0])
                    row["score"] = round(stm if board.turn else -stm, 1)
                except Exception as e:  # a checkpoint that cannot be read is shown as such, not a 500
                    row["error"] = f"{type(e).__name__}: {e}"
            out.append(row)
        return out

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
            "(train a piece-value network, training/piece_values.py, to see learned values)",
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
    """Stockfish searches the page asks for, one at a time on one engine in a background
    thread: `start` returns at once with a search id, `get` says how it stands. A search asked
    for again (same FEN and depth) is the same search. The engine is the project's pool
    (pipeline/engine.py): replies tied to their request and validated before they are shown."""

    KEPT = 256

    def __init__(self, stockfish: str | None = None, timeout_s: float = 600.0):
        self._explicit = stockfish
        self._timeout_s = timeout_s
        self._queue: queue.Queue = queue.Queue()
        self._jobs: OrderedDict[str, dict] = OrderedDict()
        self._by_key: dict[tuple[str, int], str] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

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
            if key in self._by_key and self._jobs.get(self._by_key[key], {}).get("status") != "failed":
                return dict(self._jobs[self._by_key[key]])
            job_id = uuid.uuid4().hex
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

    def get(self, job_id: str) -> dict:
        with self._lock:
            if job_id not in self._jobs:
                raise NotFound(f"no search {job_id[:40]!r}: start one with POST /api/search")
            return dict(self._jobs[job_id])

    def _set(self, job_id: str, **fields) -> None:
        with self._lock:
            if job_id in self._jobs:
                self._jobs[job_id].update(fields)

    def _work(self) -> None:
        from pipeline.engine import EnginePool

        pool = None
        try:
            while not self._stop.is_set():
                try:
                    job_id = self._queue.get(timeout=0.5)
                except queue.Empty:
                    continue
                try:
                    state = self.get(job_id)
                except NotFound:
                    continue
                self._set(job_id, status="running", started=time.time())
                try:
                    if pool is None:
                        pool = EnginePool(
                            self.engine_path(), workers=1, timeout_s=self._timeout_s, retries=1
                        ).__enter__()
                    board = chess.Board(state["fen"])
                    job = Job(job_id, board.fen(), board.turn)
                    results = list(pool.run([job], Limit("depth", state["depth"])))
                    r = results[0] if results else None
                    if isinstance(r, Evaluation):
                        self._set(
                            job_id, status="done", result=_evaluation_dict(r, pool.name, board), finished=time.time()
                        )
                    else:
                        why = r.reason if r is not None else "the engine gave no result"
                        self._set(job_id, status="failed", error=why, finished=time.time())
                except (EngineNotFound, OSError, RuntimeError, ValueError) as e:
                    self._set(job_id, status="failed", error=str(e), finished=time.time())
                    if pool is not None:
                        pool.close()
                        pool = None
        finally:
            if pool is not None:
                pool.close()

    def close(self) -> None:
        self._stop.set()
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
