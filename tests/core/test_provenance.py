"""fairseq_syntax.parsing.provenance: the parsers.json of a corpus's data, and how run records show it."""
import argparse
import hashlib
import json

import pytest

from fairseq_syntax.evaluation.results import render_markdown
from fairseq_syntax.parsing import provenance


def write_model(path, content: bytes):
    path.write_bytes(content)
    return str(path), hashlib.sha256(content).hexdigest()[:16]


def test_each_model_is_named_by_digest_and_gets_the_scores_of_the_record_with_that_digest(tmp_path):
    con, con_digest = write_model(tmp_path / "crf-con.pt", b"constituency weights")
    dep, dep_digest = write_model(tmp_path / "biaffine.pt", b"dependency weights, retrained")
    records = tmp_path / "runs"
    records.mkdir()
    (records / "crf-con.json").write_text(json.dumps(
        {"model": "crf-con.pt", "sha256": con_digest, "scores": {"F1": 87.12}, "epochs": 60, "data": "wsj.mrg"}))
    # the record of an earlier training of the dependency parser: another digest, so not this model's
    (records / "biaffine.json").write_text(json.dumps(
        {"model": "biaffine.pt", "sha256": "0" * 16, "scores": {"LAS": 79.8}, "epochs": 9}))
    described = provenance.describe_parsers({"constituency": con, "dependency": dep, "tagger": "benepar_en3"},
                                            provenance.read_parser_records(str(records)))
    assert described == {
        "constituency": {"model": "crf-con.pt", "sha256": con_digest, "scores": {"F1": 87.12}, "epochs": 60,
                         "data": "wsj.mrg"},
        "dependency": {"model": "biaffine.pt", "sha256": dep_digest},
        "tagger": {"model": "benepar_en3"},  # not a file: a name a library downloads
    }
    assert provenance.summary(described) == (
        f"constituency crf-con.pt (F1 87.12, 60 epochs); dependency biaffine.pt (sha256 {dep_digest}, no parser "
        "record); tagger benepar_en3")


def test_a_model_argument_without_a_role_is_refused(capsys):
    with pytest.raises(SystemExit):
        provenance.role_models(argparse.ArgumentParser(), ["models/crf-con.pt"])
    assert "give ROLE=MODEL" in capsys.readouterr().err


def test_results_say_which_parses_each_row_was_trained_on():
    base = {"dataset": "multi30k", "arch": "transformer", "command": "fairseq-train data", "updates": 6,
            "epochs": 2, "wall_time_s": 60.0, "train_log": "log", "metrics": {"BLEU": 38.0}, "significance": {}}
    parsers = {"constituency": {"model": "crf-con.pt", "sha256": "ab" * 8, "scores": {"F1": 87.12},
                                "epochs": 60}}
    records = [dict(base, system="mask", parsers=parsers), dict(base, system="sequence"),
               dict(base, system="linearized", parsers=parsers)]
    lines = render_markdown(records).splitlines()
    # one line, the rows of each parser set together
    assert ("- parses of the training data (systems that read no syntax ignore them): "
            "`constituency crf-con.pt (F1 87.12, 60 epochs)`: mask, linearized; not recorded (trained "
            "before the data named their parsers): sequence") in lines
    assert "parses of the training data" not in render_markdown([dict(base, system="sequence")])
