"""What every training loop here shares to survive being killed and to report its pace: SuPar's and benepar's loops
(``training``) and the POS tagger's (``tagger``), which must not import ``training`` (an import cycle through
``constituency``)."""
from __future__ import annotations

import time


def checkpoint_path(path: str) -> str:
    """Where training keeps its last epoch's full state (model, optimiser, schedule, RNG, best score), so that the
    same command run again resumes after that epoch; ``path`` itself holds the best epoch's model."""
    return path + ".checkpoint"


class EpochClock:
    """Seconds per epoch and the time left, for one line of log per epoch (the batches have their own bar)."""

    def __init__(self, first_epoch: int, epochs: int):
        self.first_epoch, self.epochs, self.start = first_epoch, epochs, time.perf_counter()

    def line(self, epoch: int) -> str:
        done = epoch - self.first_epoch + 1
        per_epoch = (time.perf_counter() - self.start) / done
        return f"{per_epoch:.0f} s/epoch, ETA {(self.epochs - epoch) * per_epoch / 60:.1f} min"
