"""Early stopping (``--patience``) that survives a resume.

fairseq keeps its count of validations without improvement (``best``, ``num_runs`` of
``fairseq_cli.train.should_stop_early``) in no checkpoint, so a resumed run counts afresh and may train up to
``--patience`` epochs longer and pick a later best checkpoint. :func:`make_patience_resumable` saves the count in
every checkpoint (``extra_state["early_stopping"] = {"best": ..., "num_runs": ...}``) and restores it on resume,
when fairseq restores its best value (not with ``--reset-optimizer``, ``--reset-meters`` or
``--finetune-from-model``). A checkpoint without it resumes as in fairseq, and the log says so."""
import logging
import sys
from types import ModuleType
from typing import Optional

from fairseq import checkpoint_utils
from fairseq.trainer import Trainer

logger = logging.getLogger(__name__)

KEY = "early_stopping"


def running_train_module() -> Optional[ModuleType]:
    """The module of a running ``fairseq-train``: ``fairseq_cli.train`` (the console script's, or imported by
    ``fairseq-hydra-train``), or the main module of ``python -m fairseq_cli.train``; None outside training."""
    for name in ("__main__", "fairseq_cli.train"):
        module = sys.modules.get(name)
        spec = getattr(module, "__spec__", None)
        if spec is not None and spec.name == "fairseq_cli.train" and hasattr(module, "should_stop_early"):
            return module
    return None


def patience_state() -> Optional[dict]:
    """``{"best": ..., "num_runs": ...}`` of the running training's early stopping, or None before its first
    validation (or outside training)."""
    module = running_train_module()
    counter = getattr(module, "should_stop_early", None)
    if getattr(counter, "best", None) is None:
        return None
    return {"best": counter.best, "num_runs": getattr(counter, "num_runs", 0)}


def restore_patience(state: dict) -> None:
    module = running_train_module()
    if module is not None:
        module.should_stop_early.best = state["best"]
        module.should_stop_early.num_runs = state["num_runs"]


def _keeping_patience(save_checkpoint):
    def save(self, filename, extra_state):
        state = patience_state()
        if state is not None:
            extra_state = {**extra_state, KEY: state}
        return save_checkpoint(self, filename, extra_state)

    save.keeps_patience = True
    return save


def _restoring_patience(load_checkpoint):
    def load(cfg, trainer, **passthrough_args):
        extra_state, epoch_itr = load_checkpoint(cfg, trainer, **passthrough_args)
        resets = cfg.reset_optimizer or cfg.reset_meters or cfg.finetune_from_model is not None
        if extra_state is not None and not resets and getattr(cfg, "patience", 0) > 0:
            state = extra_state.get(KEY)
            if state is not None:
                restore_patience(state)
                logger.info(f"early stopping resumes its count: best {state['best']}, "
                            f"{state['num_runs']} validation(s) without improvement since")
            else:
                logger.warning("the checkpoint keeps no early-stopping count (written before it was kept): "
                               f"--patience {cfg.patience} counts afresh from the next validation")
        return extra_state, epoch_itr

    return load


def make_patience_resumable() -> None:
    """Keep fairseq's early-stopping count in its checkpoints and put it back on resume (once per process)."""
    if getattr(Trainer.save_checkpoint, "keeps_patience", False):
        return
    Trainer.save_checkpoint = _keeping_patience(Trainer.save_checkpoint)
    checkpoint_utils.load_checkpoint = _restoring_patience(checkpoint_utils.load_checkpoint)
