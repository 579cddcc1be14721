"""Which checkpoint a fairseq-train run kept, and where its patience stopped it, replayed from its validation curve.

fairseq 0.12 compares the same validation values (each rounded as its criterion logs it, e.g. ``nll_loss`` to 3
decimals, which the log prints) by two rules that differ on a tie:

* ``checkpoint_best.pt`` is written again whenever an epoch's value is **at least as good** as the best so far
  (``checkpoint_utils.save_checkpoint``: ``is_better(a, b) = a <= b``, or ``>=`` with
  ``--maximize-best-checkpoint-metric``; ``best`` is updated to the min first), so after a tie the checkpoint
  decoded is the **last** epoch of the tie (:func:`kept_epoch`);
* ``--patience`` counts the validations since the last **strict** improvement (``fairseq_cli.train.should_stop_early``:
  ``a < b``), so a tie does not restart the count, and training stops after ``patience`` validations without one
  (:func:`patience_stop`).

A run resumed before ``fairseq_syntax.core.early_stopping`` kept the count counted afresh on resume and could train
past the epoch where the uninterrupted run stopped; its log has those epochs too. Replaying the rule over the whole
curve gives the epoch where the protocol stops (:func:`patience_stop`), the epochs trained past it, and whether the
checkpoint kept differs from the one an uninterrupted run would have kept (:func:`kept_epoch` of the curve up to the
stop).

``curve``: ``[(epoch, value), ...]`` in epoch order, one value per epoch (``train_logs.parse_valid_curve``).
"""
from collections.abc import Sequence


def _at_least_as_good(value: float, best: float, maximize: bool) -> bool:
    return value >= best if maximize else value <= best


def _better(value: float, best: float, maximize: bool) -> bool:
    return value > best if maximize else value < best


def kept_epoch(curve: Sequence[Sequence[float]], maximize: bool = False) -> tuple[int, float] | None:
    """(epoch, value) of the checkpoint fairseq keeps as ``checkpoint_best.pt`` after ``curve``: the last epoch whose
    value is at least as good as every one before it (ties: the last tied epoch). None for an empty curve."""
    kept = None
    for epoch, value in curve:
        if kept is None or _at_least_as_good(value, kept[1], maximize):
            kept = (int(epoch), value)
    return kept


def patience_stop(curve: Sequence[Sequence[float]], patience: int, maximize: bool = False) -> int | None:
    """The epoch at which ``--patience patience`` stops training over ``curve`` (the first epoch that ends
    ``patience`` validations without a strict improvement), or None when the curve ends before it (or ``patience``
    is not positive: no early stopping)."""
    if patience <= 0:
        return None
    best, since = None, 0
    for epoch, value in curve:
        if best is None or _better(value, best, maximize):
            best, since = value, 0
        else:
            since += 1
            if since >= patience:
                return int(epoch)
    return None


def replay(curve: Sequence[Sequence[float]], patience: int, maximize: bool = False) -> dict:
    """The run as the protocol sees it: ``kept`` (epoch, value) of the checkpoint fairseq kept over every epoch the
    log holds, ``stop`` (:func:`patience_stop`, None if patience never stopped it), ``past_patience`` (the epochs the
    log holds after ``stop``: trained only because a resume counted patience afresh), ``protocol_epochs`` (the epochs
    up to the stop, or all) and ``protocol_kept`` (the checkpoint of those epochs; differs from ``kept`` only when an
    epoch past patience tied or beat the best)."""
    curve = [(int(epoch), value) for epoch, value in curve]
    stop = patience_stop(curve, patience, maximize)
    within = [point for point in curve if stop is None or point[0] <= stop]
    return {"kept": kept_epoch(curve, maximize), "stop": stop,
            "past_patience": [epoch for epoch, _ in curve if stop is not None and epoch > stop],
            "protocol_epochs": within[-1][0] if within else 0, "protocol_kept": kept_epoch(within, maximize)}
