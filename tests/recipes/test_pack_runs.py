"""Finished runs packed by examples/pack_runs.py and read by evaluation/packed_runs.py: same text, safe, stable."""
import gzip
import hashlib
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

from fairseq_syntax.cli import score
from fairseq_syntax.evaluation import kept_files, packed_runs, records, results, scoring, train_logs

PACKER = Path(REPO) / "examples" / "pack_runs.py"
_spec = importlib.util.spec_from_file_location("pack_runs", PACKER)
pack_runs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pack_runs)

LOG = ("2024-05-01 10:00:03 | INFO | train | epoch 001 | loss 4.4 | num_updates 12 | wall 30\n"
       "2024-05-01 10:00:09 | INFO | train | epoch 002 | loss 4.1 | num_updates 24 | wall 61\n")


def kept_run(runs, run, hypotheses, record=True):
    """A run as run_system leaves it: gzipped decode, train log, decode log, and a stand-in record."""
    for suffix, text in ((".gen.gz", "".join(f"H-{i}\t-0.5\t{h}\n" for i, h in enumerate(hypotheses))),
                         (".train.log.gz", LOG), (".gen.log.gz", "Generate test with beam=5: BLEU4 = 1.00\n")):
        with gzip.open(runs / f"{run}{suffix}", "wt", encoding="utf-8") as out:
            out.write(text)
    if record:
        (runs / f"{run}.run.json").write_text(f'{{"run": "{run}"}}\n')


@pytest.fixture
def runs(tmp_path):
    folder = tmp_path / "runs"
    folder.mkdir()
    kept_run(folder, "mask.seed1", ["ein Hund", "zwei Katzen"])
    kept_run(folder, "mask.seed2", ["ein Hund läuft", "Katzen"])
    kept_run(folder, "mask_random.seed1", ["ein", "zwei"])  # another system whose name starts the same
    return folder


def test_pack_moves_a_systems_outputs_into_one_checksummed_archive_and_every_reader_gets_the_same_text(runs):
    (runs / "mask.seeds.run.json").write_text('{"run": "mask over seeds"}\n')  # no outputs of its own: stays
    removed = pack_runs.pack(runs, "mask")
    assert sorted(path.name for path in removed) == [
        "mask.seed1.gen.gz", "mask.seed1.gen.log.gz", "mask.seed1.run.json", "mask.seed1.train.log.gz",
        "mask.seed2.gen.gz", "mask.seed2.gen.log.gz", "mask.seed2.run.json", "mask.seed2.train.log.gz"]
    assert sorted(path.name for path in runs.iterdir()) == [
        "SHA256SUMS", "mask.seeds.run.json", "mask_random.seed1.gen.gz", "mask_random.seed1.gen.log.gz",
        "mask_random.seed1.run.json", "mask_random.seed1.train.log.gz", "packed.tar.xz"]
    digest = hashlib.sha256((runs / "packed.tar.xz").read_bytes()).hexdigest()
    assert (runs / "SHA256SUMS").read_text() == f"{digest}  packed.tar.xz\n"
    # named with or without .gz, as the records and recipes name them
    assert scoring.read_lines(runs / "mask.seed2.gen.gz") == ["H-0\t-0.5\tein Hund läuft", "H-1\t-0.5\tKatzen"]
    assert scoring.read_lines(runs / "mask.seed1.gen") == ["H-0\t-0.5\tein Hund", "H-1\t-0.5\tzwei Katzen"]
    # the last epoch's statistics of the log: 2 epochs, 24 updates, 61 s
    assert train_logs.parse_train_log(runs / "mask.seed2.train.log.gz") == {"updates": 24, "epochs": 2,
                                                                          "wall_time_s": 61.0}
    # the other system joins the same archive; the first one's files read as before
    pack_runs.pack(runs, "mask_random")
    assert sorted(path.name for path in runs.iterdir() if not path.name.endswith(".run.json")) == [
        "SHA256SUMS", "packed.tar.xz"]
    assert scoring.read_lines(runs / "mask_random.seed1.gen.gz") == ["H-0\t-0.5\tein", "H-1\t-0.5\tzwei"]
    assert scoring.read_lines(runs / "mask.seed1.gen") == ["H-0\t-0.5\tein Hund", "H-1\t-0.5\tzwei Katzen"]


def test_the_archive_is_the_same_bytes_wherever_it_is_made_and_unpack_gives_the_files_back(runs, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    for path in runs.iterdir():
        (other / path.name).write_bytes(path.read_bytes())
    originals = {path.name: gzip.decompress(path.read_bytes()) for path in runs.glob("mask.seed*.gz")}
    originals.update({path.name: path.read_bytes() for path in runs.glob("mask.seed*.run.json")})
    pack_runs.pack(runs, "mask")
    pack_runs.pack(other, "mask")
    assert (runs / "packed.tar.xz").read_bytes() == (other / "packed.tar.xz").read_bytes()
    pack_runs.pack(runs, "mask_random")
    written = pack_runs.unpack(runs, "mask")  # one system out, the other stays packed; records as plain JSON
    assert {path.name: gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
            for path in written} == originals
    assert packed_runs.find_member(runs / "mask_random.seed1.gen") is not None
    assert packed_runs.find_member(runs / "mask.seed1.gen") is None
    pack_runs.unpack(runs, "mask_random")  # the last one out: no archive, no checksum file
    assert not (runs / "packed.tar.xz").exists() and not (runs / "SHA256SUMS").exists()


def test_only_finished_runs_are_packed_and_nothing_packed_is_replaced(runs):
    kept_run(runs, "mask.seed3", ["drei"], record=False)  # decoded, not scored yet
    with pytest.raises(packed_runs.PackedRunsError, match=r"mask.seed3.gen.gz: its run has no record "
                                                          r"mask.seed3.run.json"):
        pack_runs.pack(runs, "mask")
    (runs / "mask.seed3.run.json").write_text("{}")
    (runs / "mask.seed3.train.log").write_text(LOG)  # a run still training: its log is not gzipped yet
    with pytest.raises(packed_runs.PackedRunsError, match=r"mask.seed3.train.log: not a kept output"):
        pack_runs.pack(runs, "mask")
    (runs / "mask.seed3.train.log").unlink()
    assert not (runs / "packed.tar.xz").exists()  # nothing was packed by the refused calls
    pack_runs.pack(runs, "mask")
    kept_run(runs, "mask.seed1", ["again"])  # the same run's files again: packed already
    with pytest.raises(packed_runs.PackedRunsError, match=r"holds mask.seed1.gen already"):
        pack_runs.pack(runs, "mask")
    # a fourth seed joins the archive; the other three stay as they were
    for path in runs.glob("mask.seed1.*"):
        path.unlink()
    kept_run(runs, "mask.seed4", ["vier"])
    pack_runs.pack(runs, "mask")
    assert scoring.read_lines(runs / "mask.seed4.gen.gz") == ["H-0\t-0.5\tvier"]
    assert scoring.read_lines(runs / "mask.seed1.gen.gz") == ["H-0\t-0.5\tein Hund", "H-1\t-0.5\tzwei Katzen"]


def test_log_folders_packed_into_the_archive_above_them_are_read_and_listed_as_before(tmp_path):
    recipe = tmp_path / "recipe"
    for folder, names in (("logs", ("train.log", "induce.log", "scores.json")), ("logs-other", ("train.log",))):
        (recipe / folder).mkdir(parents=True)
        for name in names:
            with gzip.open(recipe / folder / f"{name}.gz", "wt", encoding="utf-8") as out:
                out.write(f"{folder}/{name}\n")
    (recipe / "logs-other" / "README.md").write_text("how it was run\n")
    for folder in ("logs", "logs-other"):
        pack_runs.pack_folder(recipe / folder, into=recipe)
    assert sorted(str(path.relative_to(recipe)) for path in recipe.rglob("*") if path.is_file()) == [
        "SHA256SUMS", "logs-other/README.md", "packed.tar.xz"]  # the README stays a file
    assert sorted(packed_runs.archive_members(recipe / "packed.tar.xz")) == [
        "logs-other/train.log", "logs/induce.log", "logs/scores.json", "logs/train.log"]
    # reading such an archive, and a stale copy beside it: tests/core/test_packed_runs.py
    written = pack_runs.unpack_folder(recipe / "logs", into=recipe)  # one folder back; the other stays packed
    assert sorted(path.name for path in written) == ["induce.log.gz", "scores.json.gz", "train.log.gz"]
    assert gzip.decompress((recipe / "logs" / "train.log.gz").read_bytes()) == b"logs/train.log\n"
    assert sorted(packed_runs.archive_members(recipe / "packed.tar.xz")) == ["logs-other/train.log"]
    with pytest.raises(packed_runs.PackedRunsError, match=r"recipe/logs: not .*recipe/logs-other nor a folder above"):
        pack_runs.pack_folder(recipe / "logs-other", into=recipe / "logs")


def test_pack_without_a_name_takes_every_finished_run_and_leaves_the_runs_still_going(runs, capsys):
    (runs / "mask.seed3.train.log").write_text(LOG)  # still training
    kept_run(runs, "mask.seed4", ["vier"], record=False)  # decoded, not scored yet
    removed = pack_runs.pack(runs)
    assert sorted(path.name for path in removed) == sorted(
        f"{run}.{kept}" for run in ("mask.seed1", "mask.seed2", "mask_random.seed1")
        for kept in ("gen.gz", "gen.log.gz", "train.log.gz", "run.json"))
    assert sorted(path.name for path in runs.iterdir()) == [
        "SHA256SUMS", "mask.seed3.train.log", "mask.seed4.gen.gz", "mask.seed4.gen.log.gz", "mask.seed4.train.log.gz",
        "packed.tar.xz"]
    assert pack_runs.pack(runs) == []  # nothing finished is left to pack: not an error
    (runs / "mask.seed4.run.json").write_text("{}")  # scored: the next sweep takes it
    done = subprocess.run([sys.executable, str(PACKER), "pack", str(runs)], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0
    assert done.stdout.strip() == (f"4 files packed into {runs / 'packed.tar.xz'}; 1 files of runs not finished left "
                                   "as they are")
    assert scoring.read_lines(runs / "mask.seed4.gen") == ["H-0\t-0.5\tvier"]
    assert pack_runs.main(["pack", str(runs), "mask_random"]) == 2  # a system with nothing left to pack: one line
    assert capsys.readouterr().err == (f"error: {runs}: no kept run outputs "
                                       "mask_random.*{.train.log.gz,.gen.gz,.gen.log.gz} to pack\n")


def test_packed_records_are_found_and_read_like_files_and_a_packed_run_is_not_rescored_in_place(runs, capsys):
    record = {"dataset": "d", "system": "mask", "arch": "a", "command": "c", "updates": 1, "epochs": 1,
              "wall_time_s": 1.0, "train_log": "l", "metrics": {"BLEU": 1.0}, "significance": {}}
    (runs / "mask_random.seed1.run.json").write_text(json.dumps(dict(record, dataset="e", system="mask_random")))
    pack_runs.pack(runs)  # the three runs, records included
    (runs / "mask.seeds.run.json").write_text(json.dumps(record))
    # a directory lists its records on disk and packed; a packed one reads as the file read
    assert [path.name for path in records.find_record_files([runs])] == [
        "mask.seed1.run.json", "mask.seed2.run.json", "mask.seeds.run.json", "mask_random.seed1.run.json"]
    assert records.find_record_files([runs / "mask.seed2.run.json"]) == [runs / "mask.seed2.run.json"]
    with pytest.raises(kept_files.RecordError, match=r"mask.seed1.run.json: run record lacks dataset"):
        records.load_record(runs / "mask.seed1.run.json")  # the stand-in {"run": ...}, read from the archive
    # the table lists both records and says how to read the packed one
    sources = [str(runs / "mask.seeds.run.json"), str(runs / "mask_random.seed1.run.json")]
    table = results.render_markdown([records.load_record(source) for source in sources], sources=sources)
    assert ("The records of finished runs are packed with their logs and decodes (`packed.tar.xz` beside them): "
            "`python3 fairseq_syntax/evaluation/packed_runs.py cat RECORD` shows one.") in table
    assert "packed with" not in results.render_markdown([record], sources=[str(runs / "mask.seeds.run.json")])
    assert "| mask_random |" in table
    # a record both packed and on disk again: one of them is stale
    (runs / "mask.seed2.run.json").write_text("{}")
    with pytest.raises(packed_runs.PackedRunsError, match=r"mask.seed2.run.json: on disk and in .*packed.tar.xz"):
        records.find_record_files([runs])
    (runs / "mask.seed2.run.json").unlink()
    # rescoring a packed run would write its record beside the packed one: refused before any scoring, named
    hyp = runs / "hyp.txt"
    hyp.write_text("ein Hund\n")
    with pytest.raises(SystemExit):
        score.main([str(hyp), str(hyp), "--record", str(runs / "mask.seed1.run.json"), "--dataset", "d",
                    "--system", "mask", "--arch", "a", "--train-log", "l", "--train-command", "c"])
    refusal = capsys.readouterr().err
    assert (f"its run is packed ({runs / 'packed.tar.xz'}:mask.seed1.run.json): unpack it first (python3 "
            "examples/pack_runs.py unpack RUNS_DIR NAME)") in refusal


# another process packing: holds the lock while replacing the archive, then writes SHA256SUMS, removes files
SLOW_PACKER = """
import os, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[3])
import pack_runs
from fairseq_syntax.evaluation import packed_runs
folder = Path(sys.argv[1])
with pack_runs._folder_lock(folder):
    members = dict(packed_runs.archive_members(folder / "packed.tar.xz"))
    members["mask_random.seed1.gen"] = b"H-0\\t\\tein\\n"
    (folder / "packed.tar.xz").write_bytes(pack_runs._tar_bytes(members))  # the archive first
    Path(sys.argv[2]).write_text("replaced")
    time.sleep(1.5)
    sums = packed_runs.read_checksums(folder)
    sums["packed.tar.xz"] = packed_runs.sha256_of(folder / "packed.tar.xz")
    pack_runs.write_checksums(folder, sums)  # then its checksum
    (folder / "mask_random.seed1.gen.gz").unlink()  # then the packed file leaves the disk
"""


def test_a_reader_waits_for_a_packer_in_another_process_and_never_sees_its_steps_half_done(runs, tmp_path):
    pack_runs.pack(runs, "mask")
    signal = tmp_path / "replaced"
    packer = subprocess.Popen([sys.executable, "-c", SLOW_PACKER, str(runs), str(signal), str(PACKER.parent)])
    try:
        while not signal.exists():
            assert packer.poll() is None, "the packer stopped before replacing the archive"
        # read mid-pack: each reader waits for the packer's lock, never calls the archive damaged or the file stale
        assert packed_runs.read_bytes(runs / "mask_random.seed1.gen") == b"H-0\t\tein\n"
        assert packed_runs.has(runs / "mask.seed1.gen.gz")
        assert "mask_random.seed1.gen" in [path.name for path in packed_runs.rglob(runs, ".gen")]
        assert packed_runs.glob(str(runs / "mask*.seed1.gen")) == [
            str(runs / "mask.seed1.gen"), str(runs / "mask_random.seed1.gen")]
    finally:
        assert packer.wait(timeout=60) == 0


def test_a_record_that_does_not_parse_is_not_packed_and_nothing_is_removed(runs):
    (runs / "mask.seed2.run.json").write_text('{"run": "mask.se')  # cut short
    before = sorted(path.name for path in runs.iterdir())
    with pytest.raises(packed_runs.PackedRunsError, match=r"mask\.seed2\.run\.json: not a whole run record"):
        pack_runs.pack(runs)
    assert sorted(path.name for path in runs.iterdir()) == before  # no archive, every file where it was
