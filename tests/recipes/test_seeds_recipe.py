"""The recipes' shared steps over seeds (examples/common.sh, as replicate_gpu.sh uses them) on tiny models: each
seed's run is scored against the same seed's baseline, each system over its seeds gets the mean, the sd and the
pooled paired bootstrap, and the results table shows both."""
import json
import os
import subprocess

from conftest import REPO, TINY


def test_runs_of_several_seeds_are_paired_by_seed_and_pooled(data_dirs, raw_corpus, tmp_path):
    runs = tmp_path / "runs"
    seed_at = TINY.index("--seed")
    tiny = " ".join(TINY[:seed_at] + TINY[seed_at + 2:])  # each run gets its own seed
    script = f"""
set -euo pipefail
source examples/common.sh
export DATASET=tiny BASELINES=sequence SCORE_ARGS= CKPT_ROOT={tmp_path}/ckpt GEN_ARGS="--beam 2 --batch-size 64"
for seed in 1 2; do
  SEED=$seed RUN_SUFFIX=.seed$seed run_system sequence transformer_tiny {data_dirs['sequence']} {raw_corpus}/test.de \
    {runs} -- {tiny} --max-epoch 1 --seed $seed
  SEED=$seed RUN_SUFFIX=.seed$seed run_system mask transformer_syntax_mask_tiny {data_dirs['preorder']} \
    {raw_corpus}/test.de {runs} -- {tiny} --max-epoch 1 --seed $seed
done
score_seeds mask transformer_syntax_mask_tiny {raw_corpus}/test.de {runs} "1 2" "fairseq-train ..."
fairseq-syntax-results {runs} --out {tmp_path}/RESULTS.md
"""
    result = subprocess.run(["bash", "-c", script], cwd=REPO, capture_output=True, text=True,
                            env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    records = {path.name: json.loads(path.read_text()) for path in runs.glob("*.run.json")}
    assert sorted(records) == ["mask.seed1.run.json", "mask.seed2.run.json", "mask.seeds.run.json",
                               "sequence.seed1.run.json", "sequence.seed2.run.json"]
    for seed in (1, 2):
        run = records[f"mask.seed{seed}.run.json"]
        assert (run["system"], run["seed"], run["device"].startswith("cpu")) == ("mask", seed, True)
        # seed k against the baseline's seed k: the test's baseline score is that run's BLEU
        baseline_bleu = records[f"sequence.seed{seed}.run.json"]["metrics"]["BLEU"]
        assert abs(run["significance"]["sequence"]["BLEU"]["a"] - baseline_bleu) < 0.01
    pooled = records["mask.seeds.run.json"]
    per_seed = [records[f"mask.seed{seed}.run.json"]["metrics"]["BLEU"] for seed in (1, 2)]
    assert pooled["seeds"] == 2 and pooled["dataset"] == "tiny, 2 seeds"
    assert abs(pooled["metrics"]["BLEU"] - sum(per_seed) / 2) < 1e-9
    assert abs(pooled["metrics_sd"]["BLEU"] - abs(per_seed[0] - per_seed[1]) / 2 ** 0.5) < 1e-9
    assert pooled["significance"]["sequence"]["seeds"] == 2
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
