"""Issue 19's study: which networks beat the material rule on a small 3-class set, and by how much.

Loads a `sabatelli_3class` dataset's split files whole (tens of thousands of rows), trains one
variant single-threaded with early stopping on validation loss, and prints one JSON line: test
accuracy beside the majority class and the material rule (training.baselines' rule: win or loss
when material is at least 2 pawns apart), and the lead over material with its 95% interval,
paired and clustered by game (training.train.paired_lead). `--external FILE` scores the same
model on another file of rows (e.g. `--build-external`'s archives the set was not built from).
The rows come through the training loader (training.data.ParquetBatches), the material rule is
training.baselines' own (material_predictions) and the piece values are training.encoders'.

Its sweep loop stays here because most of its variants (inputs joined by +, a linear map of the
counts added to the logits, class weights, a-h mirroring on any input) are no preset of
training/models.py that `python -m training.train` could run; the two that are (`mlp_material`,
`mlp_counts`) run through the training loop as well. README, Training (the table's caption) says
which rows came from this script and which from `python -m training.train`.

    python scripts/material_study.py --data STORE/datasets/sabatelli_3class --inputs bits+counts \\
        --hidden 256,64 --weight-decay 0.01 --mirror-files --epochs 8 --patience 3 --batch 256
    python scripts/material_study.py --build-external STORE --exclude DEMO_STORE --out /tmp/ext.parquet
    python scripts/material_study.py --checkpoint RUN/checkpoint.pt --external /tmp/ext.parquet
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import pyarrow.parquet as pq
import torch
from torch import nn

from training.baselines import material_predictions
from training.data import LoaderConfig, ParquetBatches
from training.encoders import PIECE_VALUES, material_balance, oriented
from training.train import paired_lead

SIGNED_VALUES = PIECE_VALUES + tuple(-v for v in PIECE_VALUES)
"""The algebraic plane's value of each of the 12 planes (Sabatelli's algebraic input: Black's negative)."""


def load(path: str, limit: int = 0) -> dict:
    """A split file's rows, read by the training loader in file order, as oriented boards
    (B, 12, 8, 8), castling bits, targets and games."""
    rows = ParquetBatches(path, LoaderConfig(batch_size=65_536, shuffle=False), limit=limit)
    boards, castlings, ys = [], [], []
    for b in rows.epoch(0):
        board, castling, _ = oriented(b)
        boards.append(board)
        castlings.append(castling)
        ys.append(b.target.long())
    games = pq.read_table(path, columns=["game_id"]).column(0).to_numpy()[: rows.rows]
    return {"board": torch.cat(boards), "castling": torch.cat(castlings), "y": torch.cat(ys), "game": games}


def material_rule(board: torch.Tensor) -> torch.Tensor:
    """The material rule's class of each board (training.baselines, the sabatelli_3class rule)."""
    return torch.from_numpy(material_predictions("sabatelli_3class", material_balance(board).numpy()))


class Net(nn.Module):
    """An MLP over some of: the 768 bits, the 12 piece counts, the algebraic plane; `residual`
    adds a linear map of the counts to the logits."""

    def __init__(self, inputs: list[str], hidden: tuple[int, ...], dropout: float, residual: bool):
        super().__init__()
        self.inputs, self.residual = inputs, residual
        width = {"bits": 768, "counts": 12, "alg": 64}
        n, layers = sum(width[i] for i in inputs), []
        for h in hidden:
            layers += [nn.Linear(n, h), nn.ReLU()] + ([nn.Dropout(dropout)] if dropout else [])
            n = h
        self.net = nn.Sequential(*layers, nn.Linear(n, 3))
        self.lin = nn.Linear(12, 3) if residual else None

    def forward(self, board: torch.Tensor) -> torch.Tensor:
        counts = board.sum((2, 3))
        values = torch.tensor(SIGNED_VALUES, dtype=board.dtype)[None, :, None, None]
        parts = {
            "bits": lambda: board.flatten(1),
            "counts": lambda: counts,
            "alg": lambda: (board * values).sum(1).flatten(1) / 10,
        }
        out = self.net(torch.cat([parts[i]() for i in self.inputs], 1))
        return out + self.lin(counts) if self.lin is not None else out


def scores(model: nn.Module, rows: dict, majority: int) -> dict:
    with torch.no_grad():
        right = (model(rows["board"]).argmax(1) == rows["y"]).numpy()
    by_rule = (material_rule(rows["board"]) == rows["y"]).numpy()
    lead, half = paired_lead(right, by_rule, rows["game"])
    _, iid = paired_lead(right, by_rule)
    return {
        "rows": len(right),
        "games": int(len(np.unique(rows["game"]))),
        "accuracy": float(right.mean()),
        "majority": float((rows["y"] == majority).float().mean()),
        "material": float(by_rule.mean()),
        "material_lead": lead,
        "ci95_by_game": half,
        "ci95_by_row": iid,
    }


def run(a: argparse.Namespace) -> dict:
    torch.set_num_threads(1)
    tr, va, te = (load(f"{a.data}/{s}.parquet", a.train_limit if s == "train" else 0) for s in ("train", "val", "test"))
    torch.manual_seed(a.seed)
    model = Net(a.inputs.split("+"), tuple(int(x) for x in a.hidden.split(",") if x), a.dropout, a.residual)
    opt = (
        torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=a.weight_decay)
        if a.weight_decay
        else torch.optim.Adam(model.parameters(), lr=a.lr)
    )
    counts = torch.bincount(tr["y"], minlength=3).float()
    loss_fn = nn.CrossEntropyLoss(weight=counts.sum() / (3 * counts) if a.class_weight else None)
    best, best_state, best_epoch, bad, history, t0 = float("inf"), None, -1, 0, [], time.time()
    for epoch in range(a.epochs):
        model.train()
        g = torch.Generator().manual_seed(a.seed * 100 + epoch)
        perm = torch.randperm(len(tr["y"]), generator=g)
        for i in range(0, len(perm), a.batch):
            idx = perm[i : i + a.batch]
            x = tr["board"][idx]
            if a.mirror_files:  # a <-> h on half of the rows without castling rights
                f = (tr["castling"][idx] == 0) & (torch.rand(len(idx), generator=g) < 0.5)
                x = torch.where(f[:, None, None, None], x.flip(3), x)
            loss = loss_fn(model(x), tr["y"][idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            out = model(va["board"])
            val_loss = nn.functional.cross_entropy(out, va["y"]).item()
        history.append([epoch, round(val_loss, 4), round((out.argmax(1) == va["y"]).float().mean().item(), 4)])
        if val_loss < best:
            best, best_state, best_epoch, bad = (
                val_loss,
                {k: v.clone() for k, v in model.state_dict().items()},
                epoch,
                0,
            )
        else:
            bad += 1
            if bad >= a.patience:
                break
    model.load_state_dict(best_state)
    model.eval()
    majority = int(torch.bincount(tr["y"]).argmax())
    out = {"args": vars(a), "train_rows": len(tr["y"]), "best_epoch": best_epoch, "history": history}
    out["test"] = scores(model, te, majority)
    if a.external:
        out["external"] = scores(model, load(a.external), majority)
    out["seconds"] = round(time.time() - t0, 1)
    return out


def build_external(store: str, exclude: str, out: str) -> int:
    """Static-labelled 3-class rows (as sabatelli_3class: both players over 2000, side to move's
    view) of the store's archives other than the demo's (ficsgamesdb_2024*), one per distinct
    position, none of the positions of `exclude`'s train and val splits."""
    from pipeline.store import duck
    from pipeline.store.store import Store

    seen = [f"{exclude}/datasets/sabatelli_3class/{s}.parquet" for s in ("train", "val")]
    with duck.memory_connection(Store(store)) as con:
        con.execute("CREATE TEMP TABLE seen AS SELECT position_key FROM read_parquet(?)", [seen])
        t = con.sql(
            "SELECT *, sabatelli_class3(score) AS target "
            "FROM sabatelli_positions(2000, 'static', 0, '', 'side_to_move') "
            "WHERE score IS NOT NULL AND position_key NOT IN (SELECT position_key FROM seen) "
            "AND game_id IN (SELECT game_id FROM games WHERE archive NOT LIKE 'ficsgamesdb_2024%') "
            "QUALIFY row_number() OVER (PARTITION BY position_key ORDER BY game_id, ply) = 1 ORDER BY game_id, ply"
        ).arrow()
        t = t.read_all() if hasattr(t, "read_all") else t
    pq.write_table(t, out)
    return t.num_rows


def score_checkpoint(checkpoint: str, path: str) -> dict:
    """A training run's model (its best epoch) scored on a file of 3-class rows, with its leads
    over both baselines (the majority class: draw) and their intervals clustered by game."""
    from training.checkpoints import evaluate, load_checkpoint
    from training.data import LoaderConfig, ParquetBatches
    from training.encoders import get_encoder
    from training.models import PRESETS, build_model
    from training.train import baseline_leads

    torch.set_num_threads(1)
    ck = load_checkpoint(checkpoint, map_location="cpu")
    encoder = get_encoder(ck["encoder"]["name"])
    model = build_model(PRESETS[ck["config"]["model"]], encoder.shape, 3)
    model.load_state_dict(ck["best_model"])
    rows = ParquetBatches(path, LoaderConfig(batch_size=4096, shuffle=False))
    cpu = torch.device("cpu")
    scored: dict = {}  # each row's target, prediction and material, from the same pass
    out = {"accuracy": evaluate(model, rows, encoder, cpu, 3, 0.0, False, scored)["accuracy"], "rows": rows.rows}
    games = pq.read_table(path, columns=["game_id"]).column(0).to_numpy()
    return out | baseline_leads(scored, "sabatelli_3class", 1, games)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", help="a sabatelli_3class dataset folder (train/val/test.parquet)")
    p.add_argument("--external", default="", help="another file of 3-class rows to score the model on")
    p.add_argument("--inputs", default="bits", help="bits, counts, alg, joined by + (default bits)")
    p.add_argument("--hidden", default="1048,500,50", help="hidden widths, comma-separated (empty: linear)")
    p.add_argument("--dropout", type=float, default=0.2)
    p.add_argument("--residual", action="store_true", help="add a linear map of the counts to the logits")
    p.add_argument("--weight-decay", type=float, default=0.0, help="AdamW's (0: Adam)")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--mirror-files", action="store_true", help="a-h mirroring of rows without castling rights")
    p.add_argument("--class-weight", action="store_true", help="weigh classes by their inverse frequency")
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--patience", type=int, default=2)
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--train-limit", type=int, default=0, help="first rows of train only (0: all)")
    p.add_argument("--build-external", metavar="STORE", help="write --out from STORE's other archives, then stop")
    p.add_argument("--exclude", metavar="STORE", help="with --build-external: the store whose train/val to leave out")
    p.add_argument("--out", help="with --build-external: the Parquet file to write")
    p.add_argument("--checkpoint", help="score this training run's checkpoint on --external, then stop")
    a = p.parse_args()
    if a.checkpoint:
        if not a.external:
            p.error("--checkpoint needs --external FILE")
        print(json.dumps(score_checkpoint(a.checkpoint, a.external)))
        return
    if a.build_external:
        if not (a.exclude and a.out):
            p.error("--build-external needs --exclude STORE and --out FILE")
        print(f"{build_external(a.build_external, a.exclude, a.out):,} rows in {a.out}")
        return
    if not a.data:
        p.error("--data DATASET_FOLDER is required")
    print(json.dumps(run(a)))


if __name__ == "__main__":
    main()
