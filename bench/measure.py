"""One training-speed measurement in a fresh process: fairseq's own task, model, criterion and ``Trainer.train_step``
on a fixed list of batches, reporting tokens per second and the peak memory that training adds.

``python3 bench/measure.py`` first prints ``ARCHS [names]`` (every arch fairseq knows with
``--user-dir fairseq_syntax``, and :mod:`hier_accum_dense.dense`'s), then answers each JSON spec on stdin with one
stdout line ``RESULT {json}`` (or ``ERROR {json}``). It imports torch, fairseq and ``fairseq_syntax`` once and
forks a child per spec. A spec::

    {"data": DATA_DIR, "train_args": [fairseq-train options after DATA], "batches": [[sentence ids], ...],
     "warmup": 2, "precision": "fp32", "threads": 1, "device": "cpu"}

The first ``warmup`` batches are not timed; each later batch is collated (side inputs included) and trained on,
timed by wall clock and by this process's CPU time (with one thread, the steadier); ``tokens_per_s`` by the clock
and ``peak_mem_mb`` as the device's meter reads them (:func:`clock`, :class:`HostMeter`, :class:`CudaMeter`).
``precision``: one of :data:`precision.PRECISIONS`.

``"generate": {"batches": [[sentence ids], ...], "warmup": 1, "beam": 5}`` (optional): beam search as
``fairseq-generate`` runs it over those batches, hypotheses held at the longest reference's length (``--min-len``
= ``--max-len-b``, ``--max-len-a 0``) so every system decodes the same steps; ``generate_tokens_per_s``: tokens
(EOS included) of each best hypothesis per second."""
import json
import os
import sys
import time
import traceback
from argparse import Namespace
from typing import Dict, List

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import precision as precisions  # noqa: E402

USER_DIR = os.path.join(os.path.dirname(HERE), "fairseq_syntax")


def memory_status(field: str) -> int:
    """A ``/proc/self/status`` memory field (``VmRSS``, ``VmHWM``) in kB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def reset_peak_rss() -> None:
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")  # "reset the peak resident set size" (Linux >= 4.0, proc(5))


def import_models() -> None:
    """What ``--user-dir fairseq_syntax`` registers, and ``bench/hier_accum_dense``'s models."""
    from fairseq import utils

    utils.import_user_module(Namespace(user_dir=USER_DIR))
    import fairseq_syntax

    fairseq_syntax.register()  # where this process imported the package before fairseq, the user dir loads nothing
    import hier_accum_dense.dense  # noqa: F401  (registers transformer_hier_accum_dense)


def build_trainer(data: str, train_args: List[str], precision: str = "fp32", threads: int = 1):
    """fairseq_cli.train's setup on ``threads`` torch threads: options -> cfg -> task, dataset, model, criterion,
    Trainer. Returns the task, the Trainer and :func:`batch_maker`'s ``collate``."""
    from fairseq import options, tasks, utils
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq.trainer import Trainer

    torch.set_num_threads(threads)
    import_models()
    parser = options.get_training_parser()
    cfg = convert_namespace_to_omegaconf(options.parse_args_and_arch(parser, [data] + train_args))
    from fairseq_syntax.core.mixed_precision import untie_bf16_from_tpu

    untie_bf16_from_tpu(cfg, [data] + train_args)  # as fairseq-train with the plugin does: --bf16 on the GPU
    precisions.configure(cfg, precision)
    utils.set_torch_seed(cfg.common.seed)
    task = tasks.setup_task(cfg.task)
    task.load_dataset("train")
    model = task.build_model(cfg.model)
    precisions.wrap_model(model, precision)
    criterion = task.build_criterion(cfg.criterion)
    return task, Trainer(cfg, task, model, criterion), batch_maker(task)


class HostMeter:
    """CPU runs: the peak RSS during training (reset by ``/proc/self/clear_refs``) less the RSS once everything is
    built; nothing to wait for."""

    def start(self) -> None:
        self.baseline_kb = memory_status("VmRSS")
        reset_peak_rss()

    def peak_mb(self) -> float:
        return (memory_status("VmHWM") - self.baseline_kb) / 1024

    def baseline_mb(self) -> float:
        return self.baseline_kb / 1024

    def synchronize(self) -> None:
        pass


class CudaMeter:
    """GPU runs (``train_args`` without ``--cpu``): the peak of ``torch.cuda.max_memory_allocated`` less the memory
    allocated before training; synchronizing after each step makes the wall clock cover the GPU's work."""

    def start(self) -> None:
        torch.cuda.synchronize()
        self.baseline = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()

    def peak_mb(self) -> float:
        return (torch.cuda.max_memory_allocated() - self.baseline) / 2**20

    def baseline_mb(self) -> float:
        return self.baseline / 2**20

    def synchronize(self) -> None:
        torch.cuda.synchronize()


def batch_maker(task):
    """``collate(ids)``: the batch of those training sentences as the task's batch iterator makes it."""
    dataset = task.dataset("train")
    if hasattr(task, "batched_side_inputs"):  # syntax_translation: the view its batch iterator batches
        dataset = dataset.batching(task.batched_side_inputs(dataset))

    def collate(ids):
        return dataset.collater([dataset[i] for i in ids])

    return collate


def clock(device: str) -> float:
    """The clock a measurement is timed by: CPU time of this process on a CPU, the wall clock on a GPU."""
    return time.perf_counter() if device == "cuda" else time.process_time()


def generation_speed(task, model, collate, meter, generate: dict, device: str) -> dict:
    """Beam search over ``generate["batches"]`` (module docstring): tokens per second and what was decoded."""
    from fairseq import utils

    model.eval()
    pad = task.target_dictionary.pad()
    seconds, tokens, sentences = 0.0, 0, 0
    warmup = generate.get("warmup", 1)
    for index, ids in enumerate(generate["batches"]):
        sample = collate(ids)
        if device == "cuda":
            sample = utils.move_to_cuda(sample)
        length = int(sample["target"].ne(pad).sum(dim=1).max()) - 1  # the longest reference, without its EOS
        options = Namespace(beam=generate.get("beam", 5), max_len_a=0, max_len_b=length, min_len=length)
        generator = task.build_generator([model], options)
        meter.synchronize()
        start = clock(device)
        hypotheses = task.inference_step(generator, [model], sample)
        meter.synchronize()
        if index >= warmup:
            seconds += clock(device) - start
            tokens += sum(len(beams[0]["tokens"]) for beams in hypotheses)
            sentences += len(hypotheses)
    if not sentences:
        raise ValueError(f"{len(generate['batches'])} decoding batches leave none to time after {warmup} warm-up")
    return {"generate_tokens_per_s": tokens / seconds, "generate_sentences": sentences, "generate_tokens": tokens,
            "generate_s": seconds}


def run(spec: Dict) -> Dict:
    precision = spec.get("precision", "fp32")
    device = spec.get("device", "cpu")
    if (device == "cuda") == ("--cpu" in spec["train_args"]):
        raise ValueError(f"device {device!r} with train_args {'with' if device == 'cuda' else 'without'} --cpu")
    task, trainer, collate = build_trainer(spec["data"], spec["train_args"], precision, spec.get("threads", 1))
    meter = CudaMeter() if device == "cuda" else HostMeter()
    batches, warmup = spec["batches"], spec.get("warmup", 2)
    if len(batches) <= warmup:
        raise ValueError(f"{len(batches)} batches leave none to time after {warmup} warm-up batches")

    meter.start()
    for ids in batches[:warmup]:
        logging_output = trainer.train_step([collate(ids)])
    wall = cpu = 0.0
    target_tokens = source_tokens = sentences = 0
    pad = task.source_dictionary.pad()
    meter.synchronize()
    for ids in batches[warmup:]:
        wall_start, cpu_start = time.perf_counter(), time.process_time()
        sample = collate(ids)
        logging_output = trainer.train_step([sample])
        meter.synchronize()
        wall += time.perf_counter() - wall_start
        cpu += time.process_time() - cpu_start
        target_tokens += sample["ntokens"]
        source_tokens += int(sample["net_input"]["src_tokens"].ne(pad).sum())
        sentences += sample["nsentences"]
    peak_mem_mb = meter.peak_mb()  # training's: decoding below is measured for its speed only
    decoding = (generation_speed(task, trainer.model, collate, meter, spec["generate"], device)
                if spec.get("generate") else {})
    return {
        "updates": len(batches) - warmup,
        "sentences": sentences,
        "target_tokens": target_tokens,
        "source_tokens": source_tokens,
        "wall_s": wall,
        "cpu_s": cpu,
        "tokens_per_s": target_tokens / (wall if device == "cuda" else cpu),
        "wall_tokens_per_s": target_tokens / wall,
        "peak_mem_mb": peak_mem_mb,
        "baseline_mem_mb": meter.baseline_mb(),
        "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
        "parameters": sum(p.numel() for p in trainer.model.parameters()),
        "last_loss": float(logging_output["loss"]),  # a finite loss shows the step trained
        **decoding,
    }


def measure_in_child(spec: Dict, work=run) -> Dict:
    """Runs ``work(spec)`` (default :func:`run`) in a forked child; returns its result (JSON) or
    ``{"error": traceback}``."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        try:
            answer = {"result": work(spec)}
        except BaseException:  # the parent reports it; the child must not return into the serving loop
            answer = {"error": traceback.format_exc()}
        with os.fdopen(write_end, "w") as pipe:
            json.dump(answer, pipe)
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        text = pipe.read()
    _, status = os.waitpid(pid, 0)
    if not text:
        return {"error": f"the measuring process died (wait status {status})"}
    return json.loads(text)


def serve() -> None:
    # before any torch operation: the children then start their own thread pools
    import_models()
    from fairseq.models import ARCH_MODEL_REGISTRY

    print("ARCHS", json.dumps(sorted(ARCH_MODEL_REGISTRY)), flush=True)
    for line in sys.stdin:
        if line.strip():
            answer = measure_in_child(json.loads(line))
            tag = "RESULT" if "result" in answer else "ERROR"
            print(tag, json.dumps(answer.get("result", answer.get("error"))), flush=True)


if __name__ == "__main__":
    serve()
