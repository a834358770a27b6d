"""Hui's representation study: the same small network trained on hui_checkmate (who gets mated)
with each of the five representations, several seeds each (through training.train)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from training.td.config import RepresentationConfig

REPRESENTATIONS = {
    "mailbox": "mailbox64",
    "piece list": "piece_list",
    "compressed piece list": "compressed_piece_list",
    "bitboard": "bitmap768",
    "antisymmetric bitboard": "antisymmetric_bitboard",
}
"""Hui's five representations and the encoders (training/encoders.py) that compute them."""


def compare_representations(store_root: str | Path, cfg: RepresentationConfig, log=print) -> list[dict]:
    """Train hui_checkmate's 2-class network with each representation and seed; one row per
    representation: mean and standard deviation of the test accuracy over the seeds."""
    from training.train import TrainConfig, train

    rows = []
    for label, encoder in REPRESENTATIONS.items():
        accs = []
        for seed in range(cfg.seeds):
            out = Path(store_root) / "models" / "hui_representations" / f"{encoder}-seed{seed}"
            result = train(
                TrainConfig(
                    store=str(store_root),
                    dataset="hui_checkmate",
                    model="lubeck",
                    encoder=encoder,
                    hidden=(cfg.hidden,),
                    epochs=cfg.epochs,
                    max_train_rows=cfg.max_train_rows,
                    max_minutes=cfg.max_minutes,
                    seed=seed,
                    device="cpu",
                    out=str(out),
                ),
                log=log,
            )
            accs.append(float(result.test["accuracy"]))
        rows.append(
            {
                "representation": label,
                "encoder": encoder,
                "seeds": cfg.seeds,
                "mean_accuracy": float(np.mean(accs)),
                "std_accuracy": float(np.std(accs, ddof=1)) if len(accs) > 1 else 0.0,
                "accuracies": accs,
            }
        )
    return rows
