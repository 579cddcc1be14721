"""The scripts of examples/ and bench/ take settings as flags with ``--help``, never environment variables."""
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REPO

ROOT = Path(REPO)
#: (file, variable) -> why the script may read it: none of them is a setting of the script
NOT_CONFIGURATION = {
    ("bench/cuda/window.sh", "TMPDIR"): "the system's temporary folder, where --work goes by default",
}
#: variables the shell or the system sets, read by a script without setting them
SHELL_VARIABLES = {"BASH_SOURCE", "PIPESTATUS", "PWD", "HOME", "PATH", "TMPDIR", "RANDOM", "SECONDS"}
#: ${NAME:-default}, ${NAME-default}, ${NAME:=default}, ${NAME:?message}: a read that expects the caller may set NAME
DEFAULTED_READ = re.compile(r"\$\{([A-Z_][A-Z0-9_]*):?[-=?]")
#: os.environ.get("NAME"), os.getenv("NAME"), os.environ["NAME"] (not assigned), "NAME" in os.environ
PYTHON_READ = re.compile(r"""os\.environ\.get\(\s*["'](\w+)|os\.getenv\(\s*["'](\w+)"""
                         r"""|os\.environ\[["'](\w+)["']\](?!\s*=[^=])|["'](\w+)["']\s+(?:not\s+)?in\s+os\.environ""")


def scripts(suffix: str) -> list[Path]:
    return sorted([*ROOT.glob(f"examples/**/*{suffix}"), *ROOT.glob(f"bench/**/*{suffix}")])


def shell_code(text: str) -> list[str]:
    """The lines of a shell script without comments, here-documents blanked (the usage texts)."""
    lines, end = [], None
    for line in text.splitlines():
        if end is not None:
            lines.append("")
            end = None if line.strip() == end else end
            continue
        heredoc = re.search(r"<<-?\s*'?(\w+)'?", line)
        end = heredoc[1] if heredoc else None
        lines.append("" if line.lstrip().startswith("#") else re.split(r"\s#", line)[0])
    return lines


def environment_reads(path: Path, root: Path = ROOT) -> list[str]:
    """``file:line: NAME`` for each read of an environment variable as configuration in a script."""
    name = str(path.relative_to(root))
    text = path.read_text(encoding="utf-8")
    found = []
    if path.suffix == ".sh":
        lines = shell_code(text)
        code = "\n".join(lines)
        # set by the script: NAME=..., local/export/readonly NAME, for NAME in, read NAME, printf -v NAME
        assigned = set(re.findall(r"(?:^|[\s;(])(?:(?:local|export|readonly)\s+)?([A-Z_][A-Z0-9_]*)\+?=", code, re.M))
        assigned |= set(re.findall(r"\b(?:local|export|readonly|for|read|printf -v)\s+(?:-\w+\s+)*([A-Z_][A-Z0-9_]*)",
                                   code))
        for number, line in enumerate(lines, 1):
            variables = set(DEFAULTED_READ.findall(line))
            # a variable the script reads and never sets can only come from its caller's environment
            variables |= {variable for variable in re.findall(r"\$\{?([A-Z_][A-Z0-9_]*)", line)
                          if variable not in assigned and variable not in SHELL_VARIABLES}
            found += [f"{name}:{number}: {variable}" for variable in sorted(variables)
                      if (name, variable) not in NOT_CONFIGURATION]
    else:
        for number, line in enumerate(text.splitlines(), 1):
            for match in PYTHON_READ.finditer(line.split("#")[0]):
                variable = next(group for group in match.groups() if group)
                if (name, variable) not in NOT_CONFIGURATION:
                    found.append(f"{name}:{number}: {variable}")
    return found


def test_no_script_of_examples_or_bench_reads_its_settings_from_the_environment():
    assert len(scripts(".sh")) >= 6 and len(scripts(".py")) >= 20  # the scan sees the scripts it is about
    reads = [read for path in scripts(".sh") + scripts(".py") for read in environment_reads(path)]
    assert reads == [], "settings read from the environment (take a flag; see --help of the others):\n" + \
        "\n".join(reads)


def test_the_scan_finds_each_kind_of_environment_read(tmp_path):
    """The scan on scripts written to fail it: one finding per read, named by file and line."""
    shell = tmp_path / "bench" / "x.sh"
    shell.parent.mkdir()
    shell.write_text('#!/usr/bin/env bash\n# ${COMMENTED:-1}\nA=${JOBS:-8}\ncat << EOF\n$IN_HEREDOC\nEOF\n'
                     'SET=1\necho "$SET $UNSET ${OTHER:=2} $HOME"\nlocal_thing=${1:-x}\n')
    python = tmp_path / "bench" / "y.py"
    python.write_text('import os\nos.environ["SET_HERE"] = "1"\nn = os.environ.get("THREADS", 1)\n'
                      'm = os.getenv("M")\nk = os.environ["K"]\nif "FLAG" in os.environ: pass\n')
    assert environment_reads(shell, tmp_path) == ["bench/x.sh:3: JOBS", "bench/x.sh:8: OTHER", "bench/x.sh:8: UNSET"]
    assert environment_reads(python, tmp_path) == ["bench/y.py:3: THREADS", "bench/y.py:4: M", "bench/y.py:5: K",
                                         "bench/y.py:6: FLAG"]


def run_script(script, *args, cwd=REPO, **env):
    return subprocess.run(["bash", str(script), *args], cwd=cwd, capture_output=True, text=True, timeout=300,
                          check=False, env={**os.environ, **env})


@pytest.mark.parametrize("script,options", [
    ("examples/ptb_induction/run.sh", ["--text ptb|mixed", "--eval-text", "--diagonal one|zero", "--optimiser",
                                       "--model-size", "--seed N", "--device cpu|cuda", "--updates N",
                                       "--precision bf16|fp32", "--stop-hours H", "--restart", "--nice N"]),
    ("examples/ptb_induction/run_gpu.sh", ["--updates N", "--seeds LIST", "--stop-hours H", "--log FILE",
                                           "--foreground"]),
    ("examples/sst/run.sh", ["--max-update N", "--stop-hours H", "--long", "--runs LIST", "--seeds LIST",
                             "--device cpu|cuda"]),
    ("bench/cuda/window.sh", ["--data DIR", "--window-dir DIR", "--device cpu|cuda", "--tiny", "--step-seconds N",
                              "--work DIR", "--archs LIST", "--precision P", "--study FILE", "--raw DIR",
                              "--runs-dir DIR", "--jobs N"]),
    ("bench/multi30k_precision/measure.sh", ["DATA_BIN"]),
    ("examples/demo/run.sh", ["--study FILE", "--jobs N"]),
    ("examples/multi30k/run.sh", ["--study FILE", "--jobs N", "--executor local|slurm"]),
    ("examples/multi30k_de_en/run.sh", ["--study FILE", "--jobs N", "--executor local|slurm"]),
    ("examples/iwslt15_en_vi/run.sh", ["--corpus DIR_OR_URL", "--treebanks DIR", "--study FILE", "--jobs N",
                                       "--executor local|slurm"]),
])
def test_each_script_says_what_it_takes(script, options):
    result = run_script(script, "--help")
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert all(option in result.stdout for option in options), result.stdout


#: script -> (its arguments, the one line's error) of each refusal
REFUSALS = {
    "examples/ptb_induction/run.sh": [
        (["--model-size", "huge"], "--model-size must be small, medium or paper, not 'huge'"),
        (["--updates", "many"], "--updates must be a whole number above 0, not 'many'"),
        (["--eval-text"], "--eval-text goes with --text mixed"),
        (["--device", "cuda", "--precision", "bf16"], "--precision is for a CPU"),
        (["--seed"], "--seed needs a value"),
        (["--updtes", "10"], "unknown option '--updtes' (--help lists them)"),
        (["{missing}"], "{missing}: no such folder")],
    "examples/ptb_induction/run_gpu.sh": [
        (["--seeds", "1 2"], "--seeds must be numbers separated by commas"),
        (["{missing}"], "{missing}: no such folder")],
    "examples/sst/run.sh": [
        (["--runs", "sst5.transfomer"], "--runs: no run 'sst5.transfomer' with these options"),
        (["--seeds", "1,2", "--long"], "--seeds replaces the runs of --long"),
        (["--device", "gpu"], "--device must be cpu or cuda, not 'gpu'"),
        (["{missing}"], "{missing}: no such folder (SST_DIR, see --help)")],
    "bench/cuda/window.sh": [
        (["5", "{out}"], "'5' is not prepare or a step (1 to 4)"), (["1"], "step 1: give its OUTDIR"),
        (["2", "{out}", "--study", "s.toml"], "--study is not an option of step 2"),
        (["prepare", "--jobs", "2"], "--jobs is not an option of prepare"),
        (["3", "{out}", "--precision", "fp8"], "--precision must be fp32, bf16 or fp16"),
        (["3", "{out}", "--device", "cpu", "--precision", "fp16"], "fp16 needs --device cuda"),
        (["4", "{out}", "--jobs", "0"], "--jobs must be a whole number above 0, not '0'")],
    "bench/multi30k_precision/measure.sh": [(["{missing}"], "{missing}: no such folder (DATA_BIN)")],
}


@pytest.mark.parametrize("script,args,error", [(script, *case) for script, cases in REFUSALS.items() for case in cases])
def test_a_bad_option_is_refused_in_one_line_before_any_work(script, args, error, tmp_path):
    values = {"missing": str(tmp_path / "missing"), "out": str(tmp_path / "out")}
    args = [arg.format(**values) for arg in args]
    error = error.format(**values)
    before = sorted(path.name for path in (ROOT / Path(script).parent).iterdir())
    result = run_script(script, *args)
    assert result.returncode == 2 and result.stdout == "", result.stdout + result.stderr
    assert result.stderr.count("\n") == 1 and f"{script}: error: " in result.stderr and error in result.stderr, \
        result.stderr
    assert sorted(path.name for path in (ROOT / Path(script).parent).iterdir()) == before  # nothing made
    assert not (tmp_path / "out").exists()


def fake_recipe(tmp_path, folder):
    """A checkout with examples/FOLDER's scripts whose `nice` logs commands and stops at the first training."""
    root = tmp_path / "repo"
    shutil.copytree(ROOT / "examples" / folder, root / "examples" / folder,
                    ignore=shutil.ignore_patterns("logs*", "work*", "*.tar.xz", "RESULTS.*", "*.png"))
    shutil.copy(ROOT / "examples" / "pack_runs.py", root / "examples")
    (root / "fairseq_syntax").symlink_to(ROOT / "fairseq_syntax")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nice").write_text('#!/bin/sh\necho "nice $2: $3"\nshift 2\necho "ran: $*"\n'
                                  '[ "$1" != fairseq-train ]\n')
    (bin_dir / "nice").chmod(0o755)
    return root, {"PATH": f"{bin_dir}:{os.environ['PATH']}"}


def test_sst_flags_reach_fairseq_train(tmp_path):
    root, env = fake_recipe(tmp_path, "sst")
    (root / "examples" / "sst" / "work" / "data" / "sst2").mkdir(parents=True)
    (root / "examples" / "sst" / "work" / "data" / "sst2" / "dict.txt").write_text("a 1\n")  # prepared already
    script = root / "examples" / "sst" / "run.sh"
    result = run_script(script, "--runs", "sst2.hier,sst5.hier", "--max-update", "10", "--stop-hours", "0.1", **env)
    assert result.returncode == 1 and "sst5.hier: training, log in" in result.stdout, result.stdout + result.stderr
    logs = root / "examples" / "sst" / "logs"
    assert os.listdir(logs) == ["sst5.hier.log"]  # sst5.hier comes first of the two; the others are not run
    log = (logs / "sst5.hier.log").read_text()
    assert log.startswith("nice 10: fairseq-train\nran: fairseq-train ")
    command = log.splitlines()[1]
    assert f"fairseq-train {root}/examples/sst/work/data/sst5 --user-dir {root}/fairseq_syntax " in command
    assert " --cpu " in command and " --max-update 10 --stop-time-hours 0.1 " in command
    assert command.endswith(" --arch transformer_hier_accum_classifier_tiny --input-form preorder --preterminals drop "
                            "--classifier-pooling first")
    # the defaults: 3000 updates or 0.22 hours; the first run is sst5's transformer
    result = run_script(script, **env)
    assert result.returncode == 1 and "sst5.transformer: training" in result.stdout
    assert " --max-update 3000 --stop-time-hours 0.22 " in (logs / "sst5.transformer.log").read_text()
    # --seeds: the paper's length, one run per seed and dataset, all at once, on the GPU
    result = run_script(script, "--seeds", "3", "--device", "cuda", "--runs", "sst2.transformer.15k.seed3", **env)
    command = (logs / "sst2.transformer.15k.seed3.log").read_text().splitlines()[1]
    assert " --cpu " not in command and command.endswith(" --max-update 15000 --warmup-updates 8000 "
                                                         "--stop-time-hours 1.5 --seed 3")
