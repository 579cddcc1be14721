"""The recipes' shared steps over seeds (examples/common.sh, as replicate_gpu.sh uses them) on decoded runs laid
out as run_system leaves them: each seed's run is scored against the same seed's baseline, each system over its seeds
gets the mean, the sd and the pooled paired bootstrap, and the results table shows both."""
import gzip
import json
import os
import subprocess

from conftest import REPO

PARSERS = {"constituency": {"model": "crf-con.pt", "sha256": "0123456789abcdef"}}


def fake_run(runs, name, seed, hypotheses, wall):
    """A decoded run as run_system leaves it: NAME.seedK.gen.gz (fairseq-generate's D- lines), its train log, and
    what its training ran on, kept with its checkpoints (ckpt-NAME.seedK/device.txt, parsers.json of its data)."""
    ckpt = runs / f"ckpt-{name}.seed{seed}"
    ckpt.mkdir()
    (ckpt / "device.txt").write_text(f"cpu (test machine {seed})\n")
    (ckpt / "parsers.json").write_text(json.dumps(PARSERS))
    with gzip.open(runs / f"{name}.seed{seed}.gen.gz", "wt") as out:
        out.write("".join(f"D-{i}\t-0.5\t{hypothesis}\n" for i, hypothesis in enumerate(hypotheses)))
    with gzip.open(runs / f"{name}.seed{seed}.train.log.gz", "wt") as out:
        out.write(f"2024-05-01 10:00:03 | INFO | train | epoch 001 | loss 4.4 | num_updates 12 | wall {wall}\n")


def test_runs_of_several_seeds_are_paired_by_seed_and_pooled(raw_corpus, tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    references = open(f"{raw_corpus}/test.de").read().splitlines()
    # the mask system copies the reference but drops a word on every (seed + 1)-th line; the baseline more often
    for seed in (1, 2):
        fake_run(runs, "mask", seed, [" ".join(r.split()[1:]) if i % (seed + 1) == 0 else r
                                      for i, r in enumerate(references)], 20 * seed)
        fake_run(runs, "sequence", seed, [" ".join(r.split()[2:]) for r in references], 10)
    script = f"""
set -euo pipefail
source examples/common.sh
export DATASET=tiny BASELINES=sequence SCORE_ARGS=
for seed in 1 2; do
  SEED=$seed RUN_SUFFIX=.seed$seed score_system mask transformer_syntax_mask_tiny {raw_corpus}/test.de {runs} "train"
done
score_seeds mask transformer_syntax_mask_tiny {raw_corpus}/test.de {runs} "1 2" "train"
fairseq-syntax-results {runs} --out {tmp_path}/RESULTS.md
"""
    result = subprocess.run(["bash", "-c", script], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    records = {path.name: json.loads(path.read_text()) for path in runs.glob("*.run.json")}
    assert sorted(records) == ["mask.seed1.run.json", "mask.seed2.run.json", "mask.seeds.run.json"]
    for seed in (1, 2):
        run = records[f"mask.seed{seed}.run.json"]
        assert (run["system"], run["seed"], run["device"]) == ("mask", seed, f"cpu (test machine {seed})")
        assert run["parsers"] == PARSERS
        # seed k against the baseline's seed k: the same baseline output here, so the same baseline score
        assert run["significance"]["sequence"]["BLEU"]["a"] == records["mask.seed1.run.json"]["significance"][
            "sequence"]["BLEU"]["a"]
    pooled = records["mask.seeds.run.json"]
    per_seed = [records[f"mask.seed{seed}.run.json"]["metrics"]["BLEU"] for seed in (1, 2)]
    assert per_seed[0] < per_seed[1]  # seed 1 drops a word on every 2nd line, seed 2 on every 3rd
    assert pooled["seeds"] == 2 and pooled["dataset"] == "tiny, 2 seeds" and pooled["wall_time_s"] == 30
    assert abs(pooled["metrics"]["BLEU"] - sum(per_seed) / 2) < 1e-9
    assert abs(pooled["metrics_sd"]["BLEU"] - abs(per_seed[0] - per_seed[1]) / 2 ** 0.5) < 1e-9
    assert pooled["significance"]["sequence"]["seeds"] == 2
    assert (pooled["device"], pooled["parsers"]) == ("cpu (test machine 1)", PARSERS)  # the first seed's
    table = (tmp_path / "RESULTS.md").read_text()
    assert "## tiny, 2 seeds" in table and "BLEU (mean ± sd)" in table
    assert "| mask | transformer_syntax_mask_tiny | 1 |" in table  # a run per seed, with its seed


def test_sst_results_give_mean_and_sd_over_seeds():
    import importlib.util

    spec = importlib.util.spec_from_file_location("sst_results", os.path.join(REPO, "examples", "sst", "results.py"))
    sst = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sst)
    # dev accuracies per evaluation (epoch, updates, accuracy, node accuracy); best 42 / 44, last 40 / 44
    runs = [sst.Run("sst5.hier-nodes.15k.seed1", "sst5", {}, valid=[(1, 10, 42.0, None), (2, 20, 40.0, None)]),
            sst.Run("sst5.hier-nodes.15k.seed2", "sst5", {}, valid=[(1, 10, 41.0, None), (2, 20, 44.0, None)]),
            sst.Run("sst5.transformer.15k.seed1", "sst5", {}, valid=[(1, 10, 30.0, None)])]  # one seed: no row
    lines, values = sst.seed_table(runs)
    assert "| sst5.hier-nodes.15k.seed* | 2 | 43.00 ± 1.41 | 42.00 ± 2.83 |" in lines
    assert values["rows"] == [{"runs": "sst5.hier-nodes.15k", "seeds": 2,
                               "dev accuracy, best epoch (mean ± sd)": {"mean": 43.0, "sd": 2 ** 0.5},
                               "dev accuracy, last (mean ± sd)": {"mean": 42.0, "sd": 8 ** 0.5}}]


def test_a_run_resumes_under_a_larger_budget_or_other_loader_workers_but_not_other_settings():
    """run_system resumes a checkpoint only for the same command, up to its budget and --num-workers (who loads the
    batches, not which): what examples/common.sh's resume_key compares."""
    started = "fairseq-train data --arch transformer --max-epoch 20 --seed 1 --cpu"
    script = f"""
source examples/common.sh
same() {{ [ "$(resume_key "$1")" = "$(resume_key "{started}")" ] && echo same || echo other; }}
same "fairseq-train data --arch transformer --max-epoch 30 --seed 1 --cpu --num-workers 0"
same "fairseq-train data --arch transformer --max-epoch 20 --seed 2 --cpu"
same "fairseq-train data --arch transformer --max-epoch 20 --seed 1 --cpu --max-tokens 10"
"""
    result = subprocess.run(["bash", "-c", script], cwd=REPO, capture_output=True, text=True)
    assert result.stdout.split() == ["same", "other", "other"], result.stderr


def test_a_cpu_run_loads_its_batches_in_the_training_process_unless_it_chooses_its_loader_workers():
    """run_system adds --num-workers 0 to a --cpu run that does not choose its own (fairseq's persistent loader
    workers pile up, one pair an epoch): what examples/common.sh's main_process_loader decides."""
    script = """
source examples/common.sh
for args in "--arch transformer --cpu --seed 1" "--cpu --num-workers 2" "--cpu --num-workers=2" "--arch transformer" \\
            "--cpu-bf16-autocast"; do
  if main_process_loader $args; then echo added; else echo kept; fi
done
"""
    result = subprocess.run(["bash", "-c", script], cwd=REPO, capture_output=True, text=True)
    assert result.stdout.split() == ["added", "kept", "kept", "kept", "kept"], result.stderr
