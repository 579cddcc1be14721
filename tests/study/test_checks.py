"""study.checks: plan refuses in one line (rc 2, nothing made) what run would refuse before it makes anything.
The archive holds seed 1's draw of 30 training lines (and valid, test); what it covers is derived from the text."""
import random
import shutil
import sys

import pytest

from study.test_prepare import snapshot

from fairseq_syntax.cli.study import main
from fairseq_syntax.parsing import archive
from fairseq_syntax.study.commands import run_study
from fairseq_syntax.study.config import load_study
from fairseq_syntax.study.prepare.corpus import subset_lines, subset_step
from fairseq_syntax.study.prepare.preparation import Preparation
from fairseq_syntax.study.records import StudyError

STUDY = """\
[study]
name = "checks"
[corpus]
raw = "raw"
text = "tokenized"
subset = {subset}
subset_seed = {seed}
max_train_words = {max_words}
[parses]
archive = "{archive}"
[[systems]]
name = "sequence"
[[systems]]
name = "mask"
"""
HELD = 30
PARSERS = ("give the parsers instead (parses.constituency, by pretrained name or path: python3 "
           "examples/train_parsers.py --study FILE trains them without the network)")


@pytest.fixture(scope="module")
def partial(corpus):
    """The parse archive cut to seed 1's draw of 30 training lines, every valid and test line."""
    tok, store = corpus / "partial-tok", corpus / "partial"
    tok.mkdir()
    lines = (corpus / "tok/train.en").read_text().splitlines()
    (tok / "train.en").write_text("".join(lines[n - 1] + "\n" for n in subset_lines(len(lines), HELD, 1)))
    for split in ("valid", "test"):
        shutil.copy(corpus / f"tok/{split}.en", tok / f"{split}.en")
    archive.unpack(str(corpus / "parses"), str(tok), "en", ["train", "valid", "test"])
    archive.pack(str(tok), str(store), "en", ["train", "valid", "test"], {}, str(corpus / "no-records"))
    return store


def study_file(folder, corpus, subset="0", seed=1, max_words=0, parses="partial", raw=None, text=STUDY):
    """A study in ``folder`` (raw text linked, or copied from ``raw``) reading ``parses``."""
    if raw is None:
        (folder / "raw").symlink_to(corpus / "raw")
    else:
        shutil.copytree(raw, folder / "raw")
    path = folder / "study.toml"
    path.write_text(text.format(subset=subset, seed=seed, max_words=max_words, archive=corpus / parses))
    return path


def plan(path, capsys) -> tuple[int, str, str]:
    status = main(["plan", str(path)])
    out, err = capsys.readouterr()
    return status, out, err


def refused(path, capsys) -> str:
    """plan's one line (rc 2, no stdout, no work folder)."""
    status, out, err = plan(path, capsys)
    assert (status, out) == (2, ""), err
    assert len(err.splitlines()) == 1 and err.startswith("error: ")
    assert not (path.parent / "work").exists()
    return err.removeprefix("error: ").rstrip("\n")


def train_lines(corpus, lang="en"):
    return (corpus / f"raw/train.{lang}").read_text().splitlines()


def order(seed: int, total: int = 60) -> list[int]:
    """corpus.subset's draw: the 1-based lines in the seed's random order."""
    return [n + 1 for n in random.Random(seed).sample(range(total), total)]


def held_texts(corpus) -> set:
    lines = train_lines(corpus)
    return {lines[n - 1] for n in order(1)[:HELD]}


def own_draw(corpus, wanted: int, study_seed: int) -> str:
    """The first of the study's seed, then 0-9, whose draw of ``wanted`` lies in the archive, else the longest."""
    lines, held = train_lines(corpus), held_texts(corpus)
    best = (0, study_seed)
    for seed in dict.fromkeys([study_seed, *range(10)]):
        inside = next((k for k, n in enumerate(order(seed)) if lines[n - 1] not in held), 60)
        if inside >= wanted:
            return f"draw lines it holds (corpus.subset_seed = {seed} draws all {wanted} from them)"
        best = max(best, (inside, seed), key=lambda found: found[0])
    return f"draw lines it holds (corpus.subset = {best[0]} or fewer, with corpus.subset_seed = {best[1]})"


def test_a_smaller_draw_of_the_archives_seed_lies_inside_it(corpus, partial, tmp_path, capsys):
    status, out, err = plan(study_file(tmp_path, corpus, subset=20), capsys)
    assert (status, err) == (0, "")
    assert out.splitlines()[-2:] == ["  6 to do",
                                     "  cost: 6 runs left; no finished run to estimate their cost from yet"]


@pytest.mark.parametrize("subset, seed, wanted", [("40", 1, 40), ("20", 2, 20), ("[20, 40]", 1, 40)])
def test_plan_and_run_refuse_training_lines_the_archive_does_not_hold_saying_how_many_and_the_two_ways_on(
        corpus, partial, tmp_path, capsys, subset, seed, wanted):
    lines, held = train_lines(corpus), held_texts(corpus)
    missing = [n for n in sorted(order(seed)[:wanted]) if lines[n - 1] not in held]
    assert 0 < len(missing) <= (wanted - HELD if seed == 1 else wanted)
    path = study_file(tmp_path, corpus, subset=subset, seed=seed)
    line = refused(path, capsys)
    assert line == (
        f"{path}: parses.archive: {partial} has no parse of {len(missing)} of the {wanted} training lines "
        f"corpus.subset draws (corpus.subset = {wanted}, corpus.subset_seed = {seed}; the first: train.en line "
        f"{missing[0]}): {PARSERS}, or {own_draw(corpus, wanted, seed)}")
    assert own_draw(corpus, 40, 1).startswith("draw lines it holds (corpus.subset = ")
    assert (main(["run", str(path)]), capsys.readouterr()) == (2, ("", f"error: {line}\n"))
    assert not (tmp_path / "work").exists()


def test_lines_max_train_words_leaves_out_need_no_parse(corpus, partial, tmp_path, capsys):
    source, target, held = train_lines(corpus), train_lines(corpus, "de"), held_texts(corpus)
    missing = [n for n in sorted(order(1)[:40]) if source[n - 1] not in held]
    lengths = sorted(max(len(source[n - 1].split()), len(target[n - 1].split())) for n in missing)
    limit = lengths[len(lengths) // 2]
    kept = [n for n in missing if max(len(source[n - 1].split()), len(target[n - 1].split())) <= limit]
    assert 0 < len(kept) < len(missing)
    path = study_file(tmp_path, corpus, subset=40, max_words=limit)
    assert refused(path, capsys).startswith(
        f"{path}: parses.archive: {partial} has no parse of {len(kept)} of the 40 training lines corpus.subset draws "
        f"(corpus.subset = 40, corpus.subset_seed = 1; the first: train.en line {kept[0]}): ")
    shorter = tmp_path / "shorter"
    shorter.mkdir()
    path = study_file(shorter, corpus, subset=40, max_words=lengths[0] - 1)
    assert plan(path, capsys)[0] == 0


def test_a_test_line_the_archive_does_not_hold_is_refused(corpus, partial, tmp_path, capsys):
    path = study_file(tmp_path, corpus, subset=20, raw=corpus / "raw")
    test = (tmp_path / "raw/test.en").read_text().splitlines()
    test[2] += " again"
    (tmp_path / "raw/test.en").write_text("".join(line + "\n" for line in test))
    assert refused(path, capsys) == (
        f"{path}: parses.archive: {partial} has no parse of 1 of the 10 lines of corpus.test ('test'; the first: "
        f"test.en line 3): parses of another corpus or tokenization; {PARSERS}")


def test_dependency_side_data_with_neither_parser_nor_archive_is_refused(corpus, tmp_path, capsys):
    text = STUDY.replace('archive = "{archive}"\n', "").replace('name = "mask"', 'name = "udp"')
    path = study_file(tmp_path, corpus, subset=20, text=text)
    message = refused(path, capsys)
    assert message.startswith(f"{path}: parses.dependency: the grid's systems read ") and "src_ldd" in message
    assert message.endswith(": give a parser (a pretrained name or a path) or parses.archive")


def test_slurm_without_submitit_is_refused_by_plan_and_by_run_before_anything_is_made(corpus, tmp_path, capsys,
                                                                                      monkeypatch):
    monkeypatch.setitem(sys.modules, "submitit", None)
    path = study_file(tmp_path, corpus, subset=20, parses="parses", text=STUDY + '[executor]\nkind = "slurm"\n')
    message = (f"{path}: executor slurm (executor.kind, or run's --executor) needs submitit, which is not installed "
               "here: pip install -e '.[slurm]' (from the repository)")
    assert refused(path, capsys) == message
    with pytest.raises(StudyError) as stopped:
        run_study(load_study(path), "slurm", 1, progress=lambda line: None)
    assert str(stopped.value) == message and not (tmp_path / "work").exists()


def test_a_runs_folder_outside_the_studys_project_is_refused(corpus, tmp_path, capsys):
    project = tmp_path / "project"
    (project / "studies" / ".git").mkdir(parents=True)  # the git checkout that holds the study file
    path = study_file(project / "studies", corpus, subset=20, parses="parses",
                      text=STUDY.replace('name = "checks"', 'name = "checks"\nruns = "../runs"'))
    assert refused(path, capsys) == (
        f"{path}: study.runs: {project / 'runs'} lies outside the study's project {project / 'studies'} (the git "
        "checkout that holds the study file, else its folder), and its records name their files relative to it: "
        "keep the runs folder inside (the work folder may lie anywhere)")
    (project / "studies" / ".git").rmdir()
    (project / ".git").mkdir()  # a checkout above: the runs folder lies inside it
    assert plan(path, capsys)[0] == 0


def test_a_work_folder_made_from_another_corpus_raw_is_refused_naming_what_differs(corpus, tmp_path, capsys):
    path = study_file(tmp_path, corpus, subset=20, parses="parses", raw=corpus / "raw")
    work = tmp_path / "work"
    work.mkdir()
    subset_step(Preparation(load_study(path), lambda line: None))
    status, out, err = plan(path, capsys)
    assert (status, err) == (0, "")
    target = (tmp_path / "raw/train.de").read_text().splitlines()
    target[4] = "ein anderer Satz"
    (tmp_path / "raw/train.de").write_text("".join(line + "\n" for line in target))
    before = snapshot(work)
    status, out, err = plan(path, capsys)
    assert (status, out) == (2, "")
    assert err == (f"error: {work / 'raw/train.en.gz'}: made from other inputs or settings than {path} gives "
                   "(corpus.raw/train.de: other content): not overwritten; give study.work another folder, or remove "
                   "it to make it again\n")
    assert snapshot(work) == before


def test_an_output_in_the_work_folder_without_its_record_is_refused(corpus, tmp_path, capsys):
    path = study_file(tmp_path, corpus, subset=20, parses="parses")
    (tmp_path / "work/raw").mkdir(parents=True)
    (tmp_path / "work/raw/train.en.gz").write_bytes(b"made elsewhere")
    status, out, err = plan(path, capsys)
    assert (status, out) == (2, "")
    assert err == (f"error: {tmp_path / 'work/raw/train.en.gz'}: there without a record in "
                   f"{tmp_path / 'work/prepared.json'} of what made it (not made by a study's preparation): not "
                   "overwritten; give study.work another folder, or remove it to make it again\n")
    assert (tmp_path / "work/raw/train.en.gz").read_bytes() == b"made elsewhere"
