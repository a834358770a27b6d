"""Issue 19's study: what the labels of positions that are not quiet teach an evaluation.

The traditional evaluation (pipeline.play.search.MaterialEvaluator: material and Michniewski's
piece-square tables, tapered by phase) is a linear function of the 768 piece bits. This script
fits the same function to Stockfish's labels (Texel's tuning: the win probability of the
label, 1 / (1 + 10^(-cp / 400)), by mean squared error, starting from Michniewski's tables), once
on every train position of a `sabatelli_regression` dataset and once on its quiet positions
only (the side to move not in check and without a capture), and reports for each: the test
error beside the traditional evaluation's, the pieces' average values, and a match against the
traditional evaluation in the same search (pipeline.play.search.AlphaBeta at a fixed depth, with
`--quiescence` plies of captures beyond it, each of Sabatelli's openings twice, colours
swapped). The learnt tables play through MaterialEvaluator itself, so both sides search at the
same cost.

Tables are fitted in White's point of view (a Black-to-move row's label turned to White's),
Black's tied to White's as the traditional ones are (mirrored, negated), with one tempo term for
the side to move that the search does not need (every leaf of a fixed-depth search has the same
side to move).

    python scripts/quiet_study.py --data STORE/datasets/sabatelli_regression --depth 2 --openings 20
"""

from __future__ import annotations

import argparse
import json
import time

import chess
import numpy as np
import pyarrow.parquet as pq
import torch

from pipeline.ingest.encoding import fens_from_columns
from pipeline.play.matches import MatchSpec, match_result, pairings, play_pairing, wilson_interval
from pipeline.play.openings import sabatelli_openings
from pipeline.play.search import PHASE_UNITS, TRADITIONAL_TABLES, AlphaBeta, MaterialEvaluator, SearchPlayer

WP_SCALE = 400.0
"""The dataset's win_prob scale (pipeline.datasets.datasets.SabatelliRegressionParams.wp_scale)."""
PIECES = "PNBRQ"


def quiet(board: chess.Board) -> bool:
    """Not in check, and no capture to make: a position whose material is not about to change."""
    return not board.is_check() and not any(board.generate_legal_captures())


def load(path: str) -> dict[str, np.ndarray]:
    """A split file's rows: White-oriented piece bits (N, 768) uint8, White to move, the label's
    win probability from White's point of view, and whether each position is quiet."""
    t = pq.read_table(path, columns=["planes", "side_to_move", "castling", "ep_square", "win_prob"]).to_pydict()
    planes = np.frombuffer(b"".join(t["planes"]), dtype=np.uint8).reshape(-1, 96)
    white = np.array([s == "w" for s in t["side_to_move"]])
    wp = np.array(t["win_prob"], dtype=np.float32)
    fens = fens_from_columns(t["planes"], t["side_to_move"], t["castling"], t["ep_square"])
    return {
        "bits": np.unpackbits(planes, axis=1, bitorder="little"),
        "white": white,
        "y": np.where(white, wp, 1.0 - wp),
        "quiet": np.array([quiet(chess.Board(f)) for f in fens]),
    }


def subset(rows: dict[str, np.ndarray], keep: np.ndarray) -> dict[str, np.ndarray]:
    return {k: v[keep] for k, v in rows.items()}


def both_colours(white: torch.Tensor) -> torch.Tensor:
    """(384,) White's tables (P N B R Q K x 64 squares) -> (768,) with Black's: each of White's
    negated on the square mirrored rank-wise, as the traditional tables are (a position and its
    colour-mirror score the same for the side to move)."""
    black = -white.reshape(6, 8, 8).flip(1).reshape(384)
    return torch.cat([white, black])


class Tapered(torch.nn.Module):
    """MaterialEvaluator's function with White's tables as parameters (Black's mirror them), plus
    a tempo term."""

    def __init__(self) -> None:
        super().__init__()
        self.white_middle = torch.nn.Parameter(torch.from_numpy(TRADITIONAL_TABLES[0][:384].copy()))
        self.white_end = torch.nn.Parameter(torch.from_numpy(TRADITIONAL_TABLES[1][:384].copy()))
        self.tempo = torch.nn.Parameter(torch.zeros(()))
        self.register_buffer("phase_units", torch.from_numpy(PHASE_UNITS))

    @property
    def middle(self) -> torch.Tensor:
        return both_colours(self.white_middle)

    @property
    def end(self) -> torch.Tensor:
        return both_colours(self.white_end)

    def forward(self, bits: torch.Tensor, white: torch.Tensor) -> torch.Tensor:
        """White's centipawns."""
        phase = torch.clamp(bits.reshape(-1, 12, 64).sum(2) @ self.phase_units, max=24.0) / 24.0
        cp = phase * (bits @ self.middle) + (1 - phase) * (bits @ self.end)
        return cp + torch.where(white, self.tempo, -self.tempo)


def tensors(rows: dict[str, np.ndarray]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return torch.from_numpy(rows["bits"]).float(), torch.from_numpy(rows["white"]), torch.from_numpy(rows["y"])


def error(model: Tapered, rows: dict[str, np.ndarray]) -> float:
    """Mean squared error of the win probability."""
    bits, white, y = tensors(rows)
    with torch.no_grad():
        p = torch.sigmoid(model(bits, white) * (np.log(10) / WP_SCALE))
    return float(((p - y) ** 2).mean())


def fit(train: dict, val: dict, epochs: int, lr: float, batch: int, seed: int) -> tuple[Tapered, list[dict]]:
    """Adam on the win probability's squared error; the epoch with the lowest validation error kept."""
    torch.manual_seed(seed)
    model = Tapered()
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    bits, white, y = tensors(train)
    best, state, history = error(model, val), {k: v.clone() for k, v in model.state_dict().items()}, []
    for epoch in range(epochs):
        order = torch.randperm(len(y))
        for i in range(0, len(y), batch):
            idx = order[i : i + batch]
            p = torch.sigmoid(model(bits[idx], white[idx]) * (np.log(10) / WP_SCALE))
            loss = ((p - y[idx]) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        v = error(model, val)
        history.append({"epoch": epoch, "val": round(v, 5)})
        if v < best:
            best, state = v, {k: t.clone() for k, t in model.state_dict().items()}
    model.load_state_dict(state)
    return model, history


def piece_values(model: Tapered) -> dict[str, dict[str, int]]:
    """Each piece's average over its 64 squares (White's tables), middlegame and endgame."""
    out = {}
    for phase, table in (("middlegame", model.middle), ("endgame", model.end)):
        planes = table.detach().numpy().reshape(12, 64)
        out[phase] = {p: int(round(float(planes[i].mean()))) for i, p in enumerate(PIECES)}
    return out


def match(model: Tapered, depth: int, openings: int, quiescence: int = 0) -> dict:
    """The learnt tables against the traditional ones, both AlphaBeta at `depth` (with
    `quiescence` plies of captures beyond it); unfinished games (200 plies) count half."""
    middle, end = model.middle.detach().numpy(), model.end.detach().numpy()
    spec = MatchSpec(
        f"learnt tables vs traditional, depth {depth}" + (f", {quiescence} plies of captures" if quiescence else ""),
        lambda: SearchPlayer(
            AlphaBeta(MaterialEvaluator(middle, end, "learnt_pst"), depth=depth, quiescence=quiescence)
        ),
        lambda: SearchPlayer(AlphaBeta(MaterialEvaluator(), depth=depth, quiescence=quiescence)),
        max_plies=200,
    )
    ops = sabatelli_openings()[:openings]
    result = match_result(spec, [play_pairing(spec, ops[i], i, c) for i, c in pairings(ops)])
    pts, w, d, lost, u = result.score(result.a)
    n = len(result.games)
    score = (pts + u / 2) / n
    lo, hi = wilson_interval(pts + u / 2, n)
    return {
        "depth": depth,
        "quiescence": quiescence,
        "games": n,
        "won": w,
        "drawn": d,
        "lost": lost,
        "unfinished": u,
        "score": score,
        "ci95": [lo, hi],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True, help="a sabatelli_regression dataset folder (train/val/test.parquet)")
    p.add_argument("--epochs", type=int, default=60)
    p.add_argument("--lr", type=float, default=2.0, help="Adam's step, in centipawns (default 2)")
    p.add_argument("--batch", type=int, default=1024)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--depth", type=int, default=2, help="search depth of the match (0: no match)")
    p.add_argument("--openings", type=int, default=20, help="Sabatelli's openings played, each twice")
    p.add_argument("--quiescence", type=int, default=0, help="plies of captures both sides search beyond the depth")
    a = p.parse_args()
    if a.quiescence < 0:  # before the fit, not minutes later at the match
        p.error(f"--quiescence is 0 (none) or plies of captures, got {a.quiescence}")
    torch.set_num_threads(1)
    t0 = time.monotonic()
    train, val, test = (load(f"{a.data}/{s}.parquet") for s in ("train", "val", "test"))
    quiet_test = subset(test, test["quiet"])
    out: dict = {
        "rows": {"train": len(train["y"]), "quiet_train": int(train["quiet"].sum()), "test": len(test["y"])},
        "quiet_test_rows": len(quiet_test["y"]),
        "traditional": {"test_mse": error(Tapered(), test), "quiet_test_mse": error(Tapered(), quiet_test)},
    }
    for name, keep in (("all_positions", np.ones(len(train["y"]), dtype=bool)), ("quiet_positions", train["quiet"])):
        model, history = fit(subset(train, keep), subset(val, val["quiet"]) if name == "quiet_positions" else val,
                             a.epochs, a.lr, a.batch, a.seed)  # fmt: skip
        out[name] = {
            "test_mse": error(model, test),
            "quiet_test_mse": error(model, quiet_test),
            "pieces": piece_values(model),
            "tempo_cp": float(model.tempo.detach()),
            "best_epoch": min(history, key=lambda h: h["val"])["epoch"] if history else -1,
        }
        if a.depth:
            out[name]["match"] = match(model, a.depth, a.openings, a.quiescence)
        print(json.dumps({name: out[name]}), flush=True)
    out["seconds"] = round(time.monotonic() - t0, 1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
