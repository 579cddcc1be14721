"""``python3 bench/ops/count.py``: per training step and per beam-search step, the operators each system dispatches
and the host-device synchronisations it would make on a GPU, counted on a CPU against fairseq's ``transformer`` on
the same input form, at the Multi30k recipe's size (3+3 layers, d=256) and the papers' (6+6, d=512). Writes
``RESULTS.md`` and ``RESULTS.json`` to ``--out`` (default: this folder).

Systems, data and batches are ``bench/run.py``'s (without its variants); each system and size runs in a forked
process (:func:`count_step`); what is counted, as RESULTS.md states it: :func:`results_markdown`. A decoding step's
counts are the difference between beam searches held at ``L`` and ``L + --decode-steps`` output tokens, over
``--decode-steps``."""
import argparse
import os
import sys
import tempfile
import time
from argparse import Namespace
from collections.abc import Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, BENCH)
import measure  # noqa: E402
import report  # noqa: E402
import run  # noqa: E402
import syncs  # noqa: E402
from fairseq_syntax.evaluation import tables  # noqa: E402

SIZES = tuple(run.recipe.MODEL_SIZES)  # ("recipe", "large")
BEAM = run.GENERATE_BEAM


def decode(task, model, sample, length: int):
    """One ``task.inference_step`` (beam 5) holding every hypothesis at ``length`` tokens before EOS."""
    generator = task.build_generator([model], Namespace(beam=BEAM, max_len_a=0, max_len_b=length, min_len=length))
    return task.inference_step(generator, [model], sample)


def count_step(spec: dict) -> dict:
    """In a forked child: warm-up steps, one profiled step, one counted step, two decodings (module docstring)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    task, trainer, collate = measure.build_trainer(spec["data"], spec["train_args"])
    samples = [collate(ids) for ids in spec["batches"]]  # collated before the steps, as the data loader does
    warmup = spec["warmup"]
    for sample in samples[:warmup]:
        trainer.train_step([sample])
    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        trainer.train_step([samples[warmup]])
    aten_ops = sum(a.count for a in profiler.key_averages() if a.key.startswith("aten::"))
    with syncs.SyncCounter() as counter:
        trainer.train_step([samples[warmup + 1]])
    step = {"aten_ops": aten_ops, "syncs": len(counter.events), "own_syncs": len(syncs.own_events(counter.events)),
            "sync_places": counter.by_place()}

    model = trainer.model
    model.eval()
    sample = collate(spec["batches"][warmup + 1][:spec["decode_sentences"]])
    length, extra = spec["decode_length"], spec["decode_steps"]
    decoded = []
    with torch.no_grad():
        decode(task, model, sample, length)  # warm-up
        for steps in (length, length + extra):
            with syncs.SyncCounter() as counter:
                hypotheses = decode(task, model, sample, steps)
            if any(len(beams[0]["tokens"]) != steps + 1 for beams in hypotheses):
                raise RuntimeError(f"decoding held at {steps} tokens gave other lengths")
            decoded.append(counter)
    short, long = decoded
    step["decode_syncs"] = round((len(long.events) - len(short.events)) / extra, 2)
    own = [len(syncs.own_events(counter.events)) for counter in decoded]
    step["decode_own_syncs"] = round((own[1] - own[0]) / extra, 2)
    step["decode_ops"] = round((sum(long.operators.values()) - sum(short.operators.values())) / extra, 1)
    step["decode_sync_places"] = _per_step_places(short, long, extra)
    return step


def _per_step_places(short, long, extra: int) -> list[dict]:
    """The places whose count grows with the decoding length, with what each step adds there."""
    key = lambda place: (place["where"], place["via"], place["operator"], place["phase"])  # noqa: E731
    before = {key(p): p["count"] for p in short.by_place()}
    places = []
    for place in long.by_place():
        added = place["count"] - before.get(key(place), 0)
        if added > 0:
            places.append({**place, "count": None, "per_step": round(added / extra, 2)})
    return places


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=HERE, help="where RESULTS.md and RESULTS.json go (default: bench/ops)")
    parser.add_argument("--words", type=int, default=32, help="source length of the synthetic sentences")
    parser.add_argument("--max-tokens", type=int, default=1024,
                        help="fairseq's --max-tokens of the batches (the counts hardly depend on it)")
    parser.add_argument("--sizes", default=",".join(SIZES), help=f"model sizes, comma-separated: {', '.join(SIZES)}; "
                        "or tiny (the *_tiny archs)")
    parser.add_argument("--warmup", type=int, default=2, help="training steps before the counted ones")
    parser.add_argument("--decode-sentences", type=int, default=4, help="sentences of the decoded batch")
    parser.add_argument("--decode-length", type=int, default=4, help="output tokens of the shorter decoding")
    parser.add_argument("--decode-steps", type=int, default=4, help="output tokens the longer decoding adds")
    parser.add_argument("--systems", help="only these systems (comma-separated labels, as printed); default: all")
    parser.add_argument("--work", help="keep the synthetic data here (default: a temporary folder)")
    return parser.parse_args(argv)


def settings_for(size: str, args: argparse.Namespace) -> run.Settings:
    tiny = size == "tiny"
    return run.Settings(lengths=(args.words,), repeats=1, warmup=args.warmup, updates=2, max_tokens=args.max_tokens,
                        speed_length=None, preprocess_sentences=0, tiny=tiny,
                        model_size="recipe" if tiny else size, generate_batches=0)


def compared(records: list[dict]) -> list[dict]:
    """Each record with its differences to the transformer on its form and size (None for that transformer)."""
    rows = []
    for record, base in report.with_baselines(records, ("form", "size")):
        row = dict(record)
        if base is not None:
            row["aten_ops_ratio"] = round(record["aten_ops"] / base["aten_ops"], 3)
            row["syncs_beyond"] = record["syncs"] - base["syncs"]
            row["decode_syncs_beyond"] = round(record["decode_syncs"] - base["decode_syncs"], 2)
            row["decode_ops_ratio"] = round(record["decode_ops"] / base["decode_ops"], 3)
        rows.append(row)
    return rows


COLUMNS = ["system", "form", "size", "aten_ops", "aten_ops_ratio", "syncs", "syncs_beyond", "own_syncs",
           "decode_ops", "decode_ops_ratio", "decode_syncs", "decode_syncs_beyond", "decode_own_syncs"]


def results_markdown(rows: list[dict], meta: dict) -> list[str]:
    lines = ["# Operators and host-device synchronisations per step (generated by `bench/ops/count.py`)", "",
             f"CPU, fp32, one thread; {meta['words']}-word synthetic sentences, --max-tokens {meta['max_tokens']} "
             f"batches over the preorder form (the same sentences for every system), {meta['warmup']} warm-up steps, "
             "batches collated before the step (as fairseq's data-loader workers do). Per training step "
             "(`Trainer.train_step`: forward, backward, optimizer, metric logging): `aten_ops`, the `aten::` calls "
             "`torch.profiler` records; `syncs`, the operators that would make the host wait for a GPU "
             "(`bench/ops/syncs.py`), and `own_syncs`, those that lines of `fairseq_syntax` run themselves (the "
             "others run inside fairseq's code: its encoder tests for padding once per layer, its decoder once, its "
             "trainer and meters read the loss and gradient norm). Per beam-search step (beam 5, "
             f"{meta['decode_sentences']} sentences): `decode_ops`, the operators dispatched, `decode_syncs` and "
             "`decode_own_syncs`. "
             "Ratios (`_ratio`) and differences (`_beyond`) are to fairseq's transformer on the same input form at "
             "the same size; the goal (issue 48): `aten_ops_ratio` at most 1.15, `syncs_beyond` at most 0.", ""]
    lines += report.markdown_table([{c: row[c] for c in COLUMNS if c in row} for row in rows], COLUMNS)
    lines += ["", f"Command: `{meta['command']}` ({meta['minutes']} min).", "",
              "## Where each system's synchronisations come from", "",
              "Each place: the line that runs the operator, outside torch (when that is in fairseq, `via` the line "
              "of `fairseq_syntax` that led there), and the operator; `backward`: it runs in the backward pass of "
              "that forward line.", ""]
    places, named = named_places(rows)
    for name, place in places.items():
        via = f" via `{place['via']}`" if place["via"] else ""
        backward = " (backward)" if place["phase"] == "backward" else ""
        lines.append(f"- {name}: `{place['where']}`{via} {place['operator']}{backward}")
    lines += ["", "Each system's places, and how many times per training step and per decoding step:", ""]
    for row in named:
        lines.append(f"- **{row['system']}** ({row['size']}): {_counts(row['sync_places'])}")
        if row["decode_sync_places"]:
            lines.append(f"  - per decoding step: {_counts(row['decode_sync_places'])}")
    return lines


def _counts(places: dict) -> str:
    return "; ".join(f"{name} x{count}" for name, count in places.items()) or "none"


PLACE = ("where", "via", "operator", "phase")


def named_places(rows: list[dict]) -> tuple[dict, list[dict]]:
    """The distinct places of all rows' synchronisations, named p1, p2, ... in order of first appearance, and
    the rows with ``sync_places`` as {name: count} and ``decode_sync_places`` as {name: per_step}."""
    names: dict = {}
    named = []
    for row in rows:
        row = dict(row)
        for field, amount in (("sync_places", "count"), ("decode_sync_places", "per_step")):
            row[field] = {names.setdefault(tuple(p[k] for k in PLACE), f"p{len(names) + 1}"): p[amount]
                          for p in row[field]}
        named.append(row)
    return {name: dict(zip(PLACE, key)) for key, name in names.items()}, named


def main(argv: Sequence[str] | None = None) -> list[dict]:
    args = parse_args(argv)
    started = time.time()
    sizes = args.sizes.split(",")
    unknown = [s for s in sizes if s not in SIZES + ("tiny",)]
    if unknown:
        raise SystemExit(f"error: --sizes {unknown}: choose from {', '.join(SIZES + ('tiny',))}")
    measure.import_models()  # before the forks, as are torch's optimizers (which import torch._dynamo, 20 s)
    import torch._dynamo  # noqa: F401
    import torch.optim  # noqa: F401
    import torch.profiler  # noqa: F401
    first = settings_for(sizes[0], args)
    archs, systems, skipped = run.registered_systems(None, first, variants=False)
    if args.systems:
        wanted = args.systems.split(",")
        missing = [w for w in wanted if w not in {s.label for s in systems}]
        if missing:
            raise SystemExit(f"error: --systems {missing}: not among {[s.label for s in systems]}")
        systems = [s for s in systems if s.label in wanted]
    records = []
    with tempfile.TemporaryDirectory(prefix="ops-") as scratch:
        work = args.work or scratch
        os.makedirs(work, exist_ok=True)
        dirs, batches = run.one_length_data(work, archs, first, args.warmup + 2)
        for size in sizes:
            settings = settings_for(size, args)
            for system in systems:
                spec = {"data": dirs[system.form.name], "train_args": run.model_args(system, settings),
                        "batches": batches, "warmup": args.warmup, "decode_sentences": args.decode_sentences,
                        "decode_length": args.decode_length, "decode_steps": args.decode_steps}
                answer = measure.measure_in_child(spec, count_step)
                if "error" in answer:
                    raise SystemExit(f"error: counting {system.label} ({size}) failed:\n{answer['error']}")
                records.append({"system": system.label, "arch": system.row_name(settings), "form": system.form.name,
                                "size": size, "baseline": system.arch == run.BASELINE, **answer["result"]})
                run.log(f"{system.label} ({size}): {records[-1]['aten_ops']} aten ops, {records[-1]['syncs']} syncs "
                        "a step")
                write_results(args, records, started, skipped, argv)  # what a stopped run leaves
    run.log(f"wrote {args.out}/RESULTS.md, RESULTS.json in {(time.time() - started) / 60:.1f} min")
    return compared(records)


def write_results(args: argparse.Namespace, records: list[dict], started: float, skipped: list[str],
                  argv: Sequence[str] | None) -> None:
    """RESULTS.md and RESULTS.json (the settings, the places of :func:`named_places` and the rows naming them, as
    :func:`report.rows_table`)."""
    rows = compared(records)
    meta = {"words": args.words, "max_tokens": args.max_tokens, "warmup": args.warmup,
            "decode_sentences": args.decode_sentences, "minutes": round((time.time() - started) / 60, 1),
            "command": run.reproducing_command(argv, "bench/ops/count.py"), "skipped": skipped}
    places, named = named_places(rows)
    tables.write_results(os.path.join(args.out, "RESULTS.md"), "\n".join(results_markdown(rows, meta)),
                         {"settings": meta, "places": places, **report.rows_table(named)})


if __name__ == "__main__":
    main(sys.argv[1:])
