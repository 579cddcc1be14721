"""fairseq_syntax.evaluation.seed_records: which records over seeds did not read a run finished since (of their
system or of a system they test it against), over which seeds to score them again, and the study lanes' CLI."""
import gzip
import json
import os
import subprocess
import sys

from conftest import REPO

from fairseq_syntax.evaluation.comparisons import Comparisons
from fairseq_syntax.evaluation.seed_records import finished_runs, lacking, main, runs_read, stale_records

SEQUENCE_FIRST = Comparisons("sequence")  # the baseline's record first: every other is tested against it


def decode(runs, name):
    """A finished run's decode as run_system keeps it (gzipped)."""
    (runs / f"{name}.gen.gz").write_bytes(gzip.compress(b"D-0\t-0.1\tein Hund\n"))
    (runs / f"{name}.gen.log.gz").write_bytes(gzip.compress(b"log\n"))  # its log: not a decode


def seeds_record(runs, name, read, tests):
    """NAME.seeds.run.json as score_seeds writes it: its tests and the decodes its scoring command read."""
    files = [",".join(f"examples/multi30k/runs/{system}.seed{seed}.gen.gz" for seed in seeds)
             for system, seeds in read.items()]
    record = {"system": name, "significance": {test: {} for test in tests},
              "score_command": f"fairseq-syntax-score {files[0]} OUT_DIR/test.de.ref {' '.join(files[1:])} --lang de"}
    (runs / f"{name}.seeds.run.json").write_text(json.dumps(record))
    return record


def test_a_record_lacks_the_runs_of_its_systems_finished_since_and_is_scored_again_over_every_seed(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    for name in ("sequence.seed1", "sequence.seed2", "sequence.seed3", "sequence.seed4", "mask.seed1", "mask.seed2",
                 "mask_random.seed1", "udp.seed1"):
        decode(runs, name)
    sequence = seeds_record(runs, "sequence", {"sequence": [1, 2, 3, 4]}, [])
    mask = seeds_record(runs, "mask", {"mask": [1, 2], "sequence": [1, 2, 3]}, ["sequence"])
    # the control scored later holds the pair's test (mask's record does not): mask_random's runs are its to read
    seeds_record(runs, "mask_random", {"mask_random": [1], "sequence": [1, 2, 3, 4], "mask": [1, 2]},
                 ["sequence", "mask"])
    assert runs_read(mask) == {("mask", 1), ("mask", 2), ("sequence", 1), ("sequence", 2), ("sequence", 3)}
    finished = finished_runs(runs)
    assert finished == {"mask": [1, 2], "mask_random": [1], "sequence": [1, 2, 3, 4], "udp": [1]}
    assert lacking(sequence, finished) == [] and lacking(mask, finished) == ["sequence.seed4"]
    # the records it lists, Sequence's first; the seeds: each seed any of its systems finished
    assert stale_records(runs, SEQUENCE_FIRST) == [("mask", [1, 2, 3, 4], ["sequence.seed4"], ["mask", "sequence"])]
    decode(runs, "sequence.seed5")
    assert [(name, seeds, missing) for name, seeds, missing, _ in stale_records(runs, SEQUENCE_FIRST)] == [
        ("sequence", [1, 2, 3, 4, 5], ["sequence.seed5"]),
        ("mask", [1, 2, 3, 4, 5], ["sequence.seed4", "sequence.seed5"]),
        ("mask_random", [1, 2, 3, 4, 5], ["sequence.seed5"])]
    # the baseline named by the comparisons, not by its name: with mask_random as the baseline its record leads,
    # the others by name
    assert [name for name, *_ in stale_records(runs, Comparisons("mask_random"))] == [
        "mask_random", "mask", "sequence"]
    assert [name for name, *_ in stale_records(runs, Comparisons(None))] == ["mask", "mask_random", "sequence"]


def test_runs_packed_into_the_archive_are_finished_runs(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    for name in ("sequence.seed1", "sequence.seed2"):
        decode(runs, name)
        (runs / f"{name}.run.json").write_text("{}")  # a finished run has its record: the packer takes it
    packer = os.path.join(REPO, "examples", "pack_runs.py")
    subprocess.run([sys.executable, packer, "pack", str(runs)], check=True, capture_output=True)
    assert not list(runs.glob("*.gz"))
    decode(runs, "sequence.seed3")  # finished since, not packed yet
    assert finished_runs(runs) == {"sequence": [1, 2, 3]}


def test_the_cli_lists_seeds_and_stale_records_and_names_a_missing_folder(tmp_path, capsys):
    runs = tmp_path / "runs"
    runs.mkdir()
    for name in ("sequence.seed1", "sequence.seed2", "udp.seed3"):
        decode(runs, name)
    seeds_record(runs, "sequence", {"sequence": [1]}, ["udp"])
    assert main(["seeds", str(runs), "sequence"]) == 0 and capsys.readouterr().out == "1 2\n"
    assert main(["seeds", str(runs)]) == 0 and capsys.readouterr().out == "1 2 3\n"
    assert main(["stale", str(runs)]) == 0
    assert capsys.readouterr().out == "sequence\t1 2 3\tsequence.seed2 udp.seed3\tsequence udp\n"
    # udp's record, stale too: the registry's words-only baseline (sequence) first by default, else --baseline's
    seeds_record(runs, "udp", {"udp": [3]}, ["sequence"])
    assert main(["stale", str(runs)]) == 0
    assert [line.split("\t")[0] for line in capsys.readouterr().out.splitlines()] == ["sequence", "udp"]
    assert main(["stale", str(runs), "--baseline", "udp"]) == 0
    assert [line.split("\t")[0] for line in capsys.readouterr().out.splitlines()] == ["udp", "sequence"]
    assert main(["stale", str(tmp_path / "nowhere")]) == 2
    assert capsys.readouterr().err == f"error: {tmp_path / 'nowhere'}: no such folder of runs\n"
    (runs / "udp.seeds.run.json").write_text("{not json")
    assert main(["stale", str(runs)]) == 2
    assert capsys.readouterr().err.startswith(f"error: {runs / 'udp.seeds.run.json'}: not a readable record (")
