"""Team 44's piece-value networks (2019): every piece valued in its context, the position's score
the sum of White's piece values minus Black's.

Each piece gets the 837 inputs of `training.encoders.Pieces837` (the position's 773 bits from
its owner's side and the one-hot square of the piece). An autoencoder 837-600-400-200-100
(`training.autoencoder`: sigmoid units, each layer pretrained to reconstruct the one below
with binary cross-entropy through a decoder of its own; the decoders stacked in reverse are
the mirrored decoder) gives a 100-number code of the piece in its position; six valuator
networks, one per piece type (3 hidden layers, one output), turn the code into the piece's
value. The model's output is the sum over a position's pieces of value x (+1 White, -1 Black):
regressed to Stockfish's centipawns / 100 (`piece_values` dataset, MSE), or, the second variant,
through a sigmoid regressed to the game result (1, 0.5, 0).

Our choices where the report is silent: the autoencoder is trained first, without labels, and
then kept fixed (the valuators learn from its codes; the encoder is not fine-tuned, which also
makes a step three times cheaper); each valuator starts with a batch norm of the codes (a fixed
encoder's sigmoid codes vary little from piece to piece, the norm spreads them); each
valuator's output is multiplied by VALUE_UNIT (training.models), so that Adam's steps (about
one learning rate each) move a value by VALUE_UNIT x lr and a queen's nine pawns is reached in
a few hundred steps, not thousands; a Black piece is valued on the mirrored board (see PieceRows), so one
network per piece type serves both colours.

Batched: the pieces of all positions of a batch are one set of rows, each piece-type network
runs once on its rows, and the values are scatter-added per position. The first encoder layer
is computed per position (the 773 position bits times the weight's first 773 columns) and per
piece only the square's column is added, which is the same Linear(837, 600) on the dense rows
at a 26th of the work.

    values = piece_values("r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3", model)
    values["f3"]   # the knight's value to White, in pawns (a float)

Library code: no Dagster; `load_piece_value_net(checkpoint)` gives a model from a checkpoint. The
network itself (PieceValueNet) is in training.models, beside the other architectures.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import chess
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch

from pipeline.datasets.datasets import built_with, protocol_text
from pipeline.research.intervals import interval_rows, interval_text, percentile_interval, ratio_draws
from pipeline.research.published import TEAM44
from pipeline.store.storage_paths import StorePath
from training.checkpoints import load_model, store_location
from training.encoders import MATERIAL_VALUES, Batch, PieceRows, get_encoder
from training.models import PIECE_TYPES, PieceValueNet

BOOK_VALUES = MATERIAL_VALUES[:5]
"""The textbook values of P N B R Q, for the material baseline and beside ours."""
PHASES = ("opening", "middlegame", "endgame")
"""sql/views/macros.sql `game_phase`."""
_ENCODER = "pieces837"


def piece_rows(batch: Batch) -> PieceRows:
    """The per-piece inputs of a batch (training.encoders.Pieces837)."""
    return get_encoder(_ENCODER)(batch)


def boards_batch(boards: Iterable[chess.Board]) -> Batch:
    """Boards as the loader's Batch (the store's encoding, White's view)."""
    from pipeline.play.search import board_arrays

    planes, white, castling = board_arrays(list(boards))
    w = torch.from_numpy(white)
    return Batch(torch.from_numpy(planes), w, torch.from_numpy(castling), torch.zeros_like(w))


def load_piece_value_net(checkpoint: StorePath | str, device: str = "cpu") -> PieceValueNet:
    """The best model of a piece-value checkpoint (a file, or an object of an S3 store: a
    StorePath or its text; training.checkpoints.load_model), ready to use."""
    model, ck = load_model(store_location(checkpoint), device)
    if not isinstance(model, PieceValueNet):
        raise ValueError(f"{checkpoint}: a {ck['config']['model']} model, not a piece-value network")
    return model.to(device)


def read_board(fen: str) -> chess.Board:
    """A board from a FEN, or ValueError saying what is wrong with it."""
    try:
        board = chess.Board(fen)
    except ValueError as e:
        raise ValueError(f"not a valid FEN ({e}): {fen!r}") from None
    if not board.is_valid():
        problems = [f.name.lower().replace("_", " ") for f in chess.Status if f and board.status() & f]
        raise ValueError(f"not a legal position ({', '.join(problems)}): {fen!r}")
    return board


@torch.no_grad()
def piece_values(fen: str, model: PieceValueNet | Path | str) -> dict[str, float]:
    """The value of every piece on the board of `fen` to its owner, by square name ('e4': 1.03).

    `model`: a PieceValueNet, or the path of a piece-value checkpoint (loaded each call: keep a
    loaded model for repeated use). Values are in the model's units: pawns for the centipawn
    model (piece_value_net), logits of the expected result for the result variant. White's
    values minus Black's give the model's score before its output function. Squares in board
    order, a1 first. ValueError for a FEN python-chess cannot read or an illegal position."""
    board = read_board(fen)
    if not isinstance(model, PieceValueNet):
        model = load_piece_value_net(model)
    model.eval()
    device = next(model.parameters()).device
    rows = piece_rows(boards_batch([board]).to(device))
    values = model.values(rows).cpu().tolist()
    squares = rows.board_square.cpu().tolist()
    return {chess.square_name(s): v for s, v in sorted(zip(squares, values))}


# Evaluation on a dataset split. -------------------------------------------------------------


@dataclass
class PieceValueReport:
    """A trained model on a test split: errors, the material baseline, values per piece type."""

    rows: int = 0
    output: str = "linear"
    mse: float = math.nan
    """Of the model's output against the target (pawns^2 for the centipawn model)."""
    mae: float = math.nan
    rmse: float = math.nan
    baseline_mse: float = math.nan
    """Book material difference (P 1 N 3 B 3 R 5 Q 9), scale and offset fitted on train, through
    the same output function."""
    baseline_mae: float = math.nan
    baseline_rmse: float = math.nan
    baseline_fit: tuple[float, float] = (math.nan, math.nan)
    """(scale, offset) of the baseline."""
    average: dict = field(default_factory=dict)
    """piece type -> mean value in the model's units over every piece of that type in test."""
    relative: dict = field(default_factory=dict)
    """piece type -> mean value / the pawn's mean value (pawn = 1), as Team 44 reported them."""
    by_phase: dict = field(default_factory=dict)
    """phase -> {piece type -> that phase's mean value / the pawn's mean over all phases}, plus
    'pawn_raw' (the pawn's mean in the phase, model units). One unit for every phase: a phase's
    own pawn mean is no unit, since where both sides have the same pawns (most openings) the
    target does not pin a pawn's value down (it was 0.1 of a Stockfish pawn in one run's
    openings, which made that run's opening queen 82 pawns)."""
    linear_fit: dict = field(default_factory=dict)
    """piece type -> the value a linear fit of the target on the piece-count differences of train
    gives (model units; through the sigmoid for the result variant): what the labels themselves
    say a piece is worth, with no context, the yardstick for ours."""
    counts: dict = field(default_factory=dict)
    """phase -> {piece type -> pieces}, and 'positions' -> {phase -> positions}."""
    intervals: dict = field(default_factory=dict)
    """piece type -> (low, high) of its 95% interval (pawn = 1): a seeded bootstrap resampling the
    test split's games (its positions are not independent), each with all its pieces; empty
    when the split has no game_id."""
    interval_games: int = 0
    """Games the intervals resampled."""
    split: dict = field(default_factory=dict)
    """How the test file was split (pipeline.datasets.datasets.built_with: `by` game or position, `guard`):
    ours, or the published protocol (by position, no leakage guard)."""

    @property
    def protocol(self) -> str:
        """The split protocol in words."""
        return protocol_text(self.split)

    def table_md(self) -> str:
        """Ours beside Team 44's and the book's, pawn = 1."""
        lines = [
            "| piece | ours (pawn = 1) | Team 44 | book | linear fit of train's labels (pawn = 1) "
            "| ours, model units | linear fit, model units |",
            "|---|---|---|---|---|---|---|",
        ]
        pawn_fit = self.linear_fit.get("pawn", math.nan)
        for i, t in enumerate(PIECE_TYPES):
            book = f"{BOOK_VALUES[i]:g}" if i < len(BOOK_VALUES) else "-"
            fit = self.linear_fit.get(t)
            ci = self.intervals.get(t)
            lines.append(
                f"| {t} | {self.relative.get(t, math.nan):.2f}"
                + ("" if ci is None or t == "pawn" else f" (95%: {ci[0]:.2f}-{ci[1]:.2f})")
                + f" | {TEAM44.get(t, 1.0 if t == 'pawn' else '-')} "
                f"| {book} | {'-' if fit is None else f'{fit / pawn_fit:.2f}'} | {self.average.get(t, math.nan):.3f} "
                f"| {'-' if fit is None else f'{fit:.3f}'} |"
            )
        return "\n".join(lines)

    def error_md(self) -> str:
        """The test error beside the book-material baseline's."""
        unit = "pawns" if self.output == "linear" else "result"
        return (
            f"Test split: {self.protocol}.\n\n"
            f"| on {self.rows:,} test positions | MAE ({unit}) | RMSE ({unit}) | MSE |\n|---|---|---|---|\n"
            f"| piece-value network | {self.mae:.3f} | {self.rmse:.3f} | {self.mse:.4f} |\n"
            f"| book material x {self.baseline_fit[0]:.3f} + {self.baseline_fit[1]:.3f} "
            f"| {self.baseline_mae:.3f} | {self.baseline_rmse:.3f} | {self.baseline_mse:.4f} |"
        )

    def result_rows(self) -> list[tuple[str, str, float, int, str]]:
        """(suite, metric, value, n, detail) rows for evaluation_results (suite `piece_values`)."""
        suite, rows = "piece_values", []
        unit = "pawns" if self.output == "linear" else "result"
        rows.append((suite, "split_by_position", float(self.split.get("by") == "position"), self.rows, self.protocol))
        rows.append((suite, "leakage_guard", float(self.split.get("guard", True)), self.rows, self.protocol))
        for name, ours, base in (("mae", self.mae, self.baseline_mae), ("rmse", self.rmse, self.baseline_rmse)):
            rows.append((suite, f"test_{name}_{unit}", ours, self.rows, f"book material baseline {base:.4f}"))
            rows.append(
                (suite, f"baseline_{name}_{unit}", base, self.rows, "book material, scale and offset fitted on train")
            )
        for i, t in enumerate(PIECE_TYPES):
            n = sum(self.counts.get(p, {}).get(t, 0) for p in PHASES)
            if t in self.relative:
                pub = f"Team 44 {TEAM44[t]}, book {BOOK_VALUES[i]:g}" if t in TEAM44 else ""
                detail = f"pawn = 1; {pub}".rstrip("; ")
                if t in self.intervals:
                    lo, hi = self.intervals[t]
                    how = f"seeded bootstrap over the test split's {self.interval_games:,} games"
                    detail = f"{interval_text(f'{self.relative[t]:.2f}', f'{lo:.2f}', f'{hi:.2f}', n)}, {how}; {detail}"
                    rows += interval_rows(suite, f"value_{t}", lo, hi, n, how)
                rows.append((suite, f"value_{t}", self.relative[t], n, detail))
            if t in self.linear_fit and self.linear_fit.get("pawn"):
                rows.append(
                    (
                        suite,
                        f"linear_fit_value_{t}",
                        self.linear_fit[t] / self.linear_fit["pawn"],
                        self.rows,
                        "pawn = 1; a linear fit of train's target on the piece-count differences",
                    )
                )
            for p in PHASES:
                if t in self.by_phase.get(p, {}):
                    rows.append(
                        (
                            suite,
                            f"value_{t}_{p}",
                            self.by_phase[p][t],
                            self.counts[p][t],
                            f"in the {p}; pawn = 1 over all phases",
                        )
                    )
        return rows

    def phase_md(self) -> str:
        """Values by game phase, pawn = 1 over all phases (the overall table's unit), and the pawn's
        own value per phase in model units."""
        lines = ["| piece | " + " | ".join(PHASES) + " |", "|---" * (len(PHASES) + 1) + "|"]
        for t in PIECE_TYPES:
            cells = [self.by_phase.get(p, {}).get(t, math.nan) for p in PHASES]
            lines.append(f"| {t} | " + " | ".join("-" if math.isnan(c) else f"{c:.2f}" for c in cells) + " |")
        raw = [self.by_phase.get(p, {}).get("pawn_raw", math.nan) for p in PHASES]
        lines.append("| pawn, model units | " + " | ".join("-" if math.isnan(c) else f"{c:.3f}" for c in raw) + " |")
        pos = self.counts.get("positions", {})
        lines.append("| positions | " + " | ".join(f"{pos.get(p, 0):,}" for p in PHASES) + " |")
        return "\n".join(lines)


def _table(path: Path, max_rows: int) -> pa.Table:
    """A split file's first rows (max_rows; 0: all) with the `game_phase` macro's phase of each."""
    import duckdb

    from pipeline.store.duck import glob_escape, load_sql

    rows = pq.read_metadata(path).num_rows
    with duckdb.connect() as con:
        con.execute(load_sql("views/macros"))
        return con.sql(
            "SELECT *, game_phase(planes, fullmove_number) AS phase FROM read_parquet($path) LIMIT $n",
            params={"path": glob_escape(str(path)), "n": min(rows, max_rows) if max_rows else rows},
        ).to_arrow_table()


def _batches(table: pa.Table, target: str, size: int) -> Iterable[tuple[Batch, slice]]:
    from training.data import _batch, _columns

    for start in range(0, table.num_rows, size):
        t = table.slice(start, size)
        cols = _columns(t.drop_columns(["target"]).append_column("target", t.column(target).cast(pa.float32())))
        yield _batch(cols), slice(start, start + t.num_rows)


def book_material(planes: np.ndarray) -> np.ndarray:
    """Material difference in pawns (P 1 N 3 B 3 R 5 Q 9, White's view) of (N, 96) planes."""
    bits = np.unpackbits(planes.reshape(-1, 12, 8), axis=2).sum(axis=2)  # (N, 12) piece counts
    w = np.array(MATERIAL_VALUES, dtype=np.float64)
    return bits[:, :6] @ w - bits[:, 6:] @ w


def _planes(table: pa.Table) -> np.ndarray:
    col = table.column("planes").combine_chunks().cast(pa.binary(96))
    return np.frombuffer(col.buffers()[1], dtype=np.uint8)[col.offset * 96 : (col.offset + len(col)) * 96].reshape(
        -1, 96
    )


def fit_linear(x: np.ndarray, y: np.ndarray, output: str) -> np.ndarray:
    """Weights w (one per column of x, then the offset) minimising the MSE of f(x @ w[:-1] +
    w[-1]) against y (f the identity or the sigmoid): least squares, or a few hundred LBFGS
    steps for the sigmoid."""
    x = np.asarray(x, dtype=np.float64).reshape(len(y), -1)
    a = np.concatenate([x, np.ones((len(x), 1))], 1)
    if output == "linear":
        return np.linalg.lstsq(a, y, rcond=None)[0]
    at, t = torch.tensor(a), torch.tensor(y, dtype=torch.float64)
    p = torch.zeros(a.shape[1], dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([p], max_iter=200, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = ((torch.sigmoid(at @ p) - t) ** 2).mean()
        loss.backward()
        return loss

    opt.step(closure)
    return p.detach().numpy()


def fit_baseline(material: np.ndarray, y: np.ndarray, output: str) -> tuple[float, float]:
    """(scale, offset) minimising the MSE of f(scale x material + offset) against y (f the
    identity or the sigmoid)."""
    scale, offset = fit_linear(material, y, output)
    return float(scale), float(offset)


def piece_count_differences(planes: np.ndarray) -> np.ndarray:
    """(N, 5) White's count minus Black's of P N B R Q, of (N, 96) planes."""
    bits = np.unpackbits(planes.reshape(-1, 12, 8), axis=2).sum(axis=2).astype(np.float64)
    return bits[:, :5] - bits[:, 6:11]


def _baseline(material: np.ndarray, fit: tuple[float, float], output: str) -> np.ndarray:
    z = fit[0] * material + fit[1]
    return 1 / (1 + np.exp(-z)) if output == "sigmoid" else z


def evaluate_checkpoint(
    checkpoint: StorePath | str, max_rows: int = 0, device: str | torch.device = "cpu"
) -> tuple[PieceValueReport, dict]:
    """evaluate_piece_values on the test and train files the checkpoint was trained on (its
    lineage), with the target column it learned; also returns the checkpoint."""
    from pipeline.store import storage

    model, ck = load_model(store_location(checkpoint), str(device))
    if not isinstance(model, PieceValueNet):
        raise ValueError(f"{checkpoint}: a {ck['config']['model']} model, not a piece-value network")
    splits = {s: store_location(ck["dataset"]["splits"][s]["path"]) for s in ("train", "test")}
    for s, path in splits.items():
        if not storage.exists(path):
            raise FileNotFoundError(f"{path}: the {s} split this model was trained on is gone; rebuild and retrain it")
    splits = {s: storage.local_file(path) for s, path in splits.items()}  # an S3 store's: cached copies
    target = ck["config"].get("target", "target")
    return evaluate_piece_values(model, splits["test"], splits["train"], target, max_rows, device), ck


@torch.no_grad()
def evaluate_piece_values(
    model: PieceValueNet,
    test: Path,
    train: Path,
    target: str = "target",
    max_rows: int = 0,
    device: str | torch.device = "cpu",
    batch_size: int = 2048,
) -> PieceValueReport:
    """The model on a split file (its first max_rows; 0: all): MSE / MAE / RMSE against `target`,
    the book-material baseline fitted on `train` (its first 200,000 rows at most), and the mean
    value of each piece type over all, and per game phase (sql/views/macros.sql game_phase)."""
    model.eval().to(device)
    output = model.output
    tab = _table(Path(test), max_rows)
    tab = tab.filter(pa.compute.is_valid(tab.column(target)))
    rep = PieceValueReport(rows=tab.num_rows, output=output, split=built_with(Path(test)).get("split", {}))
    if not tab.num_rows:
        return rep
    phase = np.array(tab.column("phase").to_pylist())
    by_game = "game_id" in tab.column_names
    game = np.unique(tab.column("game_id").to_numpy(), return_inverse=True)[1].ravel() if by_game else None
    games = int(game.max()) + 1 if by_game else 0
    game_sums, game_counts = np.zeros(games * 6), np.zeros(games * 6)  # (game, piece type), for the intervals
    preds = np.empty(tab.num_rows)
    sums = {p: np.zeros(6) for p in PHASES}
    counts = {p: np.zeros(6, dtype=np.int64) for p in PHASES}
    for batch, where in _batches(tab, target, batch_size):
        rows = piece_rows(batch.to(device))
        v = model.values(rows)
        s = model.total(rows, v)
        preds[where] = (torch.sigmoid(s) if output == "sigmoid" else s).cpu().numpy()
        ph = phase[where][rows.position.cpu().numpy()]
        pt, vv = rows.piece_type.cpu().numpy(), v.cpu().numpy().astype(np.float64)
        for p in PHASES:
            m = ph == p
            sums[p] += np.bincount(pt[m], weights=vv[m], minlength=6)
            counts[p] += np.bincount(pt[m], minlength=6)
        if by_game:
            key = game[where][rows.position.cpu().numpy()] * 6 + pt
            game_sums += np.bincount(key, weights=vv, minlength=games * 6)
            game_counts += np.bincount(key, minlength=games * 6)
    y = tab.column(target).to_numpy().astype(np.float64)
    err = preds - y
    rep.mse, rep.mae = float(np.mean(err**2)), float(np.mean(np.abs(err)))
    rep.rmse = math.sqrt(rep.mse)
    tr = pq.read_table(train, columns=["planes", target]).slice(0, 200_000)
    tr = tr.filter(pa.compute.is_valid(tr.column(target)))
    tr_planes, tr_y = _planes(tr), tr.column(target).to_numpy().astype(np.float64)
    rep.baseline_fit = fit_baseline(book_material(tr_planes), tr_y, output)
    weights = fit_linear(piece_count_differences(tr_planes), tr_y, output)  # P N B R Q, then the offset
    rep.linear_fit = {t: float(w) for t, w in zip(PIECE_TYPES[:5], weights[:5])}
    berr = _baseline(book_material(_planes(tab)), rep.baseline_fit, output) - y
    rep.baseline_mse, rep.baseline_mae = float(np.mean(berr**2)), float(np.mean(np.abs(berr)))
    rep.baseline_rmse = math.sqrt(rep.baseline_mse)
    total_s, total_n = sum(sums.values()), sum(counts.values())
    with np.errstate(invalid="ignore", divide="ignore"):
        avg = total_s / total_n
        rep.average = {t: float(avg[i]) for i, t in enumerate(PIECE_TYPES) if total_n[i]}
        rep.relative = {t: float(avg[i] / avg[0]) for i, t in enumerate(PIECE_TYPES) if total_n[i] and total_n[0]}
        for p in PHASES:
            a = sums[p] / counts[p]
            row = {t: float(a[i] / avg[0]) for i, t in enumerate(PIECE_TYPES) if counts[p][i] and total_n[0]}
            if counts[p][0]:
                row["pawn_raw"] = float(a[0])
            rep.by_phase[p] = row
    if by_game and total_n[0]:
        rep.intervals, rep.interval_games = value_intervals(game_sums, game_counts, rep.relative), games
    rep.counts = {p: {t: int(counts[p][i]) for i, t in enumerate(PIECE_TYPES)} for p in PHASES}
    rep.counts["positions"] = {p: int((phase == p).sum()) for p in PHASES}
    return rep


VALUE_RESAMPLES = 1000
"""Bootstrap draws of the piece values' intervals (each draw re-weights every game: 1,000 keep a
100,000-row test split's under a second)."""


def value_intervals(game_sums: np.ndarray, game_counts: np.ndarray, relative: dict, seed: int = 0) -> dict:
    """piece type -> (low, high) 95% interval of its mean value over the pawn's (pawn = 1), from
    each game's (game x 6 piece types) sums and counts of values: a seeded bootstrap of whole games
    (pipeline.research.intervals.ratio_draws), so a game's many near-identical positions count once."""
    draws = ratio_draws(game_sums.reshape(-1, 6), game_counts.reshape(-1, 6), VALUE_RESAMPLES, seed)
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = draws / draws[:, :1]
    return {t: percentile_interval(rel[:, i], relative[t]) for i, t in enumerate(PIECE_TYPES) if t in relative}
