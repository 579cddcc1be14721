"""docs/parsers.md's cluster guide run as written on a small corpus (sizes of SUBSTITUTIONS), ending in training."""
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
from conftest import REPO
from test_docs import fenced_blocks, shown_commands

ROOT = Path(REPO)
SECTION = "### A cluster, step by step"
#: the small corpus's sizes; the training line also gets TRAINING_EXTRA
SUBSTITUTIONS = {
    "--num-shards 64": "--num-shards 3",
    "-l 2250000": "-l 20",
    "-s 40000": "-s 60",
    "--arch transformer_ldd ": "--arch transformer_ldd_tiny ",
    "--warmup-updates 4000": "--warmup-updates 1",
    "--max-tokens 4096": "--max-tokens 1000",
    "--max-update 100000": "--max-update 10",
}
TRAINING_EXTRA = " --cpu --num-workers 0 --seed 1 --no-epoch-checkpoints --log-format simple --log-interval 1"
TRAIN_LINES, VALID_LINES = 40, 6
NOUNS, VERBS = ["cat", "dog", "man", "father"], ["sees", "likes"]
GERMAN = {"cat": "katze", "dog": "hund", "man": "mann", "father": "vater", "sees": "sieht", "likes": "mag"}


def section_text() -> str:
    text = (ROOT / "docs" / "parsers.md").read_text(encoding="utf-8")
    start = text.index(SECTION)
    return text[start:text.index("\n**A GPU**", start)]


def section_blocks() -> list[str]:
    """The bash blocks of the section, as written (the scripts keep their comment and #SBATCH lines)."""
    return ["\n".join(lines) + "\n" for language, lines in fenced_blocks(section_text()) if language == "bash"]


def substituted(text: str) -> str:
    for shown, small in SUBSTITUTIONS.items():
        text = text.replace(shown, small)
    return text


def raw_corpus(folder: Path) -> None:
    """Raw text ``the N V the N.``, every 7th line with a bracketed aside (PTB-escaped for the parsers)."""
    (folder / "raw").mkdir()
    for split, count in (("train", TRAIN_LINES), ("valid", VALID_LINES)):
        english, german = [], []
        for k in range(count):
            subject, obj, verb = NOUNS[k % 4], NOUNS[(k // 4 + 1 + k) % 4], VERBS[k // 2 % 2]
            aside = " (the man)" if k % 7 == 3 else ""
            english.append(f"the {subject}{aside} {verb} the {obj}.")
            german.append(f"die {GERMAN[subject]} {GERMAN[verb]} die {GERMAN[obj]}.")
        (folder / "raw" / f"{split}.en").write_text("\n".join(english) + "\n")
        (folder / "raw" / f"{split}.de").write_text("\n".join(german) + "\n")


def tiny_models(folder: Path, constituency_model: str, dependency_model: str, tagger_model: str) -> None:
    """MODELS/ with the page's file names: conftest's tiny crf-con and biaffine parsers and its untrained tagger."""
    import shutil

    (folder / "MODELS").mkdir()
    for model, name in ((constituency_model, "crf-con-ptb-sample.pt"), (tagger_model, "tagger-ptb-sample.pt"),
                        (dependency_model, "biaffine-dep-ud-ewt.pt")):
        shutil.copy(model, folder / "MODELS" / name)


def expand_loops(commands: list[str]) -> list[str]:
    """``for VAR in A B; do`` .. ``done`` unrolled, ``$VAR`` replaced."""
    out, index = [], 0
    while index < len(commands):
        loop = re.fullmatch(r"for (\w+) in (.+); do", commands[index])
        if loop is None:
            out.append(commands[index])
            index += 1
            continue
        end = commands.index("done", index)
        for value in loop.group(2).split():
            out += [re.sub(rf"\${loop.group(1)}\b", value, line) for line in commands[index + 1:end]]
        index = end + 1
    return out


def run_in_process(command: str) -> bool:
    """The page's Python commands run by their own ``main`` in this process; False for another command."""
    import runpy

    from fairseq_syntax.cli import merge_dictionaries
    from fairseq_syntax.cli import preprocess as syntax_preprocess
    from fairseq_syntax.methods.ldd import preprocess as dependencies
    from fairseq_syntax.parsing import normalize

    programs = {"python3 -m fairseq_syntax.parsing.normalize": normalize.main,
                "python3 -m fairseq_syntax.cli.merge_dictionaries": merge_dictionaries.main,
                "fairseq-syntax-preprocess-dependencies": dependencies.main,
                "fairseq-syntax-preprocess": syntax_preprocess.main}
    for name, main in programs.items():
        if command.startswith(name + " "):
            main(shlex.split(command[len(name):]))
            return True
    if command.startswith("python3 preprocess/"):  # a parse script, by path
        words = shlex.split(command)
        runpy.run_path(words[1], run_name="guide")["main"](words[2:])
        return True
    return False


def run_array_job(work: Path) -> None:
    """``sbatch parse.sbatch``: its three tasks at once, each by bash as a node runs it."""
    tasks = [subprocess.Popen(["bash", "parse.sbatch"], cwd=work, env=dict(os.environ, SLURM_ARRAY_TASK_ID=str(k)),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for k in range(3)]
    for task in tasks:
        output = task.communicate()[0]
        assert task.returncode == 0, output[-3000:]
    assert sorted(path.name for path in (work / "tok").glob("train.tree.shard*-of-3.json")) == [
        f"train.tree.shard{k}-of-3.json" for k in range(3)]
    assert not (work / "tok" / "train.tree").exists()


def run_merge(script: str, work: Path) -> None:
    """``sbatch --dependency=afterok:$job merge.sbatch``: the script's commands, in this process."""
    for command in section_commands_of(script):
        assert command.startswith("set -") or run_in_process(command), command
    assert not list((work / "tok").glob("*.shard*"))  # the merge removed the shards


def test_the_large_corpus_guide_runs_as_written(tmp_path, constituency_model, dependency_model, tagger_model,
                                                monkeypatch):
    from fairseq.data import Dictionary
    from fairseq.data.indexed_dataset import MMapIndexedDataset

    work = tmp_path / "work"
    work.mkdir()
    for name in ("preprocess", "fairseq_syntax"):
        (work / name).symlink_to(ROOT / name)
    raw_corpus(work)
    tiny_models(work, constituency_model, dependency_model, tagger_model)
    monkeypatch.chdir(work)
    blocks = section_blocks()
    assert blocks[1].startswith("#!/bin/bash\n# parse.sbatch") and blocks[2].startswith("#!/bin/bash\n# merge.sbatch")
    (work / "parse.sbatch").write_text(substituted(blocks[1]))
    script_lines = set(section_commands_of(blocks[1]) + section_commands_of(blocks[2]))

    training, submitted = None, []
    for command in expand_loops([substituted(line) for line in shown_commands(section_text())]):
        if command in script_lines:
            continue  # in parse.sbatch or merge.sbatch, run when submitted
        if command.startswith(("sbatch ", "job=$(sbatch")):
            if not submitted:  # the array job, then its merge; no task failed, none is submitted again
                run_array_job(work)
            elif len(submitted) == 1:
                run_merge(blocks[2], work)
            submitted.append(command)
        elif command.startswith("fairseq-train "):
            training = command + TRAINING_EXTRA
        elif not run_in_process(command):
            result = subprocess.run(["bash", "-c", command], cwd=work, capture_output=True, text=True)
            assert result.returncode == 0, f"{command}\n{result.stderr[-2000:]}"

    train = (work / "tok" / "train.en").read_text().splitlines()
    assert len(train) == TRAIN_LINES and train[3] == "the father -LRB- the man -RRB- likes the cat ."
    trees = (work / "tok" / "train.tree").read_text().splitlines()
    assert len(trees) == TRAIN_LINES and "-LRB-" in trees[3]
    part0, part1 = work / "data-bin" / "sequence" / "part0", work / "data-bin" / "sequence" / "part1"
    assert (part0 / "dict.en.txt").read_text() == (part1 / "dict.en.txt").read_text() == (
        work / "dict" / "dict.txt").read_text()
    assert [len(MMapIndexedDataset(str(part / "train.en-de.en.ldd"))) for part in (part0, part1)] == [20, 20]
    # the parts' merged dictionary is the one fairseq-preprocess --joined-dictionary makes of the whole split
    whole = Dictionary()
    for lang in ("en", "de"):
        for line in (work / "bpe" / f"train.{lang}").read_text().splitlines():
            for token in line.split():
                whole.add_symbol(token)
    whole.finalize(padding_factor=8)
    assert (work / "dict" / "dict.txt").read_text() == "".join(
        f"{symbol} {count}\n" for symbol, count in zip(whole.symbols[whole.nspecial:], whole.count[whole.nspecial:]))

    # ten updates on both parts, each with its own side data
    result = subprocess.run(shlex.split(training), cwd=work, capture_output=True, text=True)
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-3000:]
    assert re.search(r"num_updates 10\b", log), log[-2000:]
    for part in ("part0", "part1"):
        assert f"loaded 20 examples from: data-bin/sequence/{part}/train.en-de.en.ldd" in log


def section_commands_of(block: str) -> list[str]:
    return [substituted(line) for line in shown_commands("```bash\n" + block + "```\n")]


@pytest.mark.parametrize("content, problem", [
    ("a 3\nb three\n", ":2: 'b three' is not a dictionary line 'SYMBOL COUNT'"),
    ("a 3\nb 1\na 2\n", ":3: the symbol 'a' again"),
    ("a 3\nb\x00 1\n", ":2: a control character U+0000 (NUL)"),
])
def test_merge_dictionaries_names_the_file_and_line_of_a_bad_entry(tmp_path, content, problem):
    from fairseq_syntax.cli import merge_dictionaries

    good, bad = tmp_path / "good.txt", tmp_path / "bad.txt"
    good.write_text("a 1\nc 5\n")
    bad.write_text(content)
    with pytest.raises(SystemExit) as stop:
        merge_dictionaries.main(["--output", str(tmp_path / "dict.txt"), str(good), str(bad)])
    assert str(stop.value).startswith(f"error: {bad}{problem}") and "\n" not in str(stop.value)
    assert not (tmp_path / "dict.txt").exists()
    with pytest.raises(SystemExit, match=f"error: {tmp_path}/missing.txt: no such file"):
        merge_dictionaries.main(["--output", str(tmp_path / "dict.txt"), str(good), str(tmp_path / "missing.txt")])


@pytest.mark.parametrize("source, problem", [
    (b"the cat sees.\nthe d\xe9g sees.\n", "src.en:2: not valid UTF-8 (byte 0xe9 at byte 6 of the line)"),
    (b"the cat sees.\n\n", "src.en:2: empty line"),
    (b"the cat sees.\n", "src.en and"),  # one line, the target two
    (None, "src.en: no such file"),
])
def test_normalize_names_the_file_and_line_of_bad_input_and_writes_nothing(tmp_path, source, problem):
    from fairseq_syntax.parsing import normalize

    if source is not None:
        (tmp_path / "src.en").write_bytes(source)
    (tmp_path / "tgt.de").write_text("die katze sieht.\ndie katze sieht.\n")
    with pytest.raises(SystemExit) as stop:
        normalize.main(["--text", "raw", "-s", "en", "-t", "de", "--source", str(tmp_path / "src.en"), "--target",
                        str(tmp_path / "tgt.de"), "--output", str(tmp_path / "tok" / "train")])
    assert str(stop.value).startswith(f"{tmp_path}/{problem}") and "\n" not in str(stop.value)
    assert list((tmp_path / "tok").iterdir()) == []
