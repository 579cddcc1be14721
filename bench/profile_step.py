"""``python3 bench/profile_step.py --out DIR [--device cuda] [--words 64]``: ``torch.profiler`` over one training
step of every benchmarked architecture (``bench/run.py --list``, variants too) and of fairseq's transformer on
each input form they read, on the benchmark's data and batches, after its warm-up steps.

Each system runs in a forked process (:func:`profile_step`); ``DIR/profile.txt`` (:func:`write_profile`: what is
timed and counted) and ``DIR/profile.json`` (the same numbers, one record per system) are rewritten after each."""
import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import measure
import report
import run

ROW_LIMIT = 15  # operators per system in the tables and in "top"


def self_time_us(average, cuda: bool) -> float:
    """An operator's self time (microseconds) on the device that matters: the GPU's, or the CPU's."""
    if not cuda:
        return average.self_cpu_time_total
    return getattr(average, "self_device_time_total", None) or getattr(average, "self_cuda_time_total", 0.0)


def profile_step(spec: dict) -> dict:
    """In a forked child: the warm-up steps, one step timed without the profiler (its batch's collation timed alone),
    then one under the profiler (its top self-time operators)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    cuda = spec["device"] == "cuda"
    torch.set_num_threads(1)
    task, trainer = measure.build_trainer(spec["data"], spec["train_args"], "fp32")
    meter = measure.CudaMeter() if cuda else measure.HostMeter()
    collate = measure.batch_maker(task)
    batches, warmup = spec["batches"], spec["warmup"]
    for ids in batches[:warmup]:
        trainer.train_step([collate(ids)])
    meter.synchronize()
    start = measure.clock(spec["device"])
    sample = collate(batches[warmup])
    collated = measure.clock(spec["device"])  # the host's work before the step (nothing is queued on the GPU yet)
    trainer.train_step([sample])
    meter.synchronize()
    step_ms = 1000 * (measure.clock(spec["device"]) - start)
    collate_ms = 1000 * (collated - start)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as profiler:
        trainer.train_step([collate(batches[warmup + 1])])
        meter.synchronize()
    averages = profiler.key_averages()
    ranked = sorted(averages, key=lambda a: self_time_us(a, cuda), reverse=True)
    kernels = sum(1 for event in profiler.events() if event.device_type == torch.autograd.DeviceType.CUDA)
    return {
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "step_ms": round(step_ms, 3),
        "collate_ms": round(collate_ms, 3),
        "profiled_self_ms": round(sum(self_time_us(a, cuda) for a in averages) / 1000, 3),
        "kernels": kernels if cuda else None,
        "aten_calls": sum(a.count for a in averages if a.key.startswith("aten::")),
        "top": [{"name": a.key, "calls": a.count, "self_ms": round(self_time_us(a, cuda) / 1000, 3)}
                for a in ranked[:ROW_LIMIT]],
        "table": averages.table(sort_by="self_device_time_total" if cuda else "self_cpu_time_total",
                                row_limit=ROW_LIMIT, max_name_column_width=70),
    }


def with_baselines(records: list[dict]):
    """(record, the transformer's record on its input form, or None for that transformer itself or a form without
    one), in the records' order."""
    baselines = {r["form"]: r for r in records if r["baseline"]}
    for record in records:
        baseline = baselines.get(record["form"])
        yield record, None if baseline is record else baseline


def collate_step(spec: dict) -> dict:
    """In a forked child: the host CPU time (one thread) to collate each batch, side inputs included; no training."""
    import statistics

    import torch

    torch.set_num_threads(1)
    task, _ = measure.build_trainer(spec["data"], spec["train_args"], "fp32")  # the model says what to batch
    collate = measure.batch_maker(task)
    times = []
    for ids in spec["batches"]:
        start = time.process_time()
        collate(ids)
        times.append(1000 * (time.process_time() - start))
    return {"device": "cpu", "collate_ms": round(statistics.median(times[1:] or times), 3), "batches": len(times)}


def write_collation(out: str, records: list[dict], words: int) -> None:
    """``DIR/collate.txt`` and ``DIR/collate.json``: each system's collation time against the transformer's on its
    form."""
    os.makedirs(out, exist_ok=True)
    rows = []
    for record, baseline in with_baselines(records):
        row = {"system": record["system"], "collate_ms": record["collate_ms"]}
        if baseline is not None:
            row["collate_ratio"] = round(record["collate_ms"] / max(baseline["collate_ms"], 1e-3), 2)
        rows.append(row)
    with open(os.path.join(out, "collate.json"), "w") as f:
        json.dump(records, f, indent=1)
    lines = ["# Collating one batch (generated by `python3 bench/profile_step.py --collate-only`)", "",
             f"{words}-word synthetic sentences, the benchmark's --max-tokens batches; collate_ms: CPU time of one "
             "thread to make one batch (side inputs included), median over the batches after the first; ratio to "
             "fairseq's transformer on the same input form.", ""]
    lines += report.markdown_table(rows, ["system", "collate_ms", "collate_ratio"])
    with open(os.path.join(out, "collate.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="where profile.txt and profile.json go")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--words", type=int, default=64, help="source length of the synthetic sentences")
    parser.add_argument("--archs", help="comma-separated benchmarked architectures (bench/run.py --list); "
                        "default: all")
    parser.add_argument("--model-size", choices=sorted(run.recipe.MODEL_SIZES), default="recipe")
    parser.add_argument("--tiny", action="store_true", help="the *_tiny archs, 1024-token batches (a dry run)")
    parser.add_argument("--work", help="keep the synthetic data here (default: a temporary folder)")
    parser.add_argument("--time-budget", type=float, metavar="MINUTES",
                        help="profile no system that would end after MINUTES from the start")
    parser.add_argument("--collate-only", action="store_true",
                        help="time only the collation of the batches (collate.txt, collate.json), on the CPU")
    parser.add_argument("--deadline", type=float, metavar="UNIX_SECONDS",
                        help="nor one that would end after this time, as `date +%%s` gives it")
    return parser.parse_args(argv)


def summary_rows(records: list[dict]) -> list[dict]:
    """Each system's step time and launches against fairseq's transformer on the same input form."""
    rows = []
    for record, baseline in with_baselines(records):
        row = {key: record[key] for key in ("system", "step_ms", "collate_ms", "kernels", "aten_calls")}
        if baseline is not None:
            row["step_time_ratio"] = round(record["step_ms"] / baseline["step_ms"], 2)
            # what a run whose data-loader workers collate the batches meanwhile would see
            row["step_without_collate_ratio"] = round(
                (record["step_ms"] - record["collate_ms"]) / (baseline["step_ms"] - baseline["collate_ms"]), 2)
            count = "kernels" if record["kernels"] is not None else "aten_calls"
            row[f"{count}_ratio"] = round(record[count] / max(baseline[count], 1), 2)
        rows.append(row)
    return rows


def write_profile(out: str, records: list[dict], skipped: list[str], settings: run.Settings, words: int) -> None:
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "profile.json"), "w") as f:
        json.dump([{k: v for k, v in r.items() if k != "table"} for r in records], f, indent=1)
    cuda = settings.device == "cuda"
    clock = "synchronized wall clock" if cuda else "CPU time, one thread"
    counted = "kernels: CUDA kernels the profiled step launched" if cuda else "aten_calls: aten:: operator calls"
    devices = ", ".join(sorted({r["device"] for r in records})) or settings.device
    lines = ["# One training step under torch.profiler (generated by `python3 bench/profile_step.py`)", "",
             (f"Device: {devices}. Model: {settings.model}; {words}-word synthetic sentences, --max-tokens "
              f"{settings.max_tokens} batches over the preorder form, {settings.warmup} warm-up steps; step_ms: one "
              f"step without the profiler ({clock}); collate_ms: the part of it that made the batch on the host (side "
              f"inputs included), which fairseq's data-loader workers (--num-workers) would do beside the step; "
              f"{counted}; ratios to fairseq's transformer on the same input form."), ""]
    columns = ["system", "step_ms", "step_time_ratio", "collate_ms", "step_without_collate_ratio",
               "kernels" if cuda else "aten_calls",
               "kernels_ratio" if cuda else "aten_calls_ratio"]
    lines += report.markdown_table(summary_rows(records), columns)
    if skipped:
        lines += ["", f"Not profiled (time budget, or not registered): {', '.join(skipped)}."]
    for record in records:
        lines += ["", f"## {record['system']}", "", record["table"]]
    with open(os.path.join(out, "profile.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main(argv: Sequence[str] | None = None) -> list[dict]:
    args = parse_args(argv)
    started = time.time()
    settings = run.Settings(lengths=(args.words,), repeats=1, warmup=1 if args.tiny else 3, updates=2,
                            max_tokens=1024 if args.tiny else 4096, speed_length=None, preprocess_sentences=0,
                            tiny=args.tiny, device=args.device, model_size=args.model_size, generate_batches=0)
    archs, systems, skipped = run.registered_systems(args.archs, settings)  # before the forks; no CUDA here
    limit = run.time_limit(started, args.time_budget, args.deadline)
    records, longest = [], 0.0
    with tempfile.TemporaryDirectory(prefix="profile-") as scratch:
        work = args.work or scratch
        os.makedirs(work, exist_ok=True)
        dirs, batches = run.one_length_data(work, archs, settings, settings.warmup + 2)
        for system in systems:
            if time.time() + longest > limit:
                skipped.append(system.label)
                continue
            begun = time.time()
            spec = {"data": dirs[system.form.name], "train_args": run.model_args(system, settings),
                    "batches": batches, "warmup": settings.warmup, "device": args.device}
            answer = measure.measure_in_child(spec, collate_step if args.collate_only else profile_step)
            if "error" in answer:
                raise SystemExit(f"error: profiling {system.label} failed:\n{answer['error']}")
            record = {"system": system.label, "arch": system.row_name(settings), "form": system.form.name,
                      "baseline": system.arch == run.BASELINE, "src_words": args.words, "model": settings.model,
                      **answer["result"]}
            records.append(record)
            longest = max(longest, time.time() - begun)
            if args.collate_only:
                run.log(f"collated for {system.label}: {record['collate_ms']:.1f} ms a batch")
                write_collation(args.out, records, args.words)
                continue
            run.log(f"profiled {system.label}: {record['step_ms']:.1f} ms a step")
            write_profile(args.out, records, skipped, settings, args.words)  # what a time limit would leave
    if not args.collate_only:
        write_profile(args.out, records, skipped, settings, args.words)
    written = "collate.txt, collate.json" if args.collate_only else "profile.txt, profile.json"
    run.log(f"wrote {args.out}/{written} in {(time.time() - started) / 60:.1f} min")
    return records


if __name__ == "__main__":
    main(sys.argv[1:])
