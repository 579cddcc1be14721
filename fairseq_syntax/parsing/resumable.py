"""What every training loop here shares to survive being killed and to report its pace: SuPar's and benepar's loops
(``training``) and the POS tagger's (``tagger``), which must not import ``training`` (an import cycle through
``constituency``)."""
from __future__ import annotations

import random
import time

import torch

from fairseq_syntax.core.files import atomic_path


def checkpoint_path(path: str) -> str:
    """Where training keeps its last epoch's full state (model, optimiser, schedule, RNG, best score), so that the
    same command run again resumes after that epoch; ``path`` itself holds the best epoch's model."""
    return path + ".checkpoint"


def save_whole(value, path: str) -> None:
    """``torch.save`` through ``atomic_path``: a run killed while saving leaves the earlier file."""
    with atomic_path(path) as temporary:
        torch.save(value, temporary)


def rng_states() -> dict:
    return {"python_rng": random.getstate(), "torch_rng": torch.get_rng_state()}


def restore(state: dict, optimizer, scheduler) -> None:
    """The optimiser, schedule and random states of a checkpoint saved with :func:`rng_states`."""
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    random.setstate(state["python_rng"])
    torch.set_rng_state(state["torch_rng"])


class EpochClock:
    """Seconds per epoch and the time left, for one line of log per epoch (the batches have their own bar)."""

    def __init__(self, first_epoch: int, epochs: int):
        self.first_epoch, self.epochs, self.start = first_epoch, epochs, time.perf_counter()

    def line(self, epoch: int) -> str:
        done = epoch - self.first_epoch + 1
        per_epoch = (time.perf_counter() - self.start) / done
        return f"{per_epoch:.0f} s/epoch, ETA {(self.epochs - epoch) * per_epoch / 60:.1f} min"
