"""A finished system's gzipped logs and decodes packed into NAME.tar.xz (fairseq_syntax/evaluation/packed_runs.py):
every reader gets the same text from the archive, only finished runs are packed, a damaged archive is named, and
the archive is the same bytes wherever it is made."""
import gzip
import hashlib
import subprocess
import sys

import pytest

from fairseq_syntax.evaluation import packed_runs, results, scoring

LOG = ("2024-05-01 10:00:03 | INFO | train | epoch 001 | loss 4.4 | num_updates 12 | wall 30\n"
       "2024-05-01 10:00:09 | INFO | train | epoch 002 | loss 4.1 | num_updates 24 | wall 61\n")


def kept_run(runs, run, hypotheses, record=True):
    """A run as run_system leaves it: its gzipped decode, train log and decode log, and its record."""
    for suffix, text in ((".gen.gz", "".join(f"H-{i}\t-0.5\t{h}\n" for i, h in enumerate(hypotheses))),
                         (".train.log.gz", LOG), (".gen.log.gz", "Generate test with beam=5: BLEU4 = 1.00\n")):
        with gzip.open(runs / f"{run}{suffix}", "wt", encoding="utf-8") as out:
            out.write(text)
    if record:
        (runs / f"{run}.run.json").write_text("{}")


@pytest.fixture
def runs(tmp_path):
    folder = tmp_path / "runs"
    folder.mkdir()
    kept_run(folder, "mask.seed1", ["ein Hund", "zwei Katzen"])
    kept_run(folder, "mask.seed2", ["ein Hund läuft", "Katzen"])
    kept_run(folder, "mask_random.seed1", ["ein", "zwei"])  # another system whose name starts the same
    return folder


def test_pack_moves_a_systems_outputs_into_one_checksummed_archive_and_every_reader_gets_the_same_text(runs):
    removed = packed_runs.pack(runs, "mask")
    assert sorted(path.name for path in removed) == [
        "mask.seed1.gen.gz", "mask.seed1.gen.log.gz", "mask.seed1.train.log.gz",
        "mask.seed2.gen.gz", "mask.seed2.gen.log.gz", "mask.seed2.train.log.gz"]
    assert sorted(path.name for path in runs.iterdir()) == [
        "SHA256SUMS", "mask.seed1.run.json", "mask.seed2.run.json", "mask.tar.xz",
        "mask_random.seed1.gen.gz", "mask_random.seed1.gen.log.gz", "mask_random.seed1.run.json",
        "mask_random.seed1.train.log.gz"]
    digest = hashlib.sha256((runs / "mask.tar.xz").read_bytes()).hexdigest()
    assert (runs / "SHA256SUMS").read_text() == f"{digest}  mask.tar.xz\n"
    # named with or without .gz, as the records and recipes name them
    assert scoring.read_lines(runs / "mask.seed2.gen.gz") == ["H-0\t-0.5\tein Hund läuft", "H-1\t-0.5\tKatzen"]
    assert scoring.read_lines(runs / "mask.seed1.gen") == ["H-0\t-0.5\tein Hund", "H-1\t-0.5\tzwei Katzen"]
    assert results.read_text(runs / "mask.seed1.train.log.gz") == LOG
    # the last epoch's statistics of the log: 2 epochs, 24 updates, 61 s
    assert results.parse_train_log(runs / "mask.seed2.train.log.gz") == {"updates": 24, "epochs": 2,
                                                                          "wall_time_s": 61.0}
    assert packed_runs.has(runs / "mask.seed1.gen.log.gz") and packed_runs.has(runs / "mask_random.seed1.gen")
    assert not packed_runs.has(runs / "mask.seed3.gen.gz")


def test_the_archive_is_the_same_bytes_wherever_it_is_made_and_unpack_gives_the_files_back(runs, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    for path in runs.iterdir():
        (other / path.name).write_bytes(path.read_bytes())
    originals = {path.name: gzip.decompress(path.read_bytes()) for path in runs.glob("mask.seed*.gz")}
    packed_runs.pack(runs, "mask")
    packed_runs.pack(other, "mask")
    assert (runs / "mask.tar.xz").read_bytes() == (other / "mask.tar.xz").read_bytes()
    written = packed_runs.unpack(runs, "mask")
    assert {path.name: gzip.decompress(path.read_bytes()) for path in written} == originals
    assert not (runs / "mask.tar.xz").exists() and not (runs / "SHA256SUMS").exists()


def test_only_finished_runs_are_packed_and_nothing_packed_is_replaced(runs):
    kept_run(runs, "mask.seed3", ["drei"], record=False)  # decoded, not scored yet
    with pytest.raises(packed_runs.PackedRunsError, match=r"mask.seed3.gen.gz: its run has no record "
                                                          r"mask.seed3.run.json"):
        packed_runs.pack(runs, "mask")
    (runs / "mask.seed3.run.json").write_text("{}")
    (runs / "mask.seed3.train.log").write_text(LOG)  # a run still training: its log is not gzipped yet
    with pytest.raises(packed_runs.PackedRunsError, match=r"mask.seed3.train.log: not a kept output"):
        packed_runs.pack(runs, "mask")
    (runs / "mask.seed3.train.log").unlink()
    assert not (runs / "mask.tar.xz").exists()  # nothing was packed by the refused calls
    packed_runs.pack(runs, "mask")
    kept_run(runs, "mask.seed1", ["again"])  # the same run's files again: packed already
    with pytest.raises(packed_runs.PackedRunsError, match=r"holds mask.seed1.gen already"):
        packed_runs.pack(runs, "mask")
    # a fourth seed joins the archive; the other three stay as they were
    for path in runs.glob("mask.seed1.*.gz"):
        path.unlink()
    kept_run(runs, "mask.seed4", ["vier"])
    packed_runs.pack(runs, "mask")
    assert scoring.read_lines(runs / "mask.seed4.gen.gz") == ["H-0\t-0.5\tvier"]
    assert scoring.read_lines(runs / "mask.seed1.gen.gz") == ["H-0\t-0.5\tein Hund", "H-1\t-0.5\tzwei Katzen"]


def test_a_damaged_or_unlisted_archive_is_named_not_read(runs):
    packed_runs.pack(runs, "mask")
    archive = runs / "mask.tar.xz"
    data = bytearray(archive.read_bytes())
    data[len(data) // 2] ^= 0xFF
    archive.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"mask.tar.xz: its SHA-256 is not the one .*SHA256SUMS lists"):
        scoring.read_lines(runs / "mask.seed1.gen.gz")
    (runs / "SHA256SUMS").unlink()
    with pytest.raises(ValueError, match=r"mask.tar.xz: not listed in .*SHA256SUMS"):
        results.read_text(runs / "mask.seed1.train.log")


def test_the_command_line_packs_and_answers_has(runs):
    def command(*args):
        return subprocess.run([sys.executable, packed_runs.__file__, *map(str, args)],  # as the recipes run it
                              capture_output=True, text=True, check=False)
    assert command("has", "--packed", runs / "mask.seed1.gen").returncode == 1  # there, gzipped, not packed
    done = command("pack", runs, "mask")
    assert done.returncode == 0 and "6 files packed into" in done.stdout
    assert command("has", "--packed", runs / "mask.seed1.gen").returncode == 0
    assert command("has", runs / "mask.seed9.gen").returncode == 1
    refused = command("pack", runs, "mask")
    assert refused.returncode == 2 and "no kept run outputs mask.*" in refused.stderr
    assert "Traceback" not in refused.stderr
