"""The recipes' shared steps over seeds (examples/common.sh, as run.sh and replicate_gpu.sh use them) on decoded runs
laid out as run_system leaves them: each seed's run is scored against the same seed's baseline, each system over its
seeds gets the mean, the sd and the bootstrap over sentences and seeds against Sequence and its control, the records
name no folder of the machine, and the results table has one row per system."""
import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import REPO

from fairseq_syntax.evaluation.results import format_p

PARSERS = {"constituency": {"model": "crf-con.pt", "sha256": "0123456789abcdef"}}


def fake_run(runs, ckpts, name, seed, hypotheses, wall, control=None):
    """A decoded run as run_system leaves it: NAME.seedK.gen.gz (fairseq-generate's D- lines), its train log, and
    what its training ran on and its decode command, kept with its checkpoints (CKPT_ROOT/ckpt-NAME.seedK)."""
    ckpt = ckpts / f"ckpt-{name}.seed{seed}"
    ckpt.mkdir(parents=True)
    (ckpt / "device.txt").write_text(f"cpu (test machine {seed})\n")
    (ckpt / "parsers.json").write_text(json.dumps(dict(PARSERS, **({"control": control} if control else {}))))
    (ckpt / "decode_command.txt").write_text(f"fairseq-generate {ckpts.parent}/data-bin/preorder --path "
                                             f"{ckpt}/checkpoint_best.pt --beam 5\n")
    with gzip.open(runs / f"{name}.seed{seed}.gen.gz", "wt") as out:
        out.write("".join(f"D-{i}\t-0.5\t{hypothesis}\n" for i, hypothesis in enumerate(hypotheses)))
    with gzip.open(runs / f"{name}.seed{seed}.train.log.gz", "wt") as out:
        out.write(f"2024-05-01 10:00:03 | INFO | train | epoch 001 | loss 4.4 | num_updates 12 | wall {wall}\n")


def run_steps(script: str, runs: Path, pattern: str = "*.run.json") -> dict:
    """Run the recipe steps of ``script`` (bash, sourcing examples/common.sh) from the repository; the records they
    left in ``runs`` by file name."""
    result = subprocess.run(["bash", "-c", script], cwd=REPO, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return {path.name: json.loads(path.read_text()) for path in runs.glob(pattern)}


def test_runs_of_several_seeds_become_one_row_per_system(raw_corpus, tmp_path):
    runs, out_dir = tmp_path / "runs", tmp_path / "work"  # the recipe's output folder: data, checkpoints, reference
    runs.mkdir()
    out_dir.mkdir()
    references = (Path(raw_corpus) / "test.de").read_text().splitlines()
    (out_dir / "test.de.ref").write_text("".join(line + "\n" for line in references))
    # the mask system copies the reference but drops a word on every (seed + 1)-th line; its control on every line
    # of seed 1 and on none of seed 2; the baseline drops two words everywhere
    for seed in (1, 2):
        fake_run(runs, out_dir / "ckpt", "mask", seed, [" ".join(r.split()[1:]) if i % (seed + 1) == 0 else r
                                                        for i, r in enumerate(references)], 20 * seed)
        fake_run(runs, out_dir / "ckpt", "mask_random", seed,
                 [" ".join(r.split()[1:]) if seed == 1 else r for r in references], 10,
                 control={"structure": "random", "seed": 1})
        fake_run(runs, out_dir / "ckpt", "sequence", seed, [" ".join(r.split()[2:]) for r in references], 10)
    train = f"fairseq-train {out_dir}/data-bin/preorder --save-dir {out_dir}/ckpt/ckpt-mask.seed1 --seed 1"
    train_sequence = f"fairseq-train {out_dir}/data-bin/sequence --seed 1"
    script = f"""
set -euo pipefail
source examples/common.sh
export DATASET=tiny BASELINES=sequence SCORE_ARGS= OUT_DIR={out_dir} CKPT_ROOT={out_dir}/ckpt
for seed in 1 2; do
  SEED=$seed RUN_SUFFIX=.seed$seed score_system sequence transformer_tiny $OUT_DIR/test.de.ref {runs} "{train_sequence}"
  SEED=$seed RUN_SUFFIX=.seed$seed score_system mask transformer_syntax_mask_tiny $OUT_DIR/test.de.ref {runs} "{train}"
done
for name in mask mask_random; do
  score_seeds $name transformer_syntax_mask_tiny $OUT_DIR/test.de.ref {runs} "1 2" "{train}"
done
fairseq-syntax-results {runs} --out {tmp_path}/RESULTS.md
"""
    records = run_steps(script, runs)
    assert sorted(records) == ["mask.seed1.run.json", "mask.seed2.run.json", "mask.seeds.run.json",
                               "mask_random.seeds.run.json", "sequence.seed1.run.json", "sequence.seed2.run.json"]
    for seed in (1, 2):
        run = records[f"mask.seed{seed}.run.json"]
        assert (run["system"], run["seed"], run["device"]) == ("mask", seed, f"cpu (test machine {seed})")
        assert run["parsers"] == PARSERS
        # seed k against the baseline's seed k: the same baseline output here, so the same baseline score
        assert run["significance"]["sequence"]["BLEU"]["a"] == records["mask.seed1.run.json"]["significance"][
            "sequence"]["BLEU"]["a"]
        # no folder of this machine: the output folder is OUT_DIR
        assert run["command"] == "fairseq-train OUT_DIR/data-bin/preorder --save-dir OUT_DIR/ckpt/ckpt-mask.seed1 " \
                                 "--seed 1"
        assert run["decode_command"] == (f"fairseq-generate OUT_DIR/data-bin/preorder --path OUT_DIR/ckpt/"
                                         f"ckpt-mask.seed{seed}/checkpoint_best.pt --beam 5")
        assert f" OUT_DIR/test.de.ref {runs}/sequence.seed{seed}.gen.gz " in run["score_command"]
        assert str(out_dir) not in json.dumps(run)
    over = records["mask.seeds.run.json"]
    per_seed = [records[f"mask.seed{seed}.run.json"]["metrics"]["BLEU"] for seed in (1, 2)]
    assert per_seed[0] < per_seed[1]  # seed 1 drops a word on every 2nd line, seed 2 on every 3rd
    assert over["seeds"] == 2 and over["seed_list"] == [1, 2] and over["dataset"] == "tiny"
    assert over["wall_time_s"] == 30 and over["per_seed_metrics"]["BLEU"] == per_seed
    assert abs(over["metrics"]["BLEU"] - sum(per_seed) / 2) < 1e-9
    assert abs(over["metrics_sd"]["BLEU"] - abs(per_seed[0] - per_seed[1]) / 2 ** 0.5) < 1e-9
    # against Sequence and against its control, both over their own two seeds
    assert sorted(over["significance"]) == ["mask_random", "sequence"]
    assert {(test["seeds_a"], test["seeds_b"]) for test in over["significance"].values()} == {(2, 2)}
    assert "seeds resampled" in over["significance"]["sequence"]["test"]
    assert (over["device"], over["parsers"]) == ("cpu (test machine 1)", PARSERS)  # the first seed's
    assert list(records["mask_random.seeds.run.json"]["significance"]) == ["sequence", "mask"]  # and its system
    assert "OUT_DIR/test.de.ref" in over["score_command"] and str(out_dir) not in json.dumps(over)

    table = (tmp_path / "RESULTS.md").read_text()
    lines = table.splitlines()
    rows = [line for line in lines if line.startswith("| ") and " | 2: 1, 2 | " in line]
    # one row per system, the control after its system
    assert [row.split(" | ")[0] for row in rows] == ["| sequence", "| mask", "| mask_random"]
    mask = over["significance"]
    # mask's row: its mean ± sd and its p against Sequence (with its Monte-Carlo error); its control's row names mask
    # and their test
    assert (f" | {over['metrics']['BLEU']:.2f} ± {over['metrics_sd']['BLEU']:.2f} | " in rows[1]
            and f" | {format_p(mask['sequence']['BLEU'])} / " in rows[1])
    # the pair's test as the answer reads it, from the method's record (both hold one: each was scored with the
    # other's runs there)
    assert f" | mask | {format_p(mask['mask_random']['BLEU'])} / " in rows[2]
    assert "- train: `fairseq-train OUT_DIR/data-bin/preorder --save-dir OUT_DIR/ckpt/ckpt-mask.seed$SEED " \
           "--seed $SEED`" in lines
    assert "- decode: `fairseq-generate OUT_DIR/data-bin/preorder --path OUT_DIR/ckpt/ckpt-mask.seed$SEED/" \
           "checkpoint_best.pt --beam 5`" in lines
    assert json.loads((tmp_path / "RESULTS.json").read_text())["datasets"]["tiny"]["seeds"]

    # on a new machine, where no seed's checkpoint folder is: the system is scored over its seeds from the kept run
    # records alone, without a training command given, and the record says what it said before; the decodes and
    # logs of the system and of its baseline are read from their systems' archives (study.sh packs them)
    shutil.rmtree(out_dir / "ckpt")
    (runs / "mask.seeds.run.json").unlink()
    packer = os.path.join(REPO, "examples", "pack_runs.py")
    for name in ("sequence", "mask"):
        subprocess.run([sys.executable, packer, "pack", runs, name], check=True, capture_output=True)
    assert not list(runs.glob("sequence.*.gz")) and not list(runs.glob("mask.*.gz"))
    # rescored by hand with another DATASET than the runs were recorded under (run.sh's default, not study.sh's):
    # the record is filed under its runs' dataset, not in a table of its own, and the step says so
    again = f"""
source examples/common.sh
export DATASET=other BASELINES=sequence SCORE_ARGS= OUT_DIR={out_dir}
score_seeds mask transformer_syntax_mask_tiny $OUT_DIR/test.de.ref {runs} "1 2"
"""
    result = subprocess.run(["bash", "-c", again], cwd=REPO, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "score_seeds mask: dataset tiny, as its runs' records say (not DATASET=other)" in result.stderr
    rescored = json.loads((runs / "mask.seeds.run.json").read_text())
    for key in ("dataset", "command", "device", "parsers", "decode_command", "metrics", "significance", "seed_list"):
        assert rescored[key] == over[key], key
    # a system without a record of its first seed and without a checkpoint folder: an error that says so
    missing = again.replace("score_seeds mask ", "score_seeds mask_random ")
    result = subprocess.run(["bash", "-c", missing], cwd=REPO, capture_output=True, text=True, check=False)
    assert result.returncode != 0
    assert f"score_seeds mask_random: no training command (none given, and no run record {runs}/mask_random.seed1" \
           ".run.json)" in result.stderr


def test_a_system_is_scored_over_every_seed_it_has_and_tested_against_the_seeds_of_each_other(raw_corpus, tmp_path):
    """Seeds 4 and 5 land for one system (mask) and not for Sequence or mask's control: ``score_seeds`` with the
    seeds 1-5 scores mask over its five, Sequence over its three and the control over its two (their decodes kept),
    each test against the other's own seeds; the table's rows name their seeds."""
    runs, out_dir = tmp_path / "runs", tmp_path / "work"
    runs.mkdir()
    out_dir.mkdir()
    references = (Path(raw_corpus) / "test.de").read_text().splitlines()
    (out_dir / "test.de.ref").write_text("".join(line + "\n" for line in references))
    for seed in (1, 2, 3, 4, 5):  # mask drops the first word on every (seed + 1)-th line
        fake_run(runs, out_dir / "ckpt", "mask", seed, [" ".join(r.split()[1:]) if i % (seed + 1) == 0 else r
                                                        for i, r in enumerate(references)], 10)
    for seed in (1, 2, 3):  # Sequence drops the first two words on every (seed + 1)-th line
        fake_run(runs, out_dir / "ckpt", "sequence", seed, [" ".join(r.split()[2:]) if i % (seed + 1) == 0 else r
                                                            for i, r in enumerate(references)], 10)
    for seed in (1, 2):
        fake_run(runs, out_dir / "ckpt", "mask_random", seed, [" ".join(r.split()[seed:]) for r in references], 10,
                 control={"structure": "random", "seed": seed})
    train = f"fairseq-train {out_dir}/data-bin/preorder --seed 1"
    script = f"""
set -euo pipefail
source examples/common.sh
export DATASET=tiny BASELINES=sequence SCORE_ARGS= OUT_DIR={out_dir} CKPT_ROOT={out_dir}/ckpt SEED_BOOTSTRAP=300
for seed in 1 2; do  # the control's runs' records, which name the control seed each drew its structures with
  SEED=$seed RUN_SUFFIX=.seed$seed score_system mask_random transformer_syntax_mask_tiny $OUT_DIR/test.de.ref {runs} \
    "{train}"
done
for name in sequence mask mask_random; do
  score_seeds $name transformer_syntax_mask_tiny $OUT_DIR/test.de.ref {runs} "1 2 3 4 5" "{train}"
done
fairseq-syntax-results {runs} --out {tmp_path}/RESULTS.md
"""
    records = run_steps(script, runs, "*.seeds.run.json")
    mask, control = records["mask.seeds.run.json"], records["mask_random.seeds.run.json"]
    assert (records["sequence.seeds.run.json"]["seed_list"], mask["seed_list"], control["seed_list"]) == (
        [1, 2, 3], [1, 2, 3, 4, 5], [1, 2])
    # mask (B) over its five seeds against Sequence's three; its control (B) over two against mask's five
    versus = mask["significance"]["sequence"]
    assert (versus["seeds_a"], versus["seeds_b"], versus["n_samples"]) == (3, 5, 300)
    assert (control["significance"]["mask"]["seeds_a"], control["significance"]["mask"]["seeds_b"]) == (5, 2)
    assert versus["BLEU"]["welch"]["df"] > 0 and 0 < versus["BLEU"]["p_mc_se"] < 0.1
    assert " --bootstrap 300 " in mask["score_command"] and mask["score_command"].count("mask.seed") == 5
    rows = [line for line in (tmp_path / "RESULTS.md").read_text().splitlines()
            if line.startswith(("| sequence |", "| mask |", "| mask_random |"))]
    assert [row.split(" | ")[2] for row in rows[:3]] == ["3: 1, 2, 3", "5: 1, 2, 3, 4, 5", "2: 1, 2"]
    # control seed = training seed for each of the control's runs
    assert rows[2].split(" | ")[1] == "control: random structures (control seed = training seed)"


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
    result = subprocess.run(["bash", "-c", script], cwd=REPO, capture_output=True, text=True, check=False)
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
    result = subprocess.run(["bash", "-c", script], cwd=REPO, capture_output=True, text=True, check=False)
    assert result.stdout.split() == ["added", "kept", "kept", "kept", "kept"], result.stderr


def test_run_system_keeps_the_decode_hypotheses_and_gzipped_logs(tmp_path):
    """run_system's files once a run is decoded, with fairseq-train, fairseq-generate and fairseq-syntax-score
    replaced by scripts that print what the real ones would: the decode keeps its H- lines in id order (its D- lines
    repeat them; S-, T-, P- are dropped), the logs are gzipped, the plain files are gone."""
    bin_dir, runs = tmp_path / "bin", tmp_path / "runs"
    bin_dir.mkdir()
    stubs = {
        "fairseq-train": 'echo "epoch 001 | valid on \'valid\' subset | loss 4.1"',
        "fairseq-generate": "printf 'S-1\\tb\\nT-1\\tB\\nH-1\\t-0.25\\tzwei\\nD-1\\t-0.25\\tzwei\\nP-1\\t-0.2 -0.3\\n"
                            "S-0\\ta\\nT-0\\tA\\nH-0\\t-0.123456\\teins\\nD-0\\t-0.123456\\teins\\nP-0\\t-0.1\\n"
                            "Generate test with beam=5: BLEU4 = 50.00\\n'; echo 'generate log' >&2",
        "fairseq-syntax-score": 'echo "$@" > "$SCORED"',
    }
    for name, body in stubs.items():
        (bin_dir / name).write_text(f"#!/usr/bin/env bash\n{body}\n")
        (bin_dir / name).chmod(0o755)
    script = f"""
source examples/common.sh
run_system mask transformer_syntax_mask {tmp_path}/data {tmp_path}/test.de {runs} -- --seed 1 --cpu
"""
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", SCORED=str(tmp_path / "scored"))
    result = subprocess.run(["bash", "-c", script], cwd=REPO, capture_output=True, text=True, check=False, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(path.name for path in runs.iterdir()) == ["ckpt-mask", "mask.gen.gz", "mask.gen.log.gz",
                                                             "mask.train.log.gz"]
    with gzip.open(runs / "mask.gen.gz", "rt", encoding="utf-8") as kept:
        assert kept.read() == ("H-0\t\teins\nH-1\t\tzwei\n"
                               "Generate test with beam=5: BLEU4 = 50.00\n")
    with gzip.open(runs / "mask.gen.log.gz", "rt", encoding="utf-8") as log:
        assert log.read() == "generate log\n"
    assert f"{runs}/mask.gen.gz {tmp_path}/test.de" in (tmp_path / "scored").read_text()


def test_a_packed_run_is_not_trained_again_even_with_its_checkpoint_left_and_an_unreadable_archive_stops(tmp_path):
    """run_system on a finished run (its outputs packed) whose checkpoint is still there: it says so and trains
    nothing (resuming would train a finished run on); with an archive it cannot read, the script stops."""
    runs, bin_dir = tmp_path / "runs", tmp_path / "bin"
    runs.mkdir()
    bin_dir.mkdir()
    for suffix in (".gen.gz", ".gen.log.gz", ".train.log.gz"):
        (runs / f"mask{suffix}").write_bytes(gzip.compress(b"kept\n"))
    (runs / "mask.run.json").write_text('{"system": "mask"}\n')
    subprocess.run([sys.executable, os.path.join(REPO, "examples", "pack_runs.py"), "pack", str(runs)], check=True,
                   capture_output=True)
    (runs / "ckpt-mask").mkdir()
    (runs / "ckpt-mask" / "checkpoint_last.pt").write_bytes(b"")
    (bin_dir / "fairseq-train").write_text(f"#!/usr/bin/env bash\ntouch {tmp_path}/trained\n")
    (bin_dir / "fairseq-train").chmod(0o755)
    script = f"""
set -euo pipefail
source examples/common.sh
run_system mask transformer_syntax_mask {tmp_path}/data {tmp_path}/test.de {runs} -- --seed 1 --cpu || echo "returned $?"
"""
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")
    result = subprocess.run(["bash", "-c", script], cwd=REPO, capture_output=True, text=True, check=False, env=env)
    assert result.stdout.strip() == "returned 1", result.stdout + result.stderr
    assert f"mask's outputs are packed in {runs}/packed.tar.xz" in result.stderr
    assert not (tmp_path / "trained").exists()
    (runs / "SHA256SUMS").write_text(f"{'0' * 64}  packed.tar.xz\n")  # not the archive's checksum
    result = subprocess.run(["bash", "-c", script], cwd=REPO, capture_output=True, text=True, check=False, env=env)
    assert result.returncode == 2 and "returned" not in result.stdout, result.stdout + result.stderr
    assert f"error: cannot tell whether {runs}/mask.gen is kept (the error above): stopped" in result.stderr
    assert "its SHA-256 is not the one" in result.stderr and not (tmp_path / "trained").exists()


def test_records_name_paths_relative_to_the_repository_that_holds_the_runs_folder(tmp_path):
    """A lane run from a worktree writes into another checkout's runs folder: its records' paths are made relative
    to that checkout (they named the folder by its absolute path); a runs folder outside any repository keeps the
    recipe's own repository as the root."""
    checkout = tmp_path / "checkout"
    runs = checkout / "examples" / "multi30k" / "runs"
    runs.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(checkout)], check=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    script = f"""
source examples/common.sh
portable_paths {runs}; echo "${{PORTABLE_PATHS[@]}}"
portable_paths {outside}; echo "${{PORTABLE_PATHS[@]}}"
"""
    result = subprocess.run(["bash", "-c", script], cwd=REPO, capture_output=True, text=True, check=True,
                            env={k: v for k, v in os.environ.items() if k != "OUT_DIR"})
    assert result.stdout.splitlines() == [f"--repo-root {checkout.resolve()}", f"--repo-root {REPO}"]
