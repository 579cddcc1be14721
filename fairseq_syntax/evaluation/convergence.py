"""Which checkpoint a fairseq-train run kept, and where its patience stopped it, replayed from its validation curve.

fairseq 0.12 compares the logged (rounded) validation values by two rules that differ on a tie:

* ``checkpoint_best.pt`` is written whenever an epoch is **at least as good** as the best so far (``a <= b``, or
  ``>=`` with ``--maximize-best-checkpoint-metric``), so after a tie the **last** tied epoch is kept
  (:func:`kept_epoch`);
* ``--patience`` counts validations since the last **strict** improvement (``a < b``) and stops after ``patience``
  without one (:func:`patience_stop`).

A log may hold epochs past the stop (patience counted afresh on a resume); :func:`replay` gives the stop, those
epochs, and the checkpoint an uninterrupted run would have kept. ``curve``: ``[(epoch, value), ...]`` in epoch order."""
from collections.abc import Sequence


def kept_epoch(curve: Sequence[Sequence[float]], maximize: bool = False) -> tuple[int, float] | None:
    """(epoch, value) of the checkpoint fairseq keeps as ``checkpoint_best.pt`` after ``curve``: the last epoch whose
    value is at least as good as every one before it (ties: the last tied epoch). None for an empty curve."""
    kept = None
    for epoch, value in curve:
        if kept is None or (value >= kept[1] if maximize else value <= kept[1]):  # at least as good
            kept = (int(epoch), value)
    return kept


def patience_stop(curve: Sequence[Sequence[float]], patience: int, maximize: bool = False) -> int | None:
    """The epoch at which ``--patience patience`` stops training over ``curve`` (the first that ends ``patience``
    validations without a strict improvement), or None when the curve ends first or ``patience`` <= 0."""
    if patience <= 0:
        return None
    best, since = None, 0
    for epoch, value in curve:
        if best is None or (value > best if maximize else value < best):  # strictly better
            best, since = value, 0
        else:
            since += 1
            if since >= patience:
                return int(epoch)
    return None


def replay(curve: Sequence[Sequence[float]], patience: int, maximize: bool = False) -> dict:
    """``kept`` (epoch, value) of the checkpoint kept over the whole log, ``stop`` (:func:`patience_stop`),
    ``past_patience`` (the epochs after ``stop``), ``protocol_epochs`` (up to the stop, or all) and ``protocol_kept``
    (the checkpoint of those epochs)."""
    curve = [(int(epoch), value) for epoch, value in curve]
    stop = patience_stop(curve, patience, maximize)
    within = [point for point in curve if stop is None or point[0] <= stop]
    return {"kept": kept_epoch(curve, maximize), "stop": stop,
            "past_patience": [epoch for epoch, _ in curve if stop is not None and epoch > stop],
            "protocol_epochs": within[-1][0] if within else 0, "protocol_kept": kept_epoch(within, maximize)}
