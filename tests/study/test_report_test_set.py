"""The runaway section reads the test set kept in the runs folder (gzipped or packed), else the data's. By hand:
hypothesis 2 is its reference four times (20 > 2 x 5 + 5 words); cut, all equal their references: BLEU 100."""
import gzip
import subprocess
import sys

import pytest

from conftest import REPO
from fairseq_syntax.evaluation.runaway import system_runs
from fairseq_syntax.study.config import load_study
from fairseq_syntax.study.records import keep_test_set
from study.tiny_study_file import SETTINGS

REFERENCES = ["the cat sat down", "a dog ran far away", "birds fly high up"]
SOURCES = ["x1 x2 x3", "y1 y2 y3 y4 y5 y6 y7", "z1 z2"]
HYPOTHESES = [REFERENCES[0], " ".join([REFERENCES[1]] * 4), REFERENCES[2]]


def write_gzip(path, lines):
    path.with_name(path.name + ".gz").write_bytes(gzip.compress("".join(f"{line}\n" for line in lines).encode(),
                                                                mtime=0))


@pytest.fixture
def study(tmp_path):
    """A study of Sequence, seed 1 decoded, its data in raw/."""
    (tmp_path / "study.toml").write_text(SETTINGS.format(epochs=1) + '[[systems]]\nname = "sequence"\n',
                                         encoding="utf-8")
    (tmp_path / "runs").mkdir()
    write_gzip(tmp_path / "runs" / "sequence.seed1.gen",
               [f"H-{index}\t-0.5\t{words}" for index, words in enumerate(HYPOTHESES)] + ["Generate test with beam=2"])
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "test.de").write_text("".join(f"{line}\n" for line in REFERENCES), encoding="utf-8")
    (tmp_path / "raw" / "test.en").write_text("".join(f"{line}\n" for line in SOURCES), encoding="utf-8")
    return tmp_path


def section(folder):
    from fairseq_syntax.study.report import runaway_section

    return runaway_section(load_study(folder / "study.toml"))


def test_the_kept_test_set_gives_the_section_the_data_gives(study):
    lines, info = section(study)
    run = system_runs(info, "sequence")["1"]
    assert (run["ids"], run["count"], run["extra_words"]) == ([1], 1, 15)
    assert run["BLEU_cut"] == pytest.approx(100.0) and run["length_ratio_cut"] == pytest.approx(1.0)
    assert run["length_ratio"] == pytest.approx(28 / 13) and run["cost"] == pytest.approx(100.0 - run["BLEU"])
    assert info["source_lengths"] == {"mean_all": 4.0, "mean_runaway": 7.0, "median_all": 3,
                                      "above_median_runaway": 1.0}
    keep_test_set(load_study(study / "study.toml"))
    for name, written in (("test.de.ref", REFERENCES), ("test.en.src", SOURCES)):
        assert gzip.decompress((study / "runs" / f"{name}.gz").read_bytes()).decode().split("\n") == [*written, ""]
    for name in ("test.de", "test.en"):
        (study / "raw" / name).unlink()
    assert section(study) == (lines, info)
    packed = subprocess.run([sys.executable, "examples/pack_runs.py", "pack-folder", str(study / "runs")], cwd=REPO,
                            capture_output=True, text=True, check=False)
    assert packed.returncode == 0 and "3 files packed" in packed.stdout, packed.stderr
    assert not (study / "runs" / "test.de.ref.gz").exists()
    assert section(study) == (lines, info)


def test_no_runaway_hypothesis_gives_no_source_length_line(study):
    write_gzip(study / "runs" / "sequence.seed1.gen",
               [f"H-{index}\t-0.5\t{words}" for index, words in enumerate(REFERENCES)] + ["Generate test with beam=2"])
    lines, info = section(study)
    assert info["sentences"] == [] and info["pairs_shared"] == 0 and "source_lengths" not in info
    assert info["runs"]["sequence"]["1"][info["columns"].index("cost")] == 0.0
    assert system_runs(info, "sequence")["1"]["count"] == 0
    assert "0 test sentences run away in some run; 0 of them in two runs or more." in "\n".join(lines)
    assert not any(line.startswith("Their sources average") for line in lines)


def test_no_test_set_anywhere_gives_no_section(study):
    for name in ("test.de", "test.en"):
        (study / "raw" / name).unlink()
    assert section(study) == ([], {})


def test_a_kept_reference_other_than_the_datas_stops_the_report_and_a_run_in_one_line(study):
    from fairseq_syntax.study.records import StudyError

    write_gzip(study / "runs" / "test.de.ref", [REFERENCES[0], "a dog ran", REFERENCES[2]])
    kept = (study / "runs" / "test.de.ref.gz").read_bytes()
    for step in (section, lambda folder: keep_test_set(load_study(folder / "study.toml"))):
        with pytest.raises(StudyError) as error:
            step(study)
        assert str(error.value) == (f"{study}/runs/test.de.ref.gz: line 2 differs from {study}/raw/test.de: the runs "
                                    "were scored on another test set than the study's data has")
    assert (study / "runs" / "test.de.ref.gz").read_bytes() == kept
