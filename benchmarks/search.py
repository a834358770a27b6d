"""Search speed: what batching the frontier buys, against scoring leaf by leaf in the same process;
and what an MLP's numpy forward pass buys against torch's.

    python benchmarks/search.py [--checkpoint models/<model>/<run>/checkpoint.pt] [--positions 40] [--depth 2]
                                [--quiescence 0]

On the first STS positions (../shared/data/epd; random playouts without it), the same
alpha-beta search to a fixed depth, twice per evaluator: frontier children scored in one
evaluator call (ours), and the same evaluator called once per position (the baseline a plain
negamax has). Both must choose the same moves; the ratio is the batching gain. Prints nodes/s
(nodes = positions visited, frontier children included) for the traditional evaluation and,
with --checkpoint, for that network. No target yet: the figure that matters is the network's
ratio, which grows with the model's per-call overhead.

A checkpoint of an MLP over bitmap768 plays as numpy on the CPU (training.evaluator.SparseMLP);
it is timed against the same network through torch (the baseline), both must choose the same
moves, and each network's cost a node is given as a multiple of the traditional evaluation's
(what Lubeck's grid charges it). The traditional evaluation is also timed reading the boards
as the evaluators did before board_bits (the store's encoding, as board_arrays then built it
with ingest's planes_from_records): the lean encoding's gain, the same moves. Target: the numpy
MLP within 1.5x of the traditional evaluation's cost a node with 4 plies of captures
(`--quiescence 4`, as the grid plays).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import chess  # noqa: E402
import numpy as np  # noqa: E402

from pipeline.ingest.encoding import castling_bits, pack_planes, planes_from_records  # noqa: E402
from pipeline.play.search import AlphaBeta, MaterialEvaluator  # noqa: E402

STS = ROOT.parent / "shared" / "data" / "epd" / "STS1-STS15_LAN_v3.epd"


class OneByOne:
    """The evaluator called once per position: what a search without batching does."""

    def __init__(self, inner):
        self.inner = inner
        self.name = f"{inner.name} one by one"

    def evaluate(self, boards):
        return np.concatenate([np.asarray(self.inner.evaluate([b]), dtype=np.float64) for b in boards])


class ViaStoreEncoding(MaterialEvaluator):
    """The traditional evaluation reading the boards as the evaluators did before board_bits (the
    baseline of the lean encoding): python-chess's piece-type bitboards split by colour with
    ingest's planes_from_records, packed into the store's planes, castling bits beside them, then
    unpacked."""

    name = "material_pst via the store's encoding"

    def evaluate(self, boards):
        rec = np.array(
            [
                (
                    b.pawns,
                    b.knights,
                    b.bishops,
                    b.rooks,
                    b.queens,
                    b.kings,
                    b.occupied_co[chess.WHITE],
                    b.castling_rights,
                )
                for b in boards
            ],
            dtype=np.uint64,
        ).reshape(-1, 8)
        planes = pack_planes(planes_from_records(*rec[:, :7].T))
        castling_bits(rec[:, 7])  # part of the encoding's cost, as it was paid
        white = np.fromiter((b.turn for b in boards), dtype=bool, count=len(boards))
        return self.score_bits(np.unpackbits(planes, axis=1, bitorder="little"), white)


def positions(n: int) -> list[chess.Board]:
    if STS.exists():
        from pipeline.play.suites import load_epd

        return [p.board for p in load_epd(STS)[:n]]
    rng, out = random.Random(0), []
    while len(out) < n:
        b = chess.Board()
        for _ in range(rng.randrange(10, 40)):
            b.push(rng.choice(list(b.legal_moves)))
        if not b.is_game_over():
            out.append(b)
    return out


def run(evaluator, boards, depth: int, quiescence: int = 0) -> tuple[float, int, list]:
    start, nodes, moves = time.perf_counter(), 0, []
    for b in boards:
        r = AlphaBeta(evaluator, depth=depth, quiescence=quiescence).search(b)
        nodes += r.nodes
        moves.append(r.move)
    return time.perf_counter() - start, nodes, moves


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", help="a trained model's checkpoint.pt")
    ap.add_argument("--positions", type=int, default=40)
    ap.add_argument("--depth", type=int, default=2)
    ap.add_argument("--quiescence", type=int, default=0, help="plies of captures after the depth")
    args = ap.parse_args()
    boards = positions(args.positions)
    evaluators = [MaterialEvaluator()]
    if args.checkpoint:
        from training.evaluator import NetworkEvaluator

        evaluators.append(NetworkEvaluator(args.checkpoint))
        if evaluators[-1].sparse is not None:
            evaluators.append(NetworkEvaluator(args.checkpoint, sparse=False))
            evaluators[-1].name += " (torch)"
            evaluators[-2].name += " (numpy)"
    print(f"{len(boards)} positions, alpha-beta depth {args.depth}, {args.quiescence} plies of captures")
    rate, chosen, seconds = {}, {}, {}
    for ev in evaluators:
        t_ours, nodes, ours = run(ev, boards, args.depth, args.quiescence)
        t_base, _, base = run(OneByOne(ev), boards, args.depth, args.quiescence)
        same = sum(a == b for a, b in zip(ours, base))
        rate[ev.name], chosen[ev.name], seconds[ev.name] = nodes / t_ours, ours, t_ours
        print(
            f"{ev.name:>48}: batched {nodes / t_ours:9,.0f} nodes/s, one by one {nodes / t_base:9,.0f} nodes/s, "
            f"ratio {t_base / t_ours:.2f}x ({same}/{len(boards)} same moves)"
        )
    t_store, _, store = run(ViaStoreEncoding(), boards, args.depth, args.quiescence)
    lean = evaluators[0].name
    same = sum(a == b for a, b in zip(chosen[lean], store))
    label = "board_bits over the store's encoding"
    print(f"{label:>48}: {t_store / seconds[lean]:.2f}x ({same}/{len(boards)} same moves)")
    material = rate.pop(evaluators[0].name)
    for name, r in rate.items():
        print(f"{name:>48}: {material / r:.2f}x the traditional evaluation's cost a node")
    if len(evaluators) == 3:
        fast, slow = evaluators[1].name, evaluators[2].name
        same = sum(a == b for a, b in zip(chosen[fast], chosen[slow]))
        print(f"numpy over torch: {rate[fast] / rate[slow]:.2f}x ({same}/{len(boards)} same moves)")


if __name__ == "__main__":
    main()
