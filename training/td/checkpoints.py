"""Checkpoints of a self-play line: the weights after a generation with the TDConfig (as a dict:
`TDConfig(**ck["config"])` reads it back), the encoder, the generation and the history."""

from __future__ import annotations

import dataclasses

import numpy as np

from pipeline.store.storage_paths import StorePath
from training.td.config import TDConfig

CHECKPOINT_VERSION = 1
ENCODER = {"name": "antisymmetric_bitboard", "version": 1}


def save_checkpoint(
    path: StorePath, params: np.ndarray, cfg: TDConfig, generation: int, history: list[dict], archive: str
):
    """The weights after `generation`, with the config, the encoder and the archive of its games
    (atomic: a killed write leaves the previous checkpoint)."""
    import torch

    from pipeline.store.store_files import atomic_path

    with atomic_path(path) as tmp:  # on S3: a local spool file, uploaded whole
        torch.save(
            {
                "version": CHECKPOINT_VERSION,
                "model": {"kind": cfg.model, "hidden": cfg.hidden, "params": torch.from_numpy(params.copy())},
                "optimizer": {"kind": "td", "learner": cfg.learner, "lam": cfg.lam, "lr": cfg.lr},
                "config": dataclasses.asdict(cfg),
                "encoder": dict(ENCODER),
                "generation": generation,
                "history": history,
                "archive": archive,
            },
            tmp,
        )


def load_checkpoint(path: StorePath | str) -> tuple[np.ndarray, TDConfig, dict]:
    from training import checkpoints

    ck = checkpoints.load_checkpoint(path)
    if ck.get("encoder") != ENCODER:
        raise ValueError(f"{path}: encoder {ck.get('encoder')} is not {ENCODER}")
    return ck["model"]["params"].numpy().astype(np.float64), TDConfig(**ck["config"]), ck
