"""bench/ops: the synchronisation counter counts hand-made code; ratios are to the transformer on the same data."""
import inspect
import os
import sys

import pytest
import torch
from conftest import REPO

sys.path[:0] = [os.path.join(REPO, "bench", "ops"), os.path.join(REPO, "bench")]
import count  # noqa: E402
import syncs  # noqa: E402


def line_of(function, text: str) -> int:
    """The line number of the first line of ``function`` that contains ``text``."""
    lines, start = inspect.getsourcelines(function)
    return start + next(i for i, line in enumerate(lines) if text in line)


def counted(function, *args):
    with syncs.SyncCounter() as counter:
        function(*args)
    return counter.events


def one_item_and_one_mask(x):
    total = x.sum().item()
    picked = x[x > 0]
    return total, picked


def test_one_item_and_one_boolean_mask_count_two_at_their_lines():
    events = counted(one_item_and_one_mask, torch.tensor([1.0, -2.0, 3.0]))
    assert [(e.operator, e.phase) for e in events] == [("aten::_local_scalar_dense", "forward"),
                                                       ("aten::index (bool mask)", "forward")]
    assert events[0].where.endswith(f":{line_of(one_item_and_one_mask, '.item()')} (one_item_and_one_mask)")
    assert events[1].where.endswith(f":{line_of(one_item_and_one_mask, 'x[x > 0]')} (one_item_and_one_mask)")
    assert syncs.own_events(events) == []  # a test's lines are not the package's


def masked_sum(x):
    return (x[x > 0] * 2).sum()


def test_the_backward_of_a_boolean_mask_is_counted_at_its_forward_line():
    x = torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
    events = counted(lambda: masked_sum(x).backward())
    assert [(e.operator, e.phase) for e in events] == [("aten::index (bool mask)", "forward"),
                                                       ("aten::index_put (bool mask)", "backward")]
    line = line_of(masked_sum, "x[x > 0]")
    assert all(e.where.endswith(f":{line} (masked_sum)") for e in events)
    assert x.grad.tolist() == [2.0, 0.0, 2.0]


def data_dependent_shapes(x, repeats):
    x.nonzero()
    torch.repeat_interleave(x, repeats)  # the output's size is the repeats' sum: read back
    torch.repeat_interleave(x, repeats, output_size=6)  # given: nothing to read
    torch.bincount(repeats)
    x.unique()
    x.tolist()
    bool(x.any())
    int(x[0])


def test_each_kind_of_synchronising_operator_is_counted_once():
    events = counted(data_dependent_shapes, torch.tensor([1, 0, 2]), torch.tensor([1, 2, 3]))
    assert [e.operator for e in events] == [
        "aten::nonzero", "aten::repeat_interleave (no output_size)", "aten::bincount", "aten::_unique2",
        "Tensor.tolist", "aten::_local_scalar_dense", "aten::_local_scalar_dense"]


def host_only(device_tensor):
    import torch.onnx.operators

    length, = torch.onnx.operators.shape_as_tensor(device_tensor)  # as fairseq's sinusoidal positions read a length
    device_tensor.view(length)
    steps = torch.arange(4)  # no device: a host tensor on a GPU too
    steps.sum().item()
    (steps * 2).tolist()
    torch.tensor([1, 2]).max().item()
    torch.arange(4, device=device_tensor.device).sum().item()  # on the device: counted


def test_values_of_host_tensors_are_not_counted():
    events = counted(host_only, torch.zeros(2))
    assert [e.operator for e in events] == ["aten::_local_scalar_dense"]
    assert events[0].where.endswith(f":{line_of(host_only, 'device=device_tensor.device')} (host_only)")


def test_lines_of_the_package_are_its_own_and_a_call_into_fairseq_names_the_line_that_led_there():
    from fairseq_syntax.core import structure

    events = counted(structure.validate_parents, torch.tensor([[-1, 0, 0]]))
    assert events and all(e.where.startswith("fairseq_syntax/core/structure.py:") for e in events)
    assert syncs.own_events(events) == events
    fairseq_line = os.path.join("site-packages", "fairseq", "utils.py")
    frames = [(os.path.join(syncs.TORCH, "_tensor.py"), 5, "item"), (fairseq_line, 10, "item"),
              (os.path.join(syncs.PACKAGE, "core", "model.py"), 73, "forward"), ("train.py", 1, "<module>")]
    assert syncs._where(frames) == ("fairseq/utils.py:10 (item)", "fairseq_syntax/core/model.py:73 (forward)")
    assert syncs._where(frames[2:]) == ("fairseq_syntax/core/model.py:73 (forward)", "")


def test_places_are_grouped_most_frequent_first():
    counter = syncs.SyncCounter()
    counter.events = [syncs.SyncEvent("aten::nonzero", "a.py:1 (f)", "", "forward"),
                      syncs.SyncEvent("aten::_local_scalar_dense", "b.py:2 (g)", "", "forward"),
                      syncs.SyncEvent("aten::_local_scalar_dense", "b.py:2 (g)", "", "forward")]
    assert [(p["where"], p["count"]) for p in counter.by_place()] == [("b.py:2 (g)", 2), ("a.py:1 (f)", 1)]


# --- the table
def record(system, form, size, aten_ops, syncs_, decode_syncs, decode_ops, baseline=False):
    return {"system": system, "form": form, "size": size, "baseline": baseline, "aten_ops": aten_ops,
            "syncs": syncs_, "own_syncs": 0, "sync_places": [], "decode_syncs": decode_syncs,
            "decode_own_syncs": 0, "decode_ops": decode_ops, "decode_sync_places": []}


def test_ratios_and_differences_are_to_the_transformer_on_the_same_form_and_size():
    rows = count.compared([
        record("transformer (preorder)", "preorder", "recipe", 1000, 9, 7.0, 300.0, baseline=True),
        record("transformer (preorder)", "preorder", "large", 2000, 12, 7.0, 500.0, baseline=True),
        record("transformer (sequence)", "sequence", "recipe", 800, 9, 7.0, 300.0, baseline=True),
        record("mask (preorder)", "preorder", "recipe", 1150, 7, 7.0, 330.0),
        record("mask (preorder)", "preorder", "large", 2100, 13, 9.0, 500.0),
        record("ldd (sequence)", "sequence", "recipe", 1000, 8, 7.0, 315.0),
    ])
    by = {(r["system"], r["size"]): r for r in rows}
    assert "aten_ops_ratio" not in by["transformer (preorder)", "recipe"]
    assert (by["mask (preorder)", "recipe"]["aten_ops_ratio"], by["mask (preorder)", "recipe"]["syncs_beyond"],
            by["mask (preorder)", "recipe"]["decode_ops_ratio"]) == (1.15, -2, 1.1)
    assert (by["mask (preorder)", "large"]["aten_ops_ratio"], by["mask (preorder)", "large"]["syncs_beyond"],
            by["mask (preorder)", "large"]["decode_syncs_beyond"]) == (1.05, 1, 2.0)
    assert (by["ldd (sequence)", "recipe"]["aten_ops_ratio"], by["ldd (sequence)", "recipe"]["syncs_beyond"]) == (
        1.25, -1)
    table = count.results_markdown(rows, {"words": 32, "max_tokens": 4096, "warmup": 2, "decode_sentences": 4,
                                          "command": "python3 bench/ops/count.py", "minutes": 1.0})
    assert "| mask (preorder) | preorder | large | 2100 | 1.05 | 13 | 1 | 0 | 500 | 1.00 | 9.00 | 2.00 | 0 |" in table
    command = next(i for i, line in enumerate(table) if line.startswith("Command: `python3 bench/ops/count.py`"))
    assert command > max(i for i, line in enumerate(table) if line.startswith("| "))  # below the table


def test_each_place_is_named_once_and_each_row_counts_its_places_by_name():
    a = {"where": "a.py:1 (f)", "via": "", "operator": "aten::nonzero", "phase": "forward"}
    b = {"where": "b.py:2 (g)", "via": "c.py:3 (h)", "operator": "aten::nonzero", "phase": "backward"}
    rows = [{"system": "s", "size": "recipe", "sync_places": [{**a, "count": 3}], "decode_sync_places": []},
            {"system": "t", "size": "large", "sync_places": [{**b, "count": 1}, {**a, "count": 2}],
             "decode_sync_places": [{**a, "count": None, "per_step": 1.5}]}]
    places, named = count.named_places(rows)
    assert places == {"p1": a, "p2": b}
    assert [(r["sync_places"], r["decode_sync_places"]) for r in named] == [({"p1": 3}, {}),
                                                                            ({"p2": 1, "p1": 2}, {"p1": 1.5})]
    lines = count.results_markdown(rows, {"words": 8, "max_tokens": 64, "warmup": 1, "decode_sentences": 2,
                                          "command": "c", "minutes": 1.0})
    assert lines[-8:] == ["- p1: `a.py:1 (f)` aten::nonzero",
                          "- p2: `b.py:2 (g)` via `c.py:3 (h)` aten::nonzero (backward)", "",
                          "Each system's places, and how many times per training step and per decoding step:", "",
                          "- **s** (recipe): p1 x3", "- **t** (large): p2 x1; p1 x2", "  - per decoding step: p1 x1.5"]


@pytest.mark.parametrize("size", ["recipe", "large", "tiny"])
def test_the_sizes_are_the_recipe_and_the_papers(size):
    settings = count.settings_for(size, count.parse_args(["--words", "16"]))
    assert (settings.model, settings.tiny, settings.lengths) == (size, size == "tiny", (16,))


# --- every method against fairseq's transformer
def method_cases():
    """(system, extra model options) of every non-baseline translation system and its variants."""
    import run

    from fairseq_syntax.methods import METHODS

    for method in METHODS:
        own = [s for s in method.systems if s.task == "translation" and not s.baseline]
        for system in own:
            yield pytest.param(system, (), id=system.name)
        if own:
            variants = list(method.cuda_variants) + [v.model_options for v in run.VARIANTS.get(own[0].arch, ())
                                                     if v.arch is None]
            for options in variants:
                yield pytest.param(own[0], tuple(options), id=own[0].name + "".join(options))


def counted_step(request, system, arch: str, extra: tuple, length: int = 2, more: int = 2):
    """Synchronisations of a training step and of each beam-search step of ``arch``, after a first step."""
    from conftest import TRANSLATION, build_on_cpu
    from fairseq import metrics

    data = request.getfixturevalue("translation_data")(system)
    task, model, criterion, sample, _ = build_on_cpu([data, *TRANSLATION, "--arch", arch, "--criterion",
                                                      "label_smoothed_cross_entropy", *extra])
    model.train()

    def step():
        loss, _, logging_output = criterion(model, sample)
        loss.backward()
        with metrics.aggregate() as aggregate:
            type(criterion).reduce_metrics([logging_output])
            aggregate.get_smoothed_values()

    step()
    with syncs.SyncCounter() as counter:
        step()
    model.eval()
    decodings = []
    with torch.no_grad():
        for tokens in (length, length + more):
            with syncs.SyncCounter() as decoding:
                count.decode(task, model, sample, tokens)
            decodings.append(decoding.events)
    per_step = [event for event in decodings[1] if event not in decodings[0] or
                decodings[1].count(event) > decodings[0].count(event)]
    return counter.events, per_step, (len(decodings[1]) - len(decodings[0])) / more


TRANSFORMER_STEPS: dict = {}


@pytest.mark.parametrize("system, extra", method_cases())
def test_no_method_adds_a_synchronisation_to_a_training_or_decoding_step(request, system, extra):
    """The host waits for the GPU at no line of the package, nor at more places than fairseq's transformer."""
    events, decode_events, per_decode_step = counted_step(request, system, system.tiny_arch,
                                                          (*system.model_args, *extra))
    data = request.getfixturevalue("translation_data")(system)
    if data not in TRANSFORMER_STEPS:  # fairseq's transformer on the same data, counted once per data directory
        TRANSFORMER_STEPS[data] = counted_step(request, system, "transformer_tiny", ())
    base_events, _, base_per_decode_step = TRANSFORMER_STEPS[data]
    own = [f"{e.operator} at {e.where} ({e.phase})" for e in syncs.own_events(events)]
    assert own == [], f"{system.name}{extra}: a training step synchronises at lines of the package: {own}"
    assert len(events) <= len(base_events), (
        f"{system.name}{extra}: {len(events)} synchronisations a training step, the transformer "
        f"{len(base_events)}: {sorted(set(events) - set(base_events))}")
    own = [f"{e.operator} at {e.where}" for e in syncs.own_events(decode_events)]
    assert own == [], f"{system.name}{extra}: each decoding step synchronises at lines of the package: {own}"
    assert per_decode_step <= base_per_decode_step
