"""README.md and docs/*.md: every command they show is run by a test, and every link in them resolves."""
import ast
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from conftest import REPO, tiny_corpus
from study.tiny_study_file import TINY_MODEL

ROOT = Path(REPO)
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: the docs/ pages the README links to, one per topic
TOPICS = ["methods", "data", "parsers", "usage", "study", "gpu", "results", "errors", "adding-a-method"]
#: the own-data example at the tests' size: the same commands with the tiny arch and one epoch
SIZE_CUTS = {"--arch transformer_syntax_mask ": "--arch transformer_syntax_mask_tiny ",
             "--max-epoch 30": "--max-epoch 2", "--beam 5": "--beam 5 --max-len-a 0 --max-len-b 12"}
#: program -> the test file that runs it, with every option a page shows
RUN_ELSEWHERE = {
    "python3 preprocess/parse_constituency.py": "tests/core/test_parsing.py",
    "python3 preprocess/parse_dependency.py": "tests/core/test_parsing.py",
    "fairseq-syntax-parse": "tests/core/test_parse_command.py",  # parsers.md, "Parse your corpus"
    "fairseq-train DATA": "tests/recipes/test_end_to_end.py",  # the distributed loop of docs/gpu.md
    "fairseq-interactive": "tests/recipes/test_interactive_parsing.py",  # raw text in, translation out (usage.md)
    "fairseq-train --help": "tests/recipes/test_user_dir.py",  # --user-dir from another folder (usage.md)
    # study.md: init, plan, run (--jobs, --only, --executor slurm), status, report --readme on a tiny study
    "fairseq-syntax-study": "tests/study/test_tiny_study.py",
    # parsers.md, "A cluster, step by step": the guide run as written on a small corpus
    **{program: "tests/recipes/test_large_corpus.py" for program in (
        "python3 -m fairseq_syntax.parsing.normalize", "python3 -m fairseq_syntax.cli.merge_dictionaries",
        "fairseq-syntax-preprocess", "fairseq-train data-bin/sequence/part0:data-bin/sequence/part1", "subword-nmt",
        "split", "zcat", "cp", "mkdir")},
}
#: a test that runs a page's commands as the page writes them (read from the page): its options are the page's
RUN_AS_WRITTEN = {"tests/recipes/test_large_corpus.py": "parsers.md"}
#: program -> why no test here runs it
NOT_RUN_HERE = {
    "sbatch": "a SLURM cluster",
    "job=$(sbatch": "a SLURM cluster",
    "torchrun": "several machines with GPUs",
}
#: shell syntax around the commands (the distributed loop, a variable set for the lines after it), not a program
SHELL_WORDS = ("for ", "done", "set -")
SHELL_ASSIGNMENT = re.compile(r"[A-Z_]+=\S+")


def fenced_blocks(text: str) -> list[tuple[str, list[str]]]:
    """(language, lines) of every fenced block of a Markdown text."""
    blocks, language, lines = [], None, []
    for line in text.splitlines():
        if line.startswith("```"):
            if language is None:
                language, lines = line[3:].strip(), []
            else:
                blocks.append((language, lines))
                language = None
        elif language is not None:
            lines.append(line)
    assert language is None, "a fenced block is not closed"
    return blocks


def shown_commands(text: str) -> list[str]:
    """The commands of the ``bash`` blocks: continuations joined, comments left out."""
    commands = []
    for language, lines in fenced_blocks(text):
        if language != "bash":
            continue
        joined = "\n".join(line for line in lines if not line.lstrip().startswith("#")).replace("\\\n", " ")
        for line in joined.splitlines():
            line = re.sub(r"\s{2,}#.*$", "", line).strip()
            if line:
                commands.append(re.sub(r"\s+", " ", line))
    return commands


def program(command: str) -> str:
    """The program a command runs, as the tables above name it."""
    for name in [*RUN_ELSEWHERE, *NOT_RUN_HERE]:
        if command.startswith(name):
            return name
    return command.split(" ")[0]


def options(command: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", command))


def options_passed(path: Path) -> set[str]:
    """Every ``--option`` that a string literal of a Python file holds: what it can pass on a command line."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return set().union(*(options(node.value) for node in ast.walk(tree)
                         if isinstance(node, ast.Constant) and isinstance(node.value, str)))


def readme_commands() -> list[str]:
    return shown_commands((ROOT / "README.md").read_text(encoding="utf-8"))


QUICKSTART = readme_commands()[:3]
OWN_DATA = readme_commands()[3:]


def test_the_readme_is_a_front_page_with_the_quickstart_first():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    assert re.findall(r"^## .*", text, re.M)[0] == "## Quickstart"
    assert QUICKSTART[1] == "bash examples/demo/run.sh"
    for topic in TOPICS:
        assert f"](docs/{topic}.md)" in text, f"the README links to no docs/{topic}.md"
    assert sorted(page.stem for page in PAGES[1:]) == sorted(TOPICS)


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_link_resolves(page):
    text = page.read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)\s#]+)(?:#[^)]*)?\)", text):
        if not re.match(r"[a-z]+://", target):
            assert (page.parent / target).exists(), f"{page.name}: a link to {target}, which is not there"
    for named in re.findall(r"`((?:tests|fairseq_syntax|bench|examples|preprocess)/[\w./-]+\.(?:py|sh|toml))`", text):
        assert (ROOT / named).exists(), f"{page.name}: names {named}, which is not there"


def test_every_command_shown_is_run_by_a_test():
    covered_here = set(QUICKSTART + OWN_DATA)
    for page in PAGES:
        for command in shown_commands(page.read_text(encoding="utf-8")):
            name = program(command)
            if command in covered_here or command.startswith(SHELL_WORDS) or SHELL_ASSIGNMENT.fullmatch(command):
                continue
            if name in NOT_RUN_HERE:
                assert "not run here" in re.sub(r"\s+", " ", page.read_text(encoding="utf-8")).lower(), (
                    f"{page.name}: `{name}` needs {NOT_RUN_HERE[name]}: the page must say it is not run here")
                wrapped = re.search(r'--wrap "(.*)"', command)  # a scheduler's command line is run elsewhere
                if wrapped:
                    command, name = wrapped.group(1), program(wrapped.group(1))
                else:
                    continue
            assert name in RUN_ELSEWHERE, f"{page.name}: no test runs `{command}`"
            if RUN_AS_WRITTEN.get(RUN_ELSEWHERE[name]) == page.name:
                assert f'"{page.name}"' in (ROOT / RUN_ELSEWHERE[name]).read_text(encoding="utf-8")
                continue
            missing = options(command) - options_passed(ROOT / RUN_ELSEWHERE[name])
            assert not missing, f"{page.name}: {RUN_ELSEWHERE[name]} runs `{name}` without {sorted(missing)}"


#: marks a line of .ci/run that the README does not show: what only CI needs (the real Slurm of tests/study)
CI_ONLY = "  # CI only"


def test_the_quickstarts_set_up_and_tests_are_what_ci_runs():
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and not line.startswith(
        ("#", "set ", "cd ")) and CI_ONLY not in line]
    assert ci == [QUICKSTART[0], QUICKSTART[2]]


def test_the_own_data_example_trains_decodes_and_scores(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    for split, size, seed in (("train", 60, 1), ("valid", 10, 2), ("test", 10, 3)):
        tiny_corpus(str(mine / split), size, seed)
    # the raw references the example scores against: the tokens, detokenized as Moses would
    from sacremoses import MosesDetokenizer

    detokenize = MosesDetokenizer(lang="de").detokenize
    (mine / "test.raw.de").write_text("".join(detokenize(line.split()) + "\n"
                                              for line in (mine / "test.de").read_text().splitlines()))
    (tmp_path / "fairseq_syntax").symlink_to(ROOT / "fairseq_syntax")  # --user-dir fairseq_syntax, as from the root
    script = "\n".join(OWN_DATA)
    for full, cut in SIZE_CUTS.items():
        assert full in script
        script = script.replace(full, cut)
    assert [program(command) for command in OWN_DATA] == [
        "fairseq-syntax-preprocess", "fairseq-train", "fairseq-generate", "fairseq-syntax-score"]
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    hypotheses = [line for line in (tmp_path / "test.gen").read_text().splitlines() if line.startswith("D-")]
    assert sorted(int(line.split("\t")[0][2:]) for line in hypotheses) == list(range(10))
    assert re.search(r"BLEU\S*\s*[:=]?\s*\d", done.stdout + done.stderr)


#: the main job at the tests' size: 200 training pairs, a tiny model, one epoch, two systems
DEMO_CUTS = """\
[study]
base = "{base}"
name = "demo-cut"
[corpus]
subset = 200
[bpe]
merges = 200
""" + TINY_MODEL + """\
[training]
max_epoch = 1
warmup_updates = 10
[decoding]
beam = 2
[test]
bootstrap_rounds = 200
run_bootstrap_rounds = 100
[[systems]]
name = "sequence"
[[systems]]
name = "mask"
"""


def test_the_main_job_makes_the_data_runs_the_study_and_ends_with_its_verdict_table(tmp_path):
    """The Quickstart's main job on a study based on the demo's: data, grid, runs, scores, verdict table last."""
    study = tmp_path / "demo-cut.toml"
    study.write_text(DEMO_CUTS.format(base=ROOT / "examples" / "demo" / "study.toml"), encoding="utf-8")
    claims = tmp_path / "claims"  # the runs claim their cores here, not beside this machine's other studies
    claims.mkdir()
    done = subprocess.run([*QUICKSTART[1].split(), "--study", str(study), "--jobs", "2"], cwd=REPO,
                          env={**os.environ, "TMPDIR": str(claims), "OMP_NUM_THREADS": "1"}, capture_output=True,
                          text=True, timeout=1500)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for made in ("data/train.en", "data/test.de", "parses/MANIFEST.json", "RESULTS.md", "runs/mask.seed1.run.json"):
        assert (tmp_path / "work" / made).is_file(), made
    assert (tmp_path / "work" / "data" / "train.en").read_text().count("\n") == 4000
    out = done.stdout.splitlines()
    assert out[0].startswith("== data: the synthetic corpus and its gold parses")
    plan = out.index(f"study demo-cut: 2 runs ({study})")
    assert [line.split()[:2] for line in out[plan + 1:plan + 3]] == [["sequence.seed1", "to"], ["mask.seed1", "to"]]
    assert "== 2 of 2 runs done" in out
    # the end: the verdict table, the rule, the link to the full table, the time
    table = out.index("| Method | Seeds | vs sequence |")
    assert out[table + 2].startswith("| mask | 1 of 1 | ") and out[table + 3] == ""
    assert out[table + 4].startswith("Rule (fixed before the results): ")
    link = os.path.relpath(tmp_path / "work" / "RESULTS.md", REPO)  # as the run.sh's folder reaches it
    assert out[table + 5].startswith("The full table (") and out[table + 5].endswith(f"[{link}]({link}).")
    assert re.fullmatch(r"== demo finished in \d+ s", out[-1]) and table + 6 == len(out) - 1
    # the row shows the verdict RESULTS.json holds (the rule itself: test_results' test_a_comparison_verdict_...)
    entry = json.loads((tmp_path / "work" / "RESULTS.json").read_text())["datasets"]["demo-cut"]
    found = entry["answer"]["systems"][0]["vs_baseline"]["verdict"]
    assert f"| mask | 1 of 1 | {'**' if found in ('better', 'worse') else ''}{found}" in out[table + 2]


def test_the_main_job_refuses_what_it_does_not_take(tmp_path):  # its --help: test_script_options.py
    for args, message in ((["--epochs", "3"], "error: --epochs: no such option (bash examples/demo/run.sh --help)"),
                          (["--study", str(tmp_path / "none.toml")],
                           f"error: --study {tmp_path / 'none.toml'}: no such file"),
                          (["--jobs"], "error: --jobs needs a number")):
        refused = subprocess.run(["bash", "examples/demo/run.sh", *args], cwd=REPO, capture_output=True, text=True)
        assert (refused.returncode, refused.stderr, refused.stdout) == (2, message + "\n", ""), args


def test_a_virtual_environment_made_in_the_checkout_is_ignored():
    # the Quickstart's set-up inside the clone (python -m venv .venv, or venv): its thousands of files untracked
    for path in (".venv/lib/python3.11/site-packages/torch/__init__.py", "venv/bin/python"):
        ignored = subprocess.run(["git", "check-ignore", "--no-index", "-q", path], cwd=REPO)
        assert ignored.returncode == 0, f"{path} is not ignored"
    kept = subprocess.run(["git", "check-ignore", "--no-index", "-q", "examples/venv.md"], cwd=REPO)
    assert kept.returncode == 1  # a file merely named like one is not
