"""Reading outputs from hand-made packed.tar.xz archives: packed, gzipped or plain alike; bad copies named."""
import gzip
import hashlib
import io
import subprocess
import sys
import tarfile

import pytest

from fairseq_syntax.evaluation import kept_files, packed_runs, records, scoring

LOG = "epoch 001 | loss 4.4 | num_updates 12 | wall 30\n"


def write_archive(folder, members: dict[str, str], listed: bool = True):
    """``folder/packed.tar.xz`` holding ``members`` (name -> text), and its line in ``folder/SHA256SUMS``."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz") as tar:
        for name, text in members.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    archive = folder / "packed.tar.xz"
    archive.write_bytes(buffer.getvalue())
    if listed:
        (folder / "SHA256SUMS").write_text(f"{hashlib.sha256(buffer.getvalue()).hexdigest()}  packed.tar.xz\n")
    return archive


@pytest.fixture
def runs(tmp_path):
    folder = tmp_path / "runs"
    folder.mkdir()
    write_archive(folder, {"mask.seed1.gen": "H-0\t-0.5\tein Hund\nH-1\t-0.5\tzwei Katzen\n",
                           "mask.seed1.train.log": LOG, "mask.seed1.run.json": '{"run": "mask.seed1"}\n'})
    with gzip.open(folder / "mask.seed2.gen.gz", "wt", encoding="utf-8") as out:  # a run not packed yet
        out.write("H-0\t-0.5\tein Hund läuft\n")
    (folder / "mask.seed3.gen").write_text("H-0\t-0.5\tdrei\n")  # a decode not compressed yet
    return folder


def test_a_file_reads_the_same_packed_gzipped_or_plain_named_with_or_without_gz(runs):
    assert scoring.read_lines(runs / "mask.seed1.gen.gz") == ["H-0\t-0.5\tein Hund", "H-1\t-0.5\tzwei Katzen"]
    assert scoring.read_lines(runs / "mask.seed1.gen") == ["H-0\t-0.5\tein Hund", "H-1\t-0.5\tzwei Katzen"]
    assert scoring.read_lines(runs / "mask.seed2.gen") == ["H-0\t-0.5\tein Hund läuft"]
    assert packed_runs.read_bytes(runs / "mask.seed3.gen.gz") == b"H-0\t-0.5\tdrei\n"
    assert kept_files.read_text(runs / "mask.seed1.train.log.gz") == LOG
    member = packed_runs.find_member(runs / "mask.seed1.gen.gz")
    assert member.label == f"{runs / 'packed.tar.xz'}:mask.seed1.gen"
    assert packed_runs.find_member(runs / "mask.seed2.gen") is None  # gzipped, not packed
    assert all(packed_runs.has(runs / f"mask.seed{seed}.gen") for seed in (1, 2, 3))
    assert not packed_runs.has(runs / "mask.seed4.gen")
    with pytest.raises(FileNotFoundError, match=r"mask.seed4.gen: not there, gzipped or packed"):
        packed_runs.read_bytes(runs / "mask.seed4.gen")
    # listed with the files on disk, packed ones named without .gz; a packed record found like a file
    assert [path[len(str(runs)) + 1:] for path in packed_runs.glob(str(runs / "mask.seed*.gen*"))] == [
        "mask.seed1.gen", "mask.seed2.gen.gz", "mask.seed3.gen"]
    assert [path.name for path in packed_runs.rglob(runs, ".run.json")] == ["mask.seed1.run.json"]
    assert [path.name for path in records.find_record_files([runs])] == ["mask.seed1.run.json"]


def test_an_archive_above_a_folder_serves_its_files_and_its_folder_is_listed(tmp_path):
    recipe = tmp_path / "recipe"
    (recipe / "logs-other").mkdir(parents=True)
    (recipe / "logs-other" / "README.md").write_text("how it was run\n")
    write_archive(recipe, {"logs/train.log": "logs/train.log\n", "logs-other/train.log": "other\n"})
    assert kept_files.read_text(recipe / "logs" / "train.log.gz") == "logs/train.log\n"  # logs/ is not on disk at all
    assert packed_runs.read_bytes(recipe / "logs-other" / "train.log") == b"other\n"
    assert [path[len(str(recipe)) + 1:] for path in packed_runs.glob(str(recipe / "logs*"))] == ["logs", "logs-other"]
    assert [path[len(str(recipe)) + 1:] for path in packed_runs.glob(str(recipe / "logs*" / "*.log"))] == [
        "logs-other/train.log", "logs/train.log"]


def test_a_damaged_unlisted_or_stale_copy_is_named_not_read(runs):
    with gzip.open(runs / "mask.seed1.train.log.gz", "wt", encoding="utf-8") as out:  # packed, and on disk again
        out.write("a second run\n")
    with pytest.raises(packed_runs.PackedRunsError, match=r"mask.seed1.train.log.gz: on disk and in .*packed.tar.xz "
                                                          r"as mask.seed1.train.log"):
        packed_runs.glob(str(runs / "*.train.log"))
    (runs / "mask.seed1.train.log.gz").unlink()
    data = bytearray((runs / "packed.tar.xz").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (runs / "packed.tar.xz").write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"packed.tar.xz: its SHA-256 is not the one .*SHA256SUMS lists"):
        scoring.read_lines(runs / "mask.seed1.gen.gz")
    write_archive(runs, {"mask.seed1.gen": "H-0\t-0.5\tein\n"}, listed=False)
    (runs / "SHA256SUMS").unlink()
    with pytest.raises(ValueError, match=r"packed.tar.xz: not listed in .*SHA256SUMS"):
        kept_files.read_text(runs / "mask.seed1.gen")


def test_the_reading_commands_as_the_recipes_run_them(runs, capsys):
    assert packed_runs.main(["has", str(runs / "mask.seed2.gen")]) == 0  # gzipped
    assert packed_runs.main(["has", "--packed", str(runs / "mask.seed2.gen")]) == 1  # ... not packed
    assert packed_runs.main(["has", "--packed", str(runs / "mask.seed1.gen.gz")]) == 0
    assert packed_runs.main(["ls", "--packed", str(runs / "*.gen")]) == 0
    assert capsys.readouterr().out == f"{runs / 'mask.seed1.gen'}\n"  # mask.seed3.gen is on disk: not listed
    with pytest.raises(SystemExit):
        packed_runs.main(["pack", str(runs)])  # packing is the recipes' tool, not the library's
    assert "invalid choice: 'pack'" in capsys.readouterr().err
    assert packed_runs.main(["cat", str(runs / "mask.seed1.train.log")]) == 0 and capsys.readouterr().out == LOG
    # as the recipes' shell steps run it: a script that imports only Python's library
    missing = subprocess.run([sys.executable, packed_runs.__file__, "cat", str(runs / "mask.seed9.gen")],
                             capture_output=True, text=True, check=False)
    assert missing.returncode == 2 and "mask.seed9.gen: not there, gzipped or packed" in missing.stderr
    assert "Traceback" not in missing.stderr
