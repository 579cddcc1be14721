"""Run records, their training logs, the results table and fairseq-syntax-results, on hand-written fairseq logs."""
import gzip
import json
import sysconfig

import pytest
from scipy.stats import t as student_t

from fairseq_syntax.cli import plot as plot_cli
from fairseq_syntax.cli import results as results_cli
from fairseq_syntax.evaluation.comparisons import Comparisons, registry_comparisons
from fairseq_syntax.evaluation.convergence import kept_epoch, patience_stop
from fairseq_syntax.evaluation.kept_files import RecordError, compress, open_text, read_text
from fairseq_syntax.evaluation.records import (
    SEED_FACTS,
    find_record_files,
    load_record,
    make_log_portable,
    record_run,
    stored_test,
)
from fairseq_syntax.evaluation.results import (
    READING,
    _as_changes,
    braced,
    convergence_table,
    render_json,
    render_markdown,
    results_of_runs,
    seeds_notes,
)
from fairseq_syntax.evaluation.run_commands import command_fields, record_argv, stored_form
from fairseq_syntax.evaluation.seeds_figure import positions, recorded_comparisons, seeds_rows
from fairseq_syntax.evaluation.study_answer import (
    README_BEGIN,
    README_END,
    _test_text,
    is_borderline,
    readme_block,
    verdict,
)
from fairseq_syntax.evaluation.tables import (Cell, Table, json_text, markdown_table, table_json, table_rows,
                                              write_results)
from fairseq_syntax.evaluation.train_logs import best_checkpoint_metric, parse_train_log, parse_valid_curve

# fairseq-train stdout (simple format): two epochs of 3 updates, wall meter from 90 s; the last says 6 and 3725 s
STDOUT_LOG = """\
2024-05-01 10:00:00 | INFO | fairseq_cli.train | task: TranslationTask
2024-05-01 10:00:01 | INFO | fairseq.trainer | begin training epoch 1
2024-05-01 10:00:02 | INFO | train_inner | epoch 001:      2 / 3 loss=4.616, ppl=24.52, wps=27679.5, ups=159.9, \
wpb=115, bsz=16, num_updates=2, lr=0.001, gnorm=1.814, train_wall=0, wall=91
2024-05-01 10:00:02 | INFO | valid | epoch 001 | valid on 'valid' subset | loss 4.509 | ppl 22.77 | wps 0 | \
wpb 44 | bsz 8 | num_updates 3
2024-05-01 10:00:02 | INFO | fairseq_cli.train | end of epoch 1 (average epoch stats below)
2024-05-01 10:00:02 | INFO | train | epoch 001 | loss 4.591 | ppl 24.1 | wps 14174.7 | ups 87.59 | wpb 128 | \
bsz 21.3 | num_updates 3 | lr 0.001 | gnorm 1.926 | train_wall 0 | wall 1862
2024-05-01 10:00:03 | INFO | train_inner | epoch 002:      3 / 3 loss=4.257, ppl=19.12, wps=23282.3, ups=213.58, \
wpb=109, bsz=20, num_updates=6, lr=0.001, gnorm=1.641, train_wall=0, wall=3724
2024-05-01 10:00:03 | INFO | valid | epoch 002 | valid on 'valid' subset | loss 4.228 | ppl 18.74 | wps 0 | \
wpb 44 | bsz 8 | num_updates 6 | best_loss 4.228 | wall 9999
2024-05-01 10:00:03 | INFO | train | epoch 002 | loss 4.396 | ppl 21.05 | wps 13224.6 | ups 103.31 | wpb 128 | \
bsz 21.3 | num_updates 6 | lr 0.001 | gnorm 1.687 | train_wall 0 | wall 3725
2024-05-01 10:00:03 | INFO | fairseq_cli.train | done training in 3634.1 seconds
"""

# The same run logged with --log-format json (stdout).
JSON_LOG = """\
2024-05-01 10:00:02 | INFO | train_inner | {"epoch": 1, "update": 0.667, "loss": "4.616", "num_updates": "2", \
"train_wall": "0", "wall": "91"}
2024-05-01 10:00:02 | INFO | valid | {"epoch": 1, "valid_loss": "4.509", "valid_num_updates": "3"}
2024-05-01 10:00:02 | INFO | train | {"epoch": 1, "train_loss": "4.591", "train_num_updates": "3", \
"train_train_wall": "0", "train_wall": "1862"}
2024-05-01 10:00:03 | INFO | valid | {"epoch": 2, "valid_loss": "4.228", "valid_num_updates": "6", \
"valid_best_loss": "4.228"}
2024-05-01 10:00:03 | INFO | train | {"epoch": 2, "train_loss": "4.396", "train_num_updates": "6", \
"train_train_wall": "0", "train_wall": "3725"}
"""

# What --log-file writes: the bare messages, without timestamp and logger name.
LOG_FILE = """\
{'_name': None, 'common': {'log_format': 'simple'}}
epoch 001:      2 / 3 loss=4.616, ppl=24.52, num_updates=2, train_wall=0, wall=91
epoch 001 | valid on 'valid' subset | loss 4.509 | ppl 22.77 | num_updates 3
epoch 001 | loss 4.591 | ppl 24.1 | num_updates 3 | lr 0.001 | train_wall 0 | wall 1862
epoch 002 | loss 4.396 | ppl 21.05 | num_updates 6 | lr 0.001 | train_wall 0 | wall 3725
epoch 002 | valid on 'valid' subset | loss 4.228 | ppl 18.74 | num_updates 6 | best_loss 4.228
done training in 3634.1 seconds
"""

EXPECTED_PROGRESS = {"updates": 6, "epochs": 2, "wall_time_s": 3725.0}


@pytest.mark.parametrize("text", [STDOUT_LOG, JSON_LOG, LOG_FILE], ids=["simple", "json", "log-file"])
def test_a_train_log_gives_its_last_end_of_epoch_line_and_each_epochs_validation_value(tmp_path, text):
    log = tmp_path / "train.log"
    log.write_text(text)
    assert parse_train_log(log) == EXPECTED_PROGRESS
    assert parse_valid_curve(log, "loss") == [(1, 4.509), (2, 4.228)]
    assert parse_valid_curve(log, "nll_loss") == []  # not logged in these runs


def test_parse_train_log_adds_up_the_wall_time_of_a_resumed_runs_fairseq_train_runs(tmp_path):
    # epochs 1-2, a start killed in epoch 3, a resumed start: each meter starts from 0; the time is 500 + 510 s
    def start(minute):
        return f"2026-11-27 10:{minute:02d}:00 | INFO | fairseq_cli.train | {{'_name': None, 'common': {{}}}}\n"

    def epoch(number, updates, wall):
        return (f"2026-11-27 10:59:00 | INFO | train | epoch {number:03d} | loss 4.1 | num_updates {updates} | "
                f"train_wall {wall - 10} | wall {wall}\n")

    inner = "2026-11-27 10:31:00 | INFO | train_inner | epoch 003:     50 / 157 loss=3.3, num_updates=364, wall=40\n"
    log = tmp_path / "train.log"
    log.write_text(start(0) + epoch(1, 157, 250) + epoch(2, 314, 500) + start(30) + inner + start(40)
                   + epoch(3, 471, 260) + epoch(4, 628, 510))
    assert parse_train_log(log) == {"updates": 628, "epochs": 4, "wall_time_s": 1010.0}
    # a log that does not mark the second start (a --log-file without its configuration line): the meter's fall
    log.write_text("epoch 001 | num_updates 157 | wall 250\nepoch 002 | num_updates 314 | wall 500\n"
                   "epoch 003 | num_updates 471 | wall 240\n")
    assert parse_train_log(log)["wall_time_s"] == 740.0


def test_parse_train_log_without_train_statistics_is_an_error(tmp_path):
    log = tmp_path / "crashed.log"
    log.write_text(STDOUT_LOG.split("2024-05-01 10:00:02 | INFO | fairseq_cli.train | end of epoch")[0])
    with pytest.raises(RecordError, match=r"crashed.log: no end-of-epoch 'train' statistics line"):
        parse_train_log(log)


def test_parse_valid_curve_keeps_the_last_value_of_an_epoch_validated_twice(tmp_path):
    # a run killed after validating epoch 2 and resumed from epoch 1's checkpoint validates epoch 2 again
    resumed = LOG_FILE.replace("done training", "epoch 002 | valid on 'valid' subset | loss 4.301 | "
                                                "nll_loss 3.9 | num_updates 6\ndone training")
    log = tmp_path / "train.log"
    log.write_text(resumed)
    assert parse_valid_curve(log, "loss") == [(1, 4.509), (2, 4.301)]
    assert parse_valid_curve(log, "nll_loss") == [(2, 3.9)]


def test_best_checkpoint_metric_is_read_from_the_training_command():
    assert best_checkpoint_metric(["fairseq-train", "d", "--patience", "5", "--best-checkpoint-metric", "nll_loss",
                                   "--cpu"]) == "nll_loss"
    assert best_checkpoint_metric(["fairseq-train", "d", "--best-checkpoint-metric=accuracy"]) == "accuracy"
    assert best_checkpoint_metric(["fairseq-train", "d", "--patience", "5"]) == "loss"  # fairseq's default


BY_LENGTH = [{"bucket": "(0,10]", "low": 0, "high": 10, "n_sentences": 3, "BLEU": 41.5},
             {"bucket": "(10,inf)", "low": 10, "high": None, "n_sentences": 0, "BLEU": None}]


def write_records(directory):
    """Two hand-written records of one dataset: a baseline and a syntax system compared with it."""
    (directory / "logs").mkdir(parents=True)
    log = directory / "logs" / "train.log"
    log.write_text(STDOUT_LOG)
    baseline = record_run(
        directory / "baseline.run.json", dataset="multi30k", system="transformer", arch="transformer",
        command=["fairseq-train", "data", "--arch", "transformer"], train_log=log,
        metrics={"BLEU": 38.123, "chrF": 62.3, "TER": 45.0, "tokenize": "13a",
                 "signatures": {"BLEU": "nrefs:1|tok:13a"}})
    masks = record_run(
        directory / "masks.run.json", dataset="multi30k", system="syntax masks", arch="transformer_syntax_mask",
        command=["fairseq-train", "data", "--arch", "transformer_syntax_mask", "|", "tee", "log"], train_log=log,
        metrics={"BLEU": 39.0, "chrF": 63.456, "TER": 44.2, "RIBES": 80.0, "tokenize": "13a",
                 "signatures": {"BLEU": "nrefs:1|tok:13a"}},
        significance={"transformer": {"test": "paired bootstrap resampling (sacrebleu)", "n_samples": 1000,
                                      "seed": 12345, "BLEU": {"p_value": 0.0123}, "chrF": {"p_value": 0.5}}},
        by_length=BY_LENGTH)
    return baseline, masks


def test_record_run_fills_training_budget_from_the_log(tmp_path):
    baseline, _ = write_records(tmp_path)
    stored = load_record(tmp_path / "baseline.run.json")
    assert stored == baseline
    assert (stored["updates"], stored["epochs"], stored["wall_time_s"]) == (6, 2, 3725.0)
    assert stored["train_log"] == str(tmp_path / "logs" / "train.log") and stored["significance"] == {}
    # one run's record holds the validation curve of the statistic its checkpoint is chosen by (default loss)
    assert stored["valid"] == {"metric": "loss", "curve": [[1, 4.509], [2, 4.228]]}


EXPECTED_TABLE = [
    ("| System | Arch | BLEU tok. | BLEU | chrF | TER | RIBES | p vs transformer (BLEU / chrF) | Updates | Epochs "
    "| Wall time |"),
    "|---|---|---|---|---|---|---|---|---|---|---|",
    "| transformer | transformer | 13a | 38.12 | 62.30 | 45.00 | – | – | 6 | 2 | 1:02:05 |",
    ("| syntax masks | transformer_syntax_mask | 13a | 39.00 | 63.46 | 44.20 | 80.00 | 0.012 / 0.500 | 6 | 2 "
    "| 1:02:05 |"),
]
#: below the table, each row's command (not a column: a command is longer than a line)
EXPECTED_COMMANDS = [
    "### Commands", "", "The training command of each row (paths as the record holds them):", "",
    "- **transformer**: `fairseq-train data --arch transformer`",
    "- **syntax masks**: `fairseq-train data --arch transformer_syntax_mask | tee log`",
]


def test_render_markdown_table_from_records(tmp_path):
    records = write_records(tmp_path)
    markdown = render_markdown(records)
    lines = markdown.splitlines()
    start = lines.index("## multi30k") + 2
    assert lines[start:start + 4] == EXPECTED_TABLE
    commands = lines.index("### Commands")
    assert commands > start + 4 and lines[commands:commands + 6] == EXPECTED_COMMANDS
    assert "- BLEU signature: `nrefs:1|tok:13a`" in lines  # the notes (each by hand: test_render_json_has_...)


def test_render_markdown_one_table_per_dataset(tmp_path):
    baseline, masks = write_records(tmp_path)
    sst = dict(baseline, dataset="sst", system="tree classifier", metrics={"accuracy": 0.8125}, significance={})
    markdown = render_markdown([baseline, sst, masks])
    assert markdown.index("## multi30k") < markdown.index("## sst")
    assert "| System | Arch | accuracy | Updates | Epochs | Wall time |" in markdown
    assert "| tree classifier | transformer | 0.81 | 6 | 2 | 1:02:05 |" in markdown


def test_results_command_writes_markdown_from_a_directory_or_prints_it(tmp_path, monkeypatch, capsys):
    records = write_records(tmp_path / "runs")
    out = tmp_path / "examples" / "multi30k" / "RESULTS.md"
    # --terminal prints the short table (p against --baseline; no commands) beside the full one it writes
    results_cli.main([str(tmp_path / "runs"), "--out", str(out), "--terminal", "--baseline", "transformer"])
    printed = capsys.readouterr().out
    assert printed.splitlines()[3].split() == ["syntax", "masks", "39.00", "63.46", "0.012", "/", "0.500", "1:02:05"]
    assert "fairseq-train" not in printed
    sources = [str(tmp_path / "runs" / name) for name in ("baseline.run.json", "masks.run.json")]
    assert out.read_text() == render_markdown(records, sources=sources)
    assert f"Run records: `{tmp_path / 'runs'}/`: `baseline.run.json`, `masks.run.json`" in out.read_text()
    # RESULTS.json beside it: the same table, one row per system
    assert json.loads((out.parent / "RESULTS.json").read_text()) == render_json(records, sources=sources)
    # without --out: the markdown printed, the sources relative to the working folder, no RESULTS.json
    for written in out.parent.iterdir():
        written.unlink()
    monkeypatch.chdir(tmp_path)
    results_cli.main([str(tmp_path / "runs")])
    assert capsys.readouterr().out == render_markdown(
        records, sources=["runs/baseline.run.json", "runs/masks.run.json"])
    assert not list(tmp_path.rglob("RESULTS.json"))


def test_render_json_has_the_rows_and_columns_of_the_table(tmp_path):
    baseline, masks = write_records(tmp_path)
    data = render_json([baseline, masks], sources=["runs/baseline.run.json", "runs/masks.run.json"])
    table = data["datasets"]["multi30k"]["table"]
    # the table's columns, and the command, which RESULTS.md lists below the table
    assert table["columns"] == [cell.strip() for cell in EXPECTED_TABLE[0].strip("|").split(" | ")] + ["Command"]
    assert table["rows"] == [
        {"System": "transformer", "Arch": "transformer", "BLEU tok.": "13a", "BLEU": 38.123, "chrF": 62.3,
         "TER": 45.0, "RIBES": None, "p vs transformer (BLEU / chrF)": None, "Updates": 6, "Epochs": 2,
         "Wall time": 3725.0, "Command": "fairseq-train data --arch transformer"},
        {"System": "syntax masks", "Arch": "transformer_syntax_mask", "BLEU tok.": "13a", "BLEU": 39.0,
         "chrF": 63.456, "TER": 44.2, "RIBES": 80.0, "p vs transformer (BLEU / chrF)": {"BLEU": 0.0123, "chrF": 0.5},
         "Updates": 6, "Epochs": 2, "Wall time": 3725.0,
         "Command": "fairseq-train data --arch transformer_syntax_mask | tee log"},
    ]
    assert data["datasets"]["multi30k"]["notes"] == [
        ("p: two-sided p-value of the row's system against the named baseline (paired bootstrap resampling "
        "(sacrebleu), 1000 samples, seed 12345)."), "BLEU signature: `nrefs:1|tok:13a`"]
    assert data["datasets"]["multi30k"]["bleu_by_length"]["rows"] == [
        {"System": "syntax masks", "(0,10] (n=3)": 41.5, "(10,inf) (n=0)": None}]  # the baseline was not scored
    assert data["run_records"] == {"runs": ["baseline.run.json", "masks.run.json"]}


def test_the_files_of_a_systems_seeds_are_written_once_with_their_seeds_in_braces():
    paths = ["r/x.seed1.gen.gz", "r/x.seed2.gen.gz", "r/y.seed1.gen.gz", "t.ref", "r/x.seeds.run.json",
             "r/z.seed3.run.json", "r/z.seed10.run.json"]
    assert braced(paths) == ["r/x.seed{1,2}.gen.gz", "r/y.seed1.gen.gz", "t.ref", "r/x.seeds.run.json",
                             "r/z.seed{3,10}.run.json"]


def test_bad_record_inputs_are_named(tmp_path):
    with pytest.raises(RecordError, match="no \\*.run.json run records"):
        find_record_files([tmp_path])
    incomplete = tmp_path / "x.run.json"
    incomplete.write_text(json.dumps({"dataset": "multi30k", "system": "s"}))
    with pytest.raises(RecordError, match="x.run.json: run record lacks arch, command, updates"):
        load_record(incomplete)
    broken = tmp_path / "y.run.json"
    broken.write_text('{"dataset":\n')
    with pytest.raises(RecordError, match=r"y.run.json:2: not valid JSON"):
        load_record(broken)


def test_bleu_by_length_is_recorded_and_rendered_per_system(tmp_path):
    baseline, masks = write_records(tmp_path)
    assert json.loads((tmp_path / "masks.run.json").read_text())["by_length"] == BY_LENGTH
    lines = render_markdown([baseline, masks]).splitlines()
    start = lines.index("| System | (0,10] (n=3) | (10,inf) (n=0) |")
    assert lines[start + 2] == "| syntax masks | 41.50 | – |"
    assert "| transformer |" not in "\n".join(lines[start:])  # not scored by length


# ---- the helpers every recipe's RESULTS.md / RESULTS.json is written with --------------------------------------

def test_markdown_table_two_rows_exactly():
    lines = markdown_table(["run", "F1 (all / short)", "n"], [["a|b", "12.6 / 24.5", 3], ["c", "–", 10]], "lrr")
    assert lines == [
        "| run | F1 (all / short) | n |",
        "|---|---:|---:|",
        "| a\\|b | 12.6 / 24.5 | 3 |",
        "| c | – | 10 |",
    ]
    assert markdown_table(["x", "y"], [])[1] == "|---|---|"  # left-aligned unless told


def test_markdown_table_checks_its_shape():
    with pytest.raises(ValueError, match="one of 'l' or 'r' per column"):
        markdown_table(["x", "y"], [], "l")
    with pytest.raises(ValueError, match="a row of 1 cells in a table of 2 columns"):
        markdown_table(["x", "y"], [["only"]])


def test_table_renders_markdown_and_json_from_the_same_rows():
    table = Table(["system", "F1", "ratio"], "lrr")
    table.add("Tree Transformer", Cell([17.187, 28.83], "17.2 / 28.8"), Cell(0.9674, "0.967"))
    table.add("random", Cell(None, "–"), 1)
    assert table.lines() == ["| system | F1 | ratio |", "|---|---:|---:|",
                             "| Tree Transformer | 17.2 / 28.8 | 0.967 |", "| random | – | 1 |"]
    assert table.json() == {"columns": ["system", "F1", "ratio"], "rows": [
        {"system": "Tree Transformer", "F1": [17.187, 28.83], "ratio": 0.9674},
        {"system": "random", "F1": None, "ratio": 1}]}
    assert table_json(["a"], [[1], [2]]) == {"columns": ["a"], "rows": [{"a": 1}, {"a": 2}]}
    assert table_rows(table.json(lists=True)) == table.json()["rows"]
    with pytest.raises(ValueError, match="a row of 1 cells in a table of 3 columns"):
        table.add("short")


def test_write_results_puts_results_json_beside_results_md(tmp_path):
    markdown, json_path = write_results(tmp_path / "recipe" / "RESULTS.md", "# Title\n\n| a |\n|---|\n| 1 |",
                                        {"tables": {"t": {"columns": ["a"], "rows": [{"a": 1 / 3, "b": [2.0]}]},
                                                    "l": {"columns": ["a", "b"], "rows": [["x", [1, 2]], [[3], [4]]]}},
                                         "name": "ü"})
    assert markdown.read_text() == "# Title\n\n| a |\n|---|\n| 1 |\n"
    assert json_path == tmp_path / "recipe" / "RESULTS.json"
    assert json_path.read_text(encoding="utf-8") == (  # one space a level; an object of plain values a line
        # no space after a ',' or ':', on a line or after an indented member's key
        '{\n "tables":{\n  "t":{\n   "columns":["a"],\n   "rows":[\n    {"a":0.333333,"b":[2.0]}\n   ]\n'
        # a list of plain values and flat lists a line; one of lists only (no plain value) a line each
        '  },\n  "l":{\n   "columns":["a","b"],\n   "rows":[\n    ["x",[1,2]],\n    [\n     [3],\n     [4]\n    ]\n'
        '   ]\n  }\n },\n "name":"ü"\n}\n')
    # run records (json_text) keep a space after each ',' and ':'
    assert json_text({"a": {"b": [1, 2]}}) == '{\n "a": {\n  "b": [1, 2]\n }\n}\n'


def test_gzipped_logs_are_read_by_either_name(tmp_path):
    log = tmp_path / "sequence.train.log.gz"
    log.write_bytes(gzip.compress(STDOUT_LOG.encode("utf-8")))
    assert parse_train_log(log) == EXPECTED_PROGRESS
    assert parse_train_log(tmp_path / "sequence.train.log") == EXPECTED_PROGRESS  # the name before it was compressed
    # a .gz name of a plain file: test_packed_runs (read_bytes of mask.seed3.gen.gz)
    with pytest.raises(FileNotFoundError, match="missing.log"):
        read_text(tmp_path / "missing.log")


def test_compress_replaces_a_file_by_a_reproducible_gzip(tmp_path):
    first, second = tmp_path / "a" / "x.log", tmp_path / "b" / "x.log"
    for path in (first, second):
        path.parent.mkdir()
        path.write_text(STDOUT_LOG)
    assert compress(first) == tmp_path / "a" / "x.log.gz" and not first.exists()
    compress(second)
    data = (tmp_path / "a" / "x.log.gz").read_bytes()
    assert data == (tmp_path / "b" / "x.log.gz").read_bytes()  # no time stamp or file name in the header
    assert data[3] == 0 and data[4:8] == b"\0\0\0\0"  # FLG: no FNAME; MTIME 0
    assert gzip.decompress(data).decode("utf-8") == STDOUT_LOG


def test_open_text_takes_read_write_or_append(tmp_path):
    # writing and reading a .gz name through gzip: test_a_kept_log_names_no_folder_of_the_machine[run.train.log.gz]
    with pytest.raises(ValueError, match="mode must be"):
        open_text(tmp_path / "scores.json.gz", "r+")


# ---- records that name no folder of the machine, and the table of a study over seeds --------------------------

def test_a_record_writes_the_output_folder_as_out_dir_and_repository_paths_relative(tmp_path):
    repo, out = tmp_path / "repo", tmp_path / "work"  # the recipe's output folder lies outside the repository
    log = repo / "examples" / "runs" / "mask.seed1.train.log"
    log.parent.mkdir(parents=True)
    log.write_text(STDOUT_LOG)
    record = record_run(
        repo / "examples" / "runs" / "mask.seed1.run.json", dataset="multi30k-10k", system="mask",
        arch="transformer_syntax_mask", train_log=log, metrics={"BLEU": 30.0},
        command=["fairseq-train", f"{out}/data-bin/preorder", "--save-dir", f"{out}/ckpt/ckpt-mask.seed1", "--seed",
                 "1"],
        **command_fields("decode_command", ["fairseq-generate", f"{out}/data-bin/preorder",
                                            f"--path={out}/ckpt/ckpt-mask.seed1/checkpoint_best.pt"]),
        **command_fields("score_command", ["fairseq-syntax-score",
                                           f"{repo}/examples/runs/a.gen.gz,{repo}/examples/runs/b.gen.gz",
                                           f"{out}/test.de.ref", f"{tmp_path}/repo-old/c.gen", str(repo)]),
        out_dir=str(out), root=str(repo))
    assert load_record(repo / "examples" / "runs" / "mask.seed1.run.json") == record  # each display from its argv
    assert record["command_argv"] == ["fairseq-train", "OUT_DIR/data-bin/preorder", "--save-dir",
                                      "OUT_DIR/ckpt/ckpt-mask.seed1", "--seed", "1"]
    assert record["decode_command_argv"] == ["fairseq-generate", "OUT_DIR/data-bin/preorder",
                                             "--path=OUT_DIR/ckpt/ckpt-mask.seed1/checkpoint_best.pt"]
    assert record["train_log"] == "examples/runs/mask.seed1.train.log"
    # a sibling folder whose name begins like the repository's is not in it; the repository itself is "."
    assert record["score_command"] == (f"fairseq-syntax-score examples/runs/a.gen.gz,examples/runs/b.gen.gz "
                                       f"OUT_DIR/test.de.ref {tmp_path}/repo-old/c.gen .")
    # the default output folder, inside the repository, is still OUT_DIR
    inside = record_run(tmp_path / "x.run.json", dataset="d", system="s", arch="a", train_log=log, metrics={},
                        command=["fairseq-train", f"{repo}/examples/work/data-bin"],
                        out_dir=str(repo / "examples" / "work"), root=str(repo))
    assert inside["command"] == "fairseq-train OUT_DIR/data-bin"


SEEDS_TEST = "seed-aware paired bootstrap"
CONSTITUENCY = {"constituency": {"model": "crf-con.pt", "sha256": "0123456789abcdef", "scores": {"F1": 87.12}}}


def seed_run(system, seed, bleu, chrf, epochs, data="preorder", arch="transformer_syntax_mask"):
    """The record of one seed's run, as run_system writes it (paths already portable)."""
    return {"dataset": "multi30k-10k", "system": system, "arch": arch, "seed": seed, "updates": 157 * epochs,
            "epochs": epochs, "wall_time_s": 600.0,
            "train_log": f"examples/multi30k/runs/{system}.seed{seed}.train.log.gz",
            **command_fields("command", ["fairseq-train", f"OUT_DIR/data-bin/{data}", "--arch", arch, "--save-dir",
                                         f"OUT_DIR/ckpt/ckpt-{system}.seed{seed}", "--seed", str(seed), "--patience",
                                         "5"]),
            **command_fields("decode_command", ["fairseq-generate", f"OUT_DIR/data-bin/{data}", "--path",
                                                f"OUT_DIR/ckpt/ckpt-{system}.seed{seed}/checkpoint_best.pt", "--beam",
                                                "5"]),
            "metrics": {"BLEU": bleu, "chrF": chrf, "tokenize": "13a", "signatures": {"BLEU": "nrefs:1|tok:13a"}},
            "significance": {"sequence": {"test": "paired bootstrap resampling (sacrebleu)", "n_samples": 1000,
                                          "seed": 12345, "BLEU": {"p_value": 0.9}, "chrF": {"p_value": 0.9}}},
            "parsers": CONSTITUENCY}


def over_seeds(system, bleu, chrf, epochs, versus, parsers=CONSTITUENCY):
    """The record over seeds (fairseq-syntax-score over the seeds' outputs): means, sds, per-seed values."""
    runs = seed_run(system, 1, 0, 0, 0)
    mean = {name: sum(values) / len(values) for name, values in (("BLEU", bleu), ("chrF", chrf))}
    sd = {name: (sum((v - mean[name]) ** 2 for v in values) / (len(values) - 1)) ** 0.5
          for name, values in (("BLEU", bleu), ("chrF", chrf))}
    return dict(runs, seed=None, seeds=len(bleu), seed_list=list(range(1, len(bleu) + 1)), epochs=epochs,
                metrics={**mean, "tokenize": "13a"}, metrics_sd=sd, per_seed_metrics={"BLEU": bleu, "chrF": chrf},
                **command_fields("score_command", [
                    "fairseq-syntax-score",
                    f"examples/multi30k/runs/{system}.seed1.gen.gz,examples/multi30k/runs/{system}.seed2.gen.gz",
                    "OUT_DIR/test.de.ref", "--bootstrap", "1000"]),
                significance={name: {"test": SEEDS_TEST, "n_samples": 1000, "seed": 12345,
                                     "BLEU": {"p_value": p_bleu}, "chrF": {"p_value": p_chrf}}
                              for name, (p_bleu, p_chrf) in versus.items()},
                parsers=parsers)


#: the Multi30k study's comparisons: 14 systems in budget order, 5 or 3 seeds; each method vs sequence, controls
MULTI30K_SYSTEMS = ("sequence", "mask", "mask_random", "hier_accum", "hier_accum_random", "udp", "udp_random", "ldd",
                    "linearized", "dbsa", "pascal", "dbsa_random", "mask_struct", "hier_accum_struct")
MULTI30K_FIVE_SEEDS = ("sequence", "udp", "udp_random", "dbsa", "ldd", "mask", "mask_random", "dbsa_random")
MULTI30K = Comparisons(
    baseline="sequence",
    controls={"mask_random": ("mask", "random"), "mask_struct": ("mask", "struct"), "udp_random": ("udp", "random"),
              "hier_accum_random": ("hier_accum", "random"), "hier_accum_struct": ("hier_accum", "struct"),
              "dbsa_random": ("dbsa", "random")},
    planned_seeds={name: 5 if name in MULTI30K_FIVE_SEEDS else 3 for name in MULTI30K_SYSTEMS},
    expected=MULTI30K_SYSTEMS)


def study_records():
    """Sequence, Mask, Mask on random trees over seeds 1-2, scored; UDP's three seeds not yet; another dataset's run."""
    control = dict(CONSTITUENCY, control={"structure": "random", "seed": 1})
    records = [
        seed_run("sequence", 1, 30.0, 50.0, 19, "sequence", "transformer"),
        seed_run("sequence", 2, 32.0, 54.0, 21, "sequence", "transformer"),
        over_seeds("sequence", [30.0, 32.0], [50.0, 54.0], 20, {}),
        seed_run("mask", 1, 32.0, 55.0, 21), seed_run("mask", 2, 34.0, 55.0, 22),
        # Mask was scored over its seeds before its control had run; the control's record has the pair's test
        over_seeds("mask", [32.0, 34.0], [55.0, 55.0], 21.5, {"sequence": (0.012, 0.04)}),
        over_seeds("mask_random", [31.0, 33.0], [53.0, 55.0], 22, {"sequence": (0.3, 0.2), "mask": (0.5, 0.75)},
                   control),
        seed_run("udp", 1, 30.0, 52.0, 18, "sequence", "transformer_ldd"),
        seed_run("udp", 2, 31.0, 52.0, 19, "sequence", "transformer_ldd"),
        seed_run("udp", 3, 35.0, 52.0, 23, "sequence", "transformer_ldd"),
    ]
    for record in records:
        if record.get("seed") is None:
            del record["seed"]
    single = dict(seed_run("sequence", 1, 38.0, 62.0, 20), dataset="multi30k")
    # in file-name order (mask.seed1.run.json, mask.seeds.run.json, ...), an earlier dataset's run first
    return [single] + sorted(records, key=lambda r: (r["system"], "seed" not in r, r.get("seed", 0)))


def answer_of(records: list[dict], comparisons: Comparisons | None = None) -> dict:
    """RESULTS.json's answer of the study's seeds table."""
    return render_json(records, comparisons=comparisons)["datasets"]["multi30k-10k"]["answer"]


def paragraph_of(records: list[dict], comparisons: Comparisons | None = None) -> str:
    """RESULTS.md's answer paragraph of the study's seeds table (RESULTS.json holds its data, not its words)."""
    lines = render_markdown(records, comparisons=comparisons).splitlines()
    return lines[next(index for index, line in enumerate(lines) if line.startswith("### Answer")) + 2]


def over_seeds_of(records: list[dict], system: str) -> dict:
    return next(r for r in records if r["system"] == system and "seeds" in r)


EXPECTED_SEEDS_TABLE = [
    "| System | Structure read | Seeds | BLEU (mean ± sd) | chrF (mean ± sd) | Control of | Epochs (mean) |",
    "|---|---|---|---|---|---|---|",
    # (30 + 32) / 2 = 31, sd |30 - 32| / sqrt(2) = 1.41; chrF (50 + 54) / 2 = 52, sd 4 / sqrt(2) = 2.83
    "| sequence | none (words only) | 2: 1, 2 | 31.00 ± 1.41 | 52.00 ± 2.83 | – | 20.0 |",
    "| mask | parse | 2: 1, 2 | 33.00 ± 1.41 | 55.00 ± 0.00 | – | 21.5 |",
    # the control's row names its method (their tests: the answer's table)
    "| mask_random | control: random structures (seed 1) | 2: 1, 2 | 32.00 ± 1.41 | 54.00 ± 1.41 | mask | 22.0 |",
    # not scored over its seeds: mean (30 + 31 + 35) / 3 = 32, sd sqrt((4 + 1 + 9) / 2); epochs (18 + 19 + 23) / 3
    "| udp | parse | 3: 1, 2, 3 | 32.00 ± 2.65 | 52.00 ± 0.00 | – | 20.0 |",
]
PARSES = "parses of the training data (systems that read no syntax ignore them): `constituency crf-con.pt (F1 87.12)`"
#: the notes below the seeds table of study_records
STUDY_NOTES = [f"p: two-sided p-value of the row's system against the system it is tested against (the answer's "
               f"table) ({SEEDS_TEST}, 1000 samples, seed 12345).", "BLEU signature: `nrefs:1|tok:13a`",
               f"{PARSES}: sequence, mask, udp; `constituency crf-con.pt (F1 87.12)` under control random structures "
               "(seed 1): mask_random"]


def test_a_study_over_seeds_has_one_row_per_system_and_its_commands_below(tmp_path):
    records = study_records()
    lines = render_markdown(records).splitlines()
    # the study's table first, one row per system, each control after its system
    assert lines.index("## multi30k-10k") < lines.index("## multi30k")
    start = lines.index("## multi30k-10k") + 2
    assert lines[start:start + 8] == [READING, ""] + EXPECTED_SEEDS_TABLE
    assert "### Convergence" not in lines  # no run recorded a curve
    assert f"- {STUDY_NOTES[0]}" in lines and f"- {STUDY_NOTES[2]}" in lines
    commands = lines[lines.index("### Commands"):lines.index("## multi30k")]
    assert [line for line in commands if line.startswith("**")] == [
        "**sequence** (seeds 1, 2)", "**mask** (seeds 1, 2)", "**mask_random** (seeds 1, 2)", "**udp** (seeds 1, 2, 3)"]
    udp = commands.index("**udp** (seeds 1, 2, 3)")
    assert commands[udp + 2:udp + 4] == ["- train: the first row's, `--arch transformer` -> `--arch transformer_ldd`",
                                         "- decode: the first row's"]  # the same words: no change to show
    mask = commands.index("**mask** (seeds 1, 2)")
    # the first row's commands read with mask's name in its runs' names (ckpt-mask.seed$SEED): the rest differs
    assert commands[mask + 2:mask + 5] == [
        ("- train: the first row's, `OUT_DIR/data-bin/sequence` -> `OUT_DIR/data-bin/preorder`, `--arch transformer` "
         "-> `--arch transformer_syntax_mask`"),
        "- decode: the first row's, `OUT_DIR/data-bin/sequence` -> `OUT_DIR/data-bin/preorder`",
        ("- score: `fairseq-syntax-score examples/multi30k/runs/mask.seed{1,2}.gen.gz OUT_DIR/test.de.ref "
         "--bootstrap 1000`")]
    # the other dataset keeps its table of runs
    assert "| System | Arch | Seed | BLEU tok. | BLEU | chrF | p vs sequence (BLEU / chrF) | Updates | Epochs | " \
           "Wall time |" in lines


def test_a_seeds_tables_notes_said_in_another_report_are_named_there_and_read_by_seeds_notes(tmp_path):
    """A size of a study over sizes: its table's notes are said once in the report over the sizes."""
    records, notes = study_records(), STUDY_NOTES
    assert render_json(records)["datasets"]["multi30k-10k"]["notes"] == notes
    lines = render_markdown(records, notes="in `../RESULTS.md`").splitlines()
    start = lines.index("## multi30k-10k") + 2
    assert lines[start:start + 12] == [READING, "", *EXPECTED_SEEDS_TABLE, "", "- p, the signatures and the parses: "
                                       "in `../RESULTS.md`.", "", "### Answer so far"]
    assert not set(f"- {note}" for note in notes) & set(lines[:lines.index("## multi30k")])
    data = render_json(records, notes="in `../RESULTS.md`")["datasets"]
    assert "notes" not in data["multi30k-10k"] and data["multi30k"]["notes"]  # a table of runs keeps its own
    for record in records[1:]:
        name = f"{record['system']}.seed{record['seed']}" if "seed" in record else f"{record['system']}.seeds"
        (tmp_path / f"{name}.run.json").write_text(json.dumps(stored_form(record)))
    assert seeds_notes([tmp_path], registry_comparisons()) == notes
    (tmp_path / "one").mkdir()
    (tmp_path / "one/sequence.seed1.run.json").write_text(json.dumps(stored_form(records[0])))
    assert seeds_notes([tmp_path / "one"], registry_comparisons()) == []  # one seed: no seeds table


#: the refusal of mask's record over seeds 1 and 2 without seed 1's record
SEED1_MISSING = (r"mask.seeds.run.json: the record of its seed 1, "
                 r"mask.seed1.run.json, is missing \(not there or packed\)$")


def test_a_record_over_seeds_without_its_seeds_facts_reads_them_from_its_first_seeds_record(tmp_path):
    over = {key: value for key, value in over_seeds("mask", [32.0, 34.0], [55.0, 55.0], 21.5, {}).items()
            if key not in (*SEED_FACTS, "seed")}
    path = tmp_path / "mask.seeds.run.json"
    path.write_text(json.dumps(stored_form(over)))
    with pytest.raises(RecordError, match=SEED1_MISSING):
        results_of_runs([path])
    (tmp_path / "mask.seed1.run.json").write_text(json.dumps(stored_form(seed_run("mask", 1, 32.0, 55.0, 21, "own"))))
    lines = results_of_runs([path])[0].splitlines()  # the record over seeds alone: its row's commands are seed 1's
    assert lines[lines.index("**mask** (seeds 1, 2)") + 2:][:2] == [
        "- train: `fairseq-train OUT_DIR/data-bin/own --arch transformer_syntax_mask --save-dir "
        "OUT_DIR/ckpt/ckpt-mask.seed$SEED --seed $SEED --patience 5`",
        "- decode: `fairseq-generate OUT_DIR/data-bin/own --path OUT_DIR/ckpt/ckpt-mask.seed$SEED/checkpoint_best.pt "
        "--beam 5`"]
    assert f"- {PARSES}: mask" in lines


def test_a_record_over_seeds_of_what_is_over_its_seeds_only_reads_the_rest_from_all_its_seeds_records(tmp_path):
    over = over_seeds("mask", [0.0, 0.0], [0.0, 0.0], 0, {"sequence": (0.02, 0.2)})
    over = {key: over[key] for key in ("system", "significance", "score_command", "score_command_argv")}
    path = tmp_path / "mask.seeds.run.json"
    path.write_text(json.dumps(stored_form(dict(over, seed_list=[2, 1]))))  # seeds in the order they were scored
    (tmp_path / "mask.seed2.run.json").write_text(json.dumps(stored_form(seed_run("mask", 2, 34.0, 56.0, 23))))
    with pytest.raises(RecordError, match=SEED1_MISSING):
        load_record(path)
    (tmp_path / "mask.seed1.run.json").write_text(json.dumps(stored_form(seed_run("mask", 1, 32.0, 54.0, 20))))
    record = load_record(path)
    # its seeds' facts from its first seed's record (seed 2's), the rest over seed 2's and seed 1's, in that order
    assert (record["dataset"], record["arch"], record["command_argv"][-3]) == (
        "multi30k-10k", "transformer_syntax_mask", "2")
    assert record["seeds"] == 2  # its test's Monte-Carlo errors from its p: 2 sqrt(q (1 - q) / 1000), q = p / 2
    assert record["significance"] == {"sequence": {**over["significance"]["sequence"], "BLEU": {
        "p_value": 0.02, "p_mc_se": 2 * (0.01 * 0.99 / 1000) ** 0.5}, "chrF": {
        "p_value": 0.2, "p_mc_se": 2 * (0.1 * 0.9 / 1000) ** 0.5}}}
    # updates (157 * 23 + 157 * 20) / 2 = 3375.5 and epochs 21.5 as integers, as the means of their logs are
    assert (record["updates"], record["epochs"], record["wall_time_s"]) == (3375, 21, 600.0)
    assert record["train_log"] == ("examples/multi30k/runs/mask.seed2.train.log.gz,"
                                   "examples/multi30k/runs/mask.seed1.train.log.gz")
    assert record["per_seed_metrics"] == {"BLEU": [34.0, 32.0], "chrF": [56.0, 54.0]}
    assert record["metrics"] == {"BLEU": 33.0, "chrF": 55.0, "tokenize": "13a",
                                 "signatures": {"BLEU": "nrefs:1|tok:13a"}}
    assert record["metrics_sd"] == pytest.approx({"BLEU": 2 ** 0.5, "chrF": 2 ** 0.5})  # |34 - 32| / sqrt(2)
    assert "| mask | parse | 2: 2, 1 | 33.00 ± 1.41 | 55.00 ± 1.41 | – | 21.0 |" in render_markdown([record])
    # a field it holds is its own (a record of the earlier form holds every one), its seeds' records give the rest
    path.write_text(json.dumps(stored_form(dict(over, seed_list=[2, 1], epochs=30, metrics_sd={"BLEU": 9.0}))))
    record = load_record(path)
    assert (record["epochs"], record["metrics_sd"], record["updates"]) == (30, {"BLEU": 9.0}, 3375)


def test_a_seed_aware_test_held_to_8_digits_without_what_its_seeds_give_reads_back_whole(tmp_path):
    """Mask (seeds 1, 2: BLEU 32, 34; chrF 54, 56) against Sequence (seeds 1-3: BLEU 30, 31, 35; chrF 50, 53, 53)."""
    for system, seed, bleu, chrf in (("mask", 1, 32.0, 54.0), ("mask", 2, 34.0, 56.0), ("sequence", 1, 30.0, 50.0),
                                     ("sequence", 2, 31.0, 53.0), ("sequence", 3, 35.0, 53.0)):
        (tmp_path / f"{system}.seed{seed}.run.json").write_text(json.dumps(seed_run(system, seed, bleu, chrf, 20)))
    gen = "examples/runs/{}.seed{}.gen.gz".format
    argv = ["fairseq-syntax-score", f"{gen('mask', 1)},{gen('mask', 2)}", "OUT_DIR/test.de.ref",
            ",".join(gen("sequence", seed) for seed in (1, 2, 3)), "--bootstrap", "10000", "--baseline-name",
            "sequence"]
    # p = 2 k / 10001 (k = 230; 1), error 2 sqrt(q (1 - q) / 10000), q = p / 2; a, b: the means (32, 33; 52, 55).
    # Welch: BLEU sds^2 7 and 2: t = 1 / sqrt(7/3 + 2/2) = sqrt(0.3), df = (10/3)^2 / ((7/3)^2 / 2 + 1) = 200/67;
    # chrF 3 and 2: t = 3 / sqrt(2), df = 2^2 / (1/2 + 1) = 8/3
    whole = {"test": SEEDS_TEST, "n_samples": 10000, "seed": 12345, "seeds_a": 3, "seeds_b": 2}
    for metric, k, a, b, interval, t, df in (("BLEU", 230, 32.0, 33.0, [-0.123456789, 2.5], 0.3 ** 0.5, 200 / 67),
                                             ("chrF", 1, 52.0, 55.0, [1.5, 4.5], 3 / 2 ** 0.5, 8 / 3)):
        whole[metric] = {"p_value": 2 * k / 10001, "p_mc_se": 2 * (k / 10001 * (1 - k / 10001) / 10000) ** 0.5,
                         "a": a, "b": b, "delta": b - a, "delta_ci": interval,
                         "welch": {"t": t, "df": df, "p_value": 2 * student_t.sf(t, df)}}
    record = {"system": "mask", "significance": {"sequence": whole}, "score_command_argv": argv, "seed_list": [1, 2]}
    path, mine = tmp_path / "mask.seeds.run.json", {"BLEU": [32.0, 34.0], "chrF": [54.0, 56.0]}
    slim = stored_test(path, {**record, "per_seed_metrics": mine}, "sequence", whole)
    assert slim == {"test": SEEDS_TEST, "n_samples": 10000, "seed": 12345,  # floats to 8 significant digits
                    "BLEU": {"p_value": 0.0459954, "delta_ci": [-0.12345679, 2.5]},
                    "chrF": {"p_value": 0.00019998, "delta_ci": [1.5, 4.5]}}
    path.write_text(json.dumps({**record, "significance": {"sequence": slim}}))
    read = load_record(path)["significance"]["sequence"]
    for metric in ("BLEU", "chrF"):
        assert read[metric]["welch"] == pytest.approx(whole[metric]["welch"], rel=1e-12)
        whole[metric]["delta_ci"] = slim[metric]["delta_ci"]
    assert [list(read), list(read["BLEU"])] == [list(whole), list(whole["BLEU"])]  # in seed_bootstrap's order
    assert without_welch(read) == without_welch(whole)  # p and its error bit for bit
    assert load_record(path, seed_facts=False)["significance"]["sequence"] == {  # without reading the seeds' records
        **whole, **{metric: {key: whole[metric][key] for key in ("p_value", "p_mc_se", "delta_ci")}
                    for metric in ("BLEU", "chrF")}}
    # what its seeds do not give is kept: Mask's chrF scored otherwise (b 55.5, not the test's 55); no seed 3
    kept = stored_test(path, {**record, "per_seed_metrics": {**mine, "chrF": [54.0, 57.0]}}, "sequence", whole)
    assert kept["BLEU"] == slim["BLEU"] and "a" not in kept["chrF"] and kept["chrF"]["b"] == 55.0
    assert kept["chrF"]["delta"] == 3.0 and list(kept["chrF"]["welch"].values())[:2] == [2.1213203, 2.6666667]
    (tmp_path / "sequence.seed3.run.json").unlink()
    with pytest.raises(RecordError, match="the record of sequence's seed 3, sequence.seed3.run.json, is missing"):
        load_record(path)
    kept = stored_test(path, {**record, "per_seed_metrics": mine}, "sequence", whole)
    assert list(kept) == list(slim) and list(kept["BLEU"]) == ["p_value", "a", "b", "delta", "delta_ci", "welch"]


def without_welch(test: dict) -> dict:
    return {key: {field: value for field, value in found.items() if field != "welch"} if isinstance(found, dict)
            else found for key, found in test.items()}


def test_a_later_rows_command_is_shown_by_the_words_that_differ_from_the_first_rows():
    shared = " --user-dir fairseq_syntax --task syntax_translation --optimizer adam --lr-scheduler inverse_sqrt" * 2
    base = "fairseq-train D/sequence --arch transformer --save-dir C/sequence" + shared + " --max-epoch 200"
    words = "fairseq-train D/preorder --arch t_mask --save-dir C/mask" + shared + " --max-epoch 200 --x"
    assert _as_changes(base.split(), words.split()) == (
        "the first row's, `D/sequence` -> `D/preorder`, `--arch transformer` -> `--arch t_mask`, "
        "`--save-dir C/sequence` -> `--save-dir C/mask`, with `--x`")
    assert _as_changes(base.split(), base.split()[:-2]) == "the first row's, without `--max-epoch 200`"
    assert _as_changes(["a", "b"], ["c", "d"]) == "`c d`"  # no shorter: whole


def with_curve(record, curve, command_tail):
    """``record`` with a validation curve of nll_loss and its command's stopping options."""
    return dict(record, valid={"metric": "nll_loss", "curve": curve},
                **command_fields("command", record_argv(record) + command_tail.split()))


def test_convergence_table_names_the_checkpoint_fairseq_kept_and_the_epochs_past_patience():
    # seed 1: best 3.50 at epoch 3, patience 5 stops it at 8; seed 2: stopped by the cap of 4 epochs
    flat = [[1, 5.0], [2, 4.0], [3, 3.5], [4, 3.6], [5, 3.52], [6, 3.7], [7, 3.55], [8, 3.51]]
    falling = [[1, 5.0], [2, 4.0], [3, 3.9], [4, 3.8]]
    # seed 3: epoch 4 ties epoch 2's 3.663 (best written again), patience counts from 2 -> stop at 7; 8 trained past
    tied = [[1, 4.0], [2, 3.663], [3, 3.7], [4, 3.663], [5, 3.7], [6, 3.68], [7, 3.69], [8, 3.7]]
    # seed 4: stopped by patience at 7 (best at 2), and the epoch past it ties the best: the checkpoint kept is 8's
    late = [[1, 4.0], [2, 3.5], [3, 3.6], [4, 3.6], [5, 3.6], [6, 3.6], [7, 3.6], [8, 3.5]]
    records = [with_curve(seed_run("sequence", 1, 30.0, 50.0, 8), flat, " --max-epoch 100"),
               with_curve(seed_run("sequence", 2, 32.0, 54.0, 4), falling, " --max-epoch 4"),
               with_curve(seed_run("sequence", 3, 31.0, 52.0, 8), tied, " --max-epoch 100"),
               with_curve(seed_run("sequence", 4, 31.0, 52.0, 8), late, " --max-epoch 100"),
               seed_run("mask", 1, 32.0, 55.0, 21), seed_run("mask", 2, 34.0, 55.0, 22)]  # no curve recorded
    lines = render_markdown(records).splitlines()
    start = lines.index("### Convergence")
    assert lines[start + 2:start + 8] == [
        ("| System | Seed | Epochs trained | Patience stop | Past patience | Checkpoint kept (epoch) | Valid nll_loss "
         "kept | Change after it, to the stop: min | max |"),
        "|---|---|---|---|---|---|---|---|---|",
        # after epoch 3, to the stop at 8: +0.10, +0.02, +0.20, +0.05, +0.01
        "| sequence | 1 | 8 | 8 | – | 3 | 3.500 | +0.010 | +0.200 |",
        "| sequence | 2 | 4 | – (epoch cap) | – | 4 | 3.800 | – | – |",
        # after epoch 4 (the last of the tie), to the stop at 7: +0.037, +0.017, +0.027
        "| sequence | 3 | 8 | 7 | 1 | 4 | 3.663 | +0.017 | +0.037 |",
        # the checkpoint decoded is epoch 8's, past the stop; an uninterrupted run would have kept epoch 2's
        "| sequence | 4 | 8 | 7 | 1 | 8 (past patience; to the stop: 2) | 3.500 | +0.100 | +0.100 |",
    ]
    assert lines[start + 8] == "" and start < lines.index("### Commands")
    table = render_json(records)["datasets"]["multi30k-10k"]["convergence"]  # the columns once, a row a list
    assert table["columns"][-2:] == ["Change after it, to the stop: min", "max"]
    assert table["rows"][0] == ["sequence", 1, 8, 8, 0, 3, 3.5, pytest.approx(0.01), pytest.approx(0.2)]
    assert table["rows"][1][3:5] == [None, 0] and table["rows"][2][3:5] == [7, 1]
    # the table's epoch mean counts each run to its stop, 8, 4, 7, 7, and the epochs past it beside: 0, 0, 1, 1
    sequence = next(line for line in lines if line.startswith("| sequence | none"))
    assert sequence.endswith(" | 6.5 (+0.5 past patience) |")
    assert convergence_table([]) is None


def test_the_convergence_replay_follows_fairseqs_two_rules_on_ties():
    # minimise: 3.0 at 2, tied at 4 and 6: written at 2, 4, 6; patience counts from 2
    curve = [(1, 4.0), (2, 3.0), (3, 3.5), (4, 3.0), (5, 3.2), (6, 3.0)]
    assert kept_epoch(curve) == (6, 3.0)
    assert patience_stop(curve, 3) == 5 and patience_stop(curve, 4) == 6 and patience_stop(curve, 5) is None
    assert patience_stop(curve, 0) is None  # no early stopping
    # maximise (--maximize-best-checkpoint-metric, e.g. BLEU): the same rules the other way round
    assert kept_epoch([(1, 20.0), (2, 25.0), (3, 25.0), (4, 24.0)], maximize=True) == (3, 25.0)
    assert patience_stop([(1, 20.0), (2, 25.0), (3, 25.0), (4, 24.0)], 2, maximize=True) == 4
    assert kept_epoch([]) is None


def test_results_json_of_a_study_holds_each_seeds_score_and_the_figure_draws_them(tmp_path):
    data = render_json(study_records(), comparisons=MULTI30K)
    study = data["datasets"]["multi30k-10k"]
    assert list(data["datasets"]) == ["multi30k-10k", "multi30k"] and study["seeds"] is True
    # the comparisons the table was made with, recorded: the figure and the README read them back
    assert study["comparisons"] == MULTI30K.to_json() and recorded_comparisons(data) == MULTI30K
    mask, control = study["table"]["rows"][1:3]
    assert mask["Seeds"] == [1, 2] and (mask["Control of"], control["Control of"]) == (None, "mask")
    assert mask["BLEU (mean ± sd)"] == {"mean": 33.0, "sd": pytest.approx(2 ** 0.5), "per_seed": [32.0, 34.0]}
    assert study["table"]["rows"][3]["BLEU (mean ± sd)"]["per_seed"] == [30.0, 31.0, 35.0]  # udp, from its runs
    assert "commands" not in study  # RESULTS.md shows them; the records listed in run_records hold them

    dataset, rows = seeds_rows(data)
    assert dataset == "multi30k-10k"
    assert [(row["system"], row["kind"]) for row in rows] == [("sequence", "none"), ("mask", "parse"),
                                                              ("mask_random", "control"), ("udp", "parse")]
    assert positions(rows, MULTI30K) == [0.0, 1.0, 1.7, 2.7]  # the control beside its system
    # mask_random as a method of its own (comparisons without that control): one apart like the others
    assert positions(rows, Comparisons("sequence")) == [0.0, 1.0, 2.0, 3.0]
    results = tmp_path / "RESULTS.json"
    results.write_text(json.dumps(data))
    png = tmp_path / "seeds.png"
    plot_cli.main(["seeds", str(results), str(png)])  # fairseq-syntax-plot seeds RESULTS.json OUT.png
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size < 60_000


@pytest.mark.parametrize("content, message", [
    (None, "No such file or directory"),
    ('{"tables": []}', "RESULTS.json: not a RESULTS.json of fairseq-syntax-results"),
    ('{"datasets": {"multi30k": {"table": {}}}}', "RESULTS.json: no dataset of several seeds in these results"),
    ('{"datasets": {"d": {"seeds": true, "table": {"rows": [{"System": "a", "Structure read": "parse", '
     '"BLEU (mean ± sd)": {"mean": 1, "sd": 0, "per_seed": [1]}}]}}}}',
     "RESULTS.json: the seeds table of 'd' records no comparisons (written by an older fairseq-syntax-results: "
     "run it again)"),
], ids=["missing", "not-results", "no-seeds", "no-comparisons"])
def test_plot_seeds_names_the_file_and_its_problem_without_a_traceback(tmp_path, monkeypatch, capsys, content,
                                                                        message):
    results = tmp_path / "RESULTS.json"
    if content is not None:
        results.write_text(content)
    monkeypatch.setattr("sys.argv", ["fairseq-syntax-plot", "seeds", str(results), str(tmp_path / "seeds.png")])
    with pytest.raises(SystemExit) as stop:
        plot_cli.cli_main()
    assert str(stop.value).startswith("fairseq-syntax-plot: error: ") and message in str(stop.value)
    assert not (tmp_path / "seeds.png").exists()


@pytest.mark.parametrize("name", ["run.train.log", "run.train.log.gz"])
def test_a_kept_log_names_no_folder_of_the_machine(tmp_path, name):
    site = sysconfig.get_paths()["purelib"]
    repo, out = tmp_path / "repo", tmp_path / "repo" / "examples" / "work"
    text = (f"fairseq-train {out}/data-bin/sequence --save-dir {out}/ckpt/a\r\n"
            f"{site}/fairseq/tasks/fairseq_task.py:531: UserWarning: ...\n"
            f"| INFO | fairseq.checkpoint_utils | saved {out}/ckpt/a/checkpoint_best.pt\n"
            f"user dir {repo}/fairseq_syntax; epoch 001 | loss 4.2 | wall 12\n"
            "no path here, /tmp/plasma stays\n")
    path = tmp_path / name
    with open_text(path, "w", newline="") as handle:
        handle.write(text)
    assert make_log_portable(path, out_dir=str(out), root=str(repo)) == 4
    with open_text(path, newline="") as handle:
        assert handle.read() == (
            "fairseq-train OUT_DIR/data-bin/sequence --save-dir OUT_DIR/ckpt/a\r\n"  # the CR LF line end kept
            "SITE_PACKAGES/fairseq/tasks/fairseq_task.py:531: UserWarning: ...\n"
            "| INFO | fairseq.checkpoint_utils | saved OUT_DIR/ckpt/a/checkpoint_best.pt\n"
            "user dir fairseq_syntax; epoch 001 | loss 4.2 | wall 12\n"
            "no path here, /tmp/plasma stays\n")
    assert make_log_portable(path, out_dir=str(out), root=str(repo)) == 0  # nothing left to change
    assert [p.name for p in tmp_path.iterdir()] == [name]  # no temporary file left


@pytest.mark.parametrize("deltas, p_values, expected", [
    ({"BLEU": 0.8, "chrF": 0.5}, {"BLEU": 0.01, "chrF": 0.049}, "better"),
    ({"BLEU": -0.8, "chrF": -0.5}, {"BLEU": 0.001, "chrF": 0.02}, "worse"),
    ({"BLEU": 0.8, "chrF": -0.5}, {"BLEU": 0.05, "chrF": 0.9}, "no measurable difference"),  # 0.05 is not below
    ({"BLEU": 0.8, "chrF": 0.5}, {"BLEU": 0.01, "chrF": 0.2}, "mixed"),  # one metric only
    ({"BLEU": 0.8, "chrF": -0.5}, {"BLEU": 0.01, "chrF": 0.01}, "mixed"),  # both significant, opposite ways
])
def test_a_comparison_verdict_follows_the_stated_rule(deltas, p_values, expected):
    assert verdict(deltas, p_values) == expected


#: the answer's sentence on mask against mask_random (study_records)
MASK_RANDOM_ANSWER = ("Is it the parse? Against the same method on random trees (random): the parse is better: none; "
                      "random trees do as well: mask; random trees do better: none; mixed: none.")
#: the systems of the study's grid with no run in study_records
NO_RUN = ("hier_accum, hier_accum_random, udp_random, ldd, linearized, dbsa, pascal, dbsa_random, mask_struct, "
          "hier_accum_struct")
RULE_AND_TEST = (
    "Rule: better (worse): BLEU and chrF both higher (lower) with p < 0.05 each; no measurable difference: neither p "
    "below 0.05; mixed: the metrics disagree; borderline: a p within 2 Monte-Carlo standard errors of 0.05, whose "
    "side of 0.05 another draw of the rounds could change. Test: two-sided seed-aware paired bootstrap (1,000 rounds; "
    "each p ± its Monte-Carlo standard error), with Welch's t-test over the seeds' scores beside it; not corrected for "
    "the table's several comparisons.")


def test_the_answer_states_each_method_against_sequence_and_its_controls():
    records = study_records()
    # the control's record holds control minus mask [-2.0, 0.5]: mask minus control is [-0.5, 2.0]
    control = over_seeds_of(records, "mask_random")
    control["significance"]["mask"]["BLEU"]["delta_ci"] = [-2.0, 0.5]
    lines = render_markdown(records, comparisons=MULTI30K).splitlines()
    start = lines.index("### Answer so far")
    # mask 33 / 55 vs sequence 31 / 52 (p 0.012 / 0.04): up; vs mask_random +1 / +1 (p 0.5 / 0.75); udp unscored
    assert lines[start + 2] == (
        "1 of 7 methods scored over their seeds, against sequence at 31.00 ± 1.41 BLEU (2 seeds). Against the words "
        f"alone: better: mask; no measurable difference: none; worse: none; mixed: none. {MASK_RANDOM_ANSWER} Waiting "
        f"for their seeds: udp; no run finished yet: {NO_RUN}; more seeds to come: sequence (2 of 5), mask (2 of 5), "
        "mask_random (2 of 5), udp (3 of 5). " + RULE_AND_TEST)
    assert lines[start + 4:start + 10] == [
        ("| System | Against | Seeds | BLEU: Δ (95% interval) | BLEU: p ± error (t) | chrF: Δ (95% interval) | "
         "chrF: p ± error (t) | Verdict |"),
        "|---|---|---|---|---|---|---|---|",
        "| mask | sequence | 2 vs 2 | +2.00 | 0.012 | +3.00 | 0.040 | better |",
        "| mask | mask_random | 2 vs 2 | +1.00 (-0.50 to +2.00) | 0.500 | +1.00 | 0.750 | no measurable difference |",
        "| mask_random | sequence | 2 vs 2 | +1.00 | 0.300 | +2.00 | 0.200 | no measurable difference |",
        ""]
    assert lines.index("### Answer so far") < lines.index("### Commands")
    answer = answer_of(records, MULTI30K)
    mask = answer["systems"][0]
    assert [control["control"] for control in mask["controls"]] == ["mask_random", "mask_struct"]
    assert mask["controls"][0]["comparison"]["BLEU"] == {"delta": 1.0, "p_value": 0.5, "p_mc_se": None, "welch": None,
                                                          "delta_ci": [-0.5, 2.0], "borderline": False}
    assert mask["controls"][1]["comparison"] is None  # mask_struct: no run yet
    assert answer["systems"][1]["vs_baseline"] is None and "paragraph" not in answer
    assert answer["planned_seeds"] == dict(MULTI30K.planned_seeds)
    # comparisons without a plan (the registry's) list nothing as not started, and plan no seeds
    other = [dict(r, system="other-UDP") if r["system"] == "udp" else r for r in records
             if r["dataset"] == "multi30k-10k"]
    paragraph = paragraph_of(other)
    assert "no run finished yet" not in paragraph and "more seeds" not in paragraph
    assert " Waiting for their seeds: other-UDP. Rule: " in paragraph  # the name as it is, only the first letter raised


def seeds_report(p_bleu, se_bleu, p_chrf, se_chrf, welch_t=None):
    """A test of scoring.seed_bootstrap's report format: p-values with their Monte-Carlo errors and Welch's test."""
    welch = {"t": welch_t, "df": 3.5, "p_value": 0.08} if welch_t is not None else None
    return {"test": SEEDS_TEST, "n_samples": 10000, "seed": 12345,
            "BLEU": {"p_value": p_bleu, "p_mc_se": se_bleu, "delta_ci": [0.1, 1.9], "welch": welch},
            "chrF": {"p_value": p_chrf, "p_mc_se": se_chrf, "delta_ci": [0.2, 1.8], "welch": None}}


def test_seeds_that_land_after_a_system_was_scored_are_shown_until_it_is_scored_over_them():
    # Sequence scored over seeds 1 and 2; its seeds 3, 4, 5 finished since (the study gives it five)
    records = study_records() + [seed_run("sequence", seed, 31.0, 52.0, 20, "sequence", "transformer")
                                 for seed in (3, 4, 5)]
    lines = render_markdown(records, comparisons=MULTI30K).splitlines()
    sequence = next(line for line in lines if line.startswith("| sequence | none"))
    # the row is still the record's (2 seeds: mean 31.00 ± 1.41); the runs' epochs too: (19 + 21) / 2
    assert sequence == ("| sequence | none (words only) | 2: 1, 2 (3, 4, 5 trained since, not yet scored over) | "
                        "31.00 ± 1.41 | 52.00 ± 2.83 | – | 20.0 |")
    assert "; seeds trained but not yet scored over: sequence (3, 4, 5); more seeds to come: mask (2 of 5), " \
           "mask_random (2 of 5), udp (3 of 5). Rule: " in paragraph_of(records, MULTI30K)
    # sequence 5, mask 2, mask_random 2, udp 3 runs finished, of the study's 8 x 5 + 6 x 3 = 58
    block = readme_block(render_json(records, comparisons=MULTI30K), "RESULTS.md")
    assert block[1].startswith("**The answer so far** (multi30k-10k, 12 of the study's 58 runs finished): each "
                               "method against sequence (31.00 ± 1.41 BLEU over 2 seeds) and against itself")
    # the line's start as test_the_readme_block_is_a_verdict_table_and_a_few_sentences checks it
    assert block[-3].startswith("Still to come: ") and block[-3].endswith(
        "; seeds trained, not yet scored over: sequence (3, 4, 5); more seeds: mask (2 of 5), mask_random (2 of 5), "
        "udp (3 of 5).")


def test_a_control_tested_over_fewer_seeds_than_its_rows_show_is_a_dash_until_scored_again():
    records = study_records()
    control = over_seeds_of(records, "mask_random")
    control["significance"]["mask"].update(seeds_a=1, seeds_b=2)  # a: the baseline (mask), b: the record's system
    control["significance"]["sequence"].update(seeds_a=2, seeds_b=2)
    answer = answer_of(records, MULTI30K)
    mask = next(entry for entry in answer["systems"] if entry["system"] == "mask")
    assert mask["controls"][0]["comparison"] is None
    # against Sequence, over 2 and 2 seeds: read
    assert answer["controls"][0]["vs_baseline"]["BLEU"]["p_value"] == 0.3
    assert "Waiting for their seeds: udp, mask_random;" in paragraph_of(records, MULTI30K)
    control["significance"]["mask"].update(seeds_a=2)  # scored again over Mask's two seeds
    mask = next(entry for entry in answer_of(records, MULTI30K)["systems"] if entry["system"] == "mask")
    assert mask["controls"][0]["comparison"]["chrF"]["p_value"] == 0.75


def test_a_p_within_two_monte_carlo_errors_of_005_makes_its_verdict_borderline():
    # |0.044 - 0.05| = 0.006 <= 2 x 0.0031; |0.043 - 0.05| = 0.007 > 0.0062; no error: never borderline
    assert is_borderline(0.044, 0.0031) and is_borderline(0.056, 0.0031) and not is_borderline(0.043, 0.0031)
    assert not is_borderline(0.05, None)
    records = study_records()
    mask = over_seeds_of(records, "mask")
    mask["significance"]["sequence"] = seeds_report(0.045, 0.003, 0.012, 0.0011, welch_t=-2.5)
    lines = render_markdown(records).splitlines()
    paragraph = lines[lines.index("### Answer so far") + 2]
    # the rounds of every test the answer reads: the older records 1,000, this one 10,000
    assert "Against the words alone: better: mask (borderline); " in paragraph
    assert "(1,000 / 10,000 rounds;" in paragraph
    # the p with its Monte-Carlo error and Welch's p, in the comparisons
    assert ("| mask | sequence | 2 vs 2 | +2.00 (+0.10 to +1.90) | 0.045±0.003, t 0.080 | +3.00 (+0.20 to +1.80) | "
            "0.012±0.001 | better (borderline) |") in lines
    # stored in mask's own record: mask minus sequence as it is
    assert answer_of(records)["systems"][0]["vs_baseline"]["BLEU"]["welch"]["t"] == -2.5


STUDY_SOURCES = [f"examples/multi30k/runs/{name}.run.json" for name in (
    "mask.seed1", "mask.seed2", "mask.seeds", "mask_random.seeds", "sequence.seed1", "sequence.seed2",
    "sequence.seeds", "udp.seed1", "udp.seed2", "udp.seed3")]
README_RULE = (
    "Rule (fixed before the results): better (worse) when BLEU and chrF are both higher (lower), each with p < 0.05 "
    "in a paired bootstrap over test sentences and seeds; mixed when the metrics disagree; borderline when a p lies "
    "within 2 Monte-Carlo errors of 0.05; not corrected for the several comparisons.")


def readme_link(results_md):
    return (f"The full table (each comparison in every metric, its interval, Monte-Carlo error and Welch's test; the "
            f"commands; each run's convergence): [{results_md}]({results_md}).")


def test_the_readme_block_is_a_verdict_table_and_a_few_sentences():
    records = study_records()
    results = render_json(records, STUDY_SOURCES, MULTI30K)
    block = readme_block(results, "examples/multi30k/RESULTS.md")
    assert block[0] == f"{README_BEGIN} examples/multi30k/RESULTS.json -->" and block[-1] == README_END
    # seeds: sequence 2, mask 2, mask_random 2, udp 3; grid 8 x 5 + 6 x 3; controls random and struct
    assert block[1:-1] == [
        ("**The answer so far** (multi30k-10k, 9 of the study's 58 runs finished): each method against sequence "
         "(31.00 ± 1.41 BLEU over 2 seeds) and against itself on control structures (random: random trees; struct: "
         "random trees with the parse's phrase count and labels)."),
        "",
        "| Method | Seeds | vs sequence | vs its random control | vs its struct control |",
        "|---|---|---|---|---|",
        # mask vs sequence +2 / +3, p 0.012 / 0.040: better; vs mask_random +1 / +1 at p 0.5 / 0.75; mask_struct: no run
        ("| mask | 2 of 5 | **better**: +2.00 BLEU (p 0.012) | no measurable difference: +1.00 BLEU (p 0.500) | "
         "no run yet |"),
        # three runs, not scored over them: no test yet; its control no run; no struct control of its own
        "| udp | 3 of 5 | – | no run yet |  |",
        "",
        README_RULE,
        (f"Still to come: not yet scored over their seeds: udp; no run yet: {NO_RUN}; more seeds: sequence (2 of 5), "
         "mask (2 of 5), mask_random (2 of 5), udp (3 of 5)."),
        readme_link("examples/multi30k/RESULTS.md")]
    # a borderline p (|0.045 - 0.05| <= 2 x 0.003) says so; chrF far from 0.05 agrees: BLEU's difference and p alone
    mask = over_seeds_of(records, "mask")
    mask["significance"]["sequence"] = seeds_report(0.045, 0.003, 0.012, 0.0011, welch_t=2.5)
    row = next(line for line in readme_block(render_json(records, comparisons=MULTI30K), "RESULTS.md")
               if line.startswith("| mask |"))
    assert row.startswith("| mask | 2 of 5 | **better** (borderline): +2.00 BLEU (p 0.045) | ")
    # metrics disagree (BLEU p 0.3, chrF p 0.01): mixed; a borderline chrF p is shown beside BLEU's
    mask["significance"]["sequence"] = seeds_report(0.3, 0.004, 0.01, 0.001)
    over_seeds_of(records, "mask_random")["significance"]["mask"] = seeds_report(0.5, 0.005, 0.056, 0.004)
    row = next(line for line in readme_block(render_json(records, comparisons=MULTI30K), "RESULTS.md")
               if line.startswith("| mask |"))
    assert row == ("| mask | 2 of 5 | mixed: +2.00 BLEU (p 0.300), +3.00 chrF (p 0.010) | no measurable difference "
                   "(borderline): +1.00 BLEU (p 0.500), +1.00 chrF (p 0.056) | no run yet |")


#: Mask and its control renamed, the control declared by the comparisons (its name says nothing)
TREE = Comparisons("sequence", {"tree_random": ("tree", "random")})


def renamed_study(names: dict[str, str]) -> list[dict]:
    """study_records' seeds table with systems renamed, in their records and in the tests they hold."""
    records = []
    for record in study_records():
        if record["dataset"] != "multi30k-10k":
            continue
        record = dict(record, system=names.get(record["system"], record["system"]))
        record["significance"] = {names.get(name, name): test for name, test in record["significance"].items()}
        records.append(record)
    return records


def test_a_table_with_every_method_scored_gives_the_answer_not_the_answer_so_far():
    # Sequence, a method and its control, comparisons planning nothing: the answer is complete
    records = [r for r in renamed_study({"mask": "tree", "mask_random": "tree_random"}) if r["system"] != "udp"]
    lines = render_markdown(records, comparisons=TREE).splitlines()
    assert "### Answer so far" not in lines and lines[lines.index("### Answer") + 2].startswith(
        "1 of 1 methods scored over their seeds, against sequence at 31.00 ± 1.41 BLEU (2 seeds). Against the words "
        "alone: better: tree;")
    results = render_json(records, ["examples/multi30k/runs/sequence.seed1.run.json"], TREE)
    # the seeds of the table's rows: sequence, tree and tree_random two each; nothing still to come
    block = readme_block(results, "RESULTS.md")
    assert block[1].startswith("**The answer** (multi30k-10k, 6 runs finished): ")
    assert not [line for line in block if line.startswith("Still to come")]


def test_the_answer_waits_for_a_control_in_training_and_the_readme_shows_no_test_the_answer_does_not_make():
    # tree and Sequence over their seeds; tree's control has one seed of its runs: the answer is not complete
    records = [r for r in renamed_study({"mask": "tree"}) if r["system"] in ("sequence", "tree")]
    records.append(seed_run("tree_random", 1, 31.0, 53.0, 20))
    answer = answer_of(records, TREE)
    assert answer["complete"] is False
    assert " Waiting for their seeds: tree_random. Rule: " in paragraph_of(records, TREE)
    # Sequence not scored over its seeds: no comparison in the paragraph, none in the README's rows either
    unscored = [r for r in records if not (r["system"] == "sequence" and "seed" not in r)]
    results = render_json(unscored, comparisons=TREE)
    assert paragraph_of(unscored, TREE).startswith("No answer yet")
    tree = next(line for line in readme_block(results, "RESULTS.md") if line.startswith("| tree |"))
    assert tree == "| tree | 2 | – | – |"


def test_the_baseline_and_the_controls_are_the_comparisons_not_the_names():
    # baseline called words, Mask's control mask_shuffled, declared so: the same table as sequence / mask_random
    records = renamed_study({"sequence": "words", "mask_random": "mask_shuffled"})
    words = Comparisons("words", {"mask_shuffled": ("mask", "random")})
    lines = render_markdown(records, comparisons=words).splitlines()
    start = lines.index("## multi30k-10k") + 4  # below the pointer to the notes every report shares
    # words is no registry system: its records name the parses of its data, so "parse"
    assert lines[start:start + 6] == [
        line.replace("sequence | none (words only)", "words | parse").replace("sequence", "words").replace(
            "mask_random", "mask_shuffled") for line in EXPECTED_SEEDS_TABLE]
    # not known to read the words alone, the baseline is named (the rest as test_the_answer_states_... checks it)
    assert lines[lines.index("### Answer so far") + 2].startswith(
        "1 of 2 methods scored over their seeds, against words at 31.00 ± 1.41 BLEU (2 seeds). Against words: better: "
        "mask;")
    # mask_shuffled is mask's control: its verdict in the control's column
    block = readme_block(render_json(records, comparisons=words), "RESULTS.md")
    assert block[5:8] == [
        "| mask | 2 | **better**: +2.00 BLEU (p 0.012) | no measurable difference: +1.00 BLEU (p 0.500) |",
        "| udp | 3 | – |  |", ""]
    # the registry's comparisons: no row is sequence, mask_shuffled is no control: every row its own method
    default = render_markdown(records).splitlines()
    assert [line.split(" | ")[0] for line in default if line.startswith("| ") and " | 2: 1, 2 | " in line] == [
        "| mask", "| mask_shuffled", "| words"]
    shuffled = next(line for line in default if line.startswith("| mask_shuffled |"))
    assert shuffled.endswith("| – | 22.0 |")  # no method
    assert default[default.index("### Answer so far") + 2].startswith(
        "No answer yet: sequence, the baseline every method is tested against, is not scored over its seeds "
        "(0 trained).")


def test_without_a_baseline_each_method_is_tested_against_its_controls_only():
    records = [r for r in study_records() if r["dataset"] == "multi30k-10k"]
    alone = Comparisons(None, {"mask_random": ("mask", "random")})
    lines = render_markdown(records, comparisons=alone).splitlines()
    start = lines.index("## multi30k-10k") + 4
    # no column against a baseline; sequence is a system like the others, in its records' place (after mask's)
    assert lines[start:start + 6] == [EXPECTED_SEEDS_TABLE[row] for row in (0, 1, 3, 4, 2, 5)]
    # mask and sequence scored over their seeds, udp not yet; mask against its control only
    assert lines[lines.index("### Answer so far") + 2] == (
        f"2 of 3 methods scored over their seeds, each tested against its controls (no baseline). {MASK_RANDOM_ANSWER} "
        "Waiting for their seeds: udp. " + RULE_AND_TEST)
    block = readme_block(render_json(records, comparisons=alone), "RESULTS.md")
    assert block[1:6] == [
        ("**The answer so far** (multi30k-10k, 9 runs finished): each method against itself on control structures "
         "(random: random trees)."), "",
        "| Method | Seeds | vs its random control |", "|---|---|---|",
        "| mask | 2 | no measurable difference: +1.00 BLEU (p 0.500) |"]
    assert block[6:8] == ["| sequence | 2 |  |", "| udp | 3 |  |"]


def test_comparisons_go_to_json_and_back_and_bad_ones_are_named():
    assert Comparisons.from_json(MULTI30K.to_json()) == MULTI30K
    assert list(MULTI30K.to_json()["controls"]) == ["mask_random", "mask_struct", "udp_random", "hier_accum_random",
                                                    "hier_accum_struct", "dbsa_random"]  # the order kept
    assert MULTI30K.controls_of("mask") == [("mask_random", "random"), ("mask_struct", "struct")]
    assert (MULTI30K.method_of("udp_random"), MULTI30K.method_of("udp")) == ("udp", None)
    assert MULTI30K.kinds == ["random", "struct"]
    # the registry's: its words-only baseline, its control systems, no plan; a plan's systems are the expected ones
    registry = registry_comparisons(planned_seeds={"sequence": 2, "mask": 1})
    assert registry.baseline == "sequence" and registry.controls == MULTI30K.controls
    assert registry.expected == ("sequence", "mask")
    for wrong, message in [
        (dict(controls={"mask_random": ("mask", "shuffled")}),
         "comparisons: controls.mask_random: kind 'shuffled' is not one of random, left, right, struct"),
        (dict(controls={"mask": ("mask", "random")}), "comparisons: controls.mask: a control of itself"),
        (dict(controls={"a": ("b", "random"), "b": ("c", "random")}),
         "comparisons: controls.a: its method b is itself a control"),
        (dict(baseline="a", controls={"a": ("b", "random")}), "controls.a: the baseline cannot be a control"),
        (dict(planned_seeds={"mask": 0}), "comparisons: planned_seeds.mask: a positive number of seeds, got 0"),
        (dict(expected=("a", "b", "a")), "comparisons: expected: a listed more than once"),
        (dict(alpha=1.5), "comparisons: alpha: a level between 0 and 1, got 1.5"),
        (dict(metrics=()), "comparisons: metrics: one or more distinct metric names, got []"),
    ]:
        with pytest.raises(ValueError) as error:
            Comparisons(**wrong)
        assert message in str(error.value)
    with pytest.raises(ValueError) as error:
        Comparisons.from_json({**MULTI30K.to_json(), "baselines": ["x"]}, "datasets.d.comparisons")
    assert str(error.value) == "datasets.d.comparisons: unknown keys baselines"
    with pytest.raises(ValueError) as error:
        Comparisons.from_json({"planned_seeds": {"mask": -1}}, "datasets.d.comparisons")
    assert str(error.value) == "datasets.d.comparisons: planned_seeds.mask: a positive number of seeds, got -1"


def test_the_results_command_takes_the_comparisons_as_options(tmp_path, capsys):
    runs = tmp_path / "runs"
    runs.mkdir()
    records = renamed_study({"sequence": "words", "mask_random": "mask_shuffled"})
    for index, record in enumerate(records):
        (runs / f"{index:02d}.run.json").write_text(json.dumps(record))
    out = tmp_path / "RESULTS.md"
    results_cli.main([str(runs), "--out", str(out), "--baseline", "words", "--control", "mask_shuffled=mask:random",
                      "--plan", "words=2", "--plan", "mask=3", "--plan", "mask_shuffled=2", "--plan", "udp=3"])
    data = json.loads(out.with_suffix(".json").read_text())["datasets"]["multi30k-10k"]
    assert data["comparisons"] == {"baseline": "words", "controls": {"mask_shuffled": {"method": "mask",
                                                                                       "kind": "random"}},
                                   "planned_seeds": {"words": 2, "mask": 3, "mask_shuffled": 2, "udp": 3},
                                   "expected": ["words", "mask", "mask_shuffled", "udp"], "alpha": 0.05,
                                   "metrics": ["BLEU", "chrF"]}
    assert [row["Control of"] for row in data["table"]["rows"]] == [None, None, "mask", None]
    # mask has 2 of its 3 seeds: the answer is one so far; udp has its 3 but is not scored over them yet
    assert data["answer"]["pending"] == {"waiting for their seeds": ["udp"], "more seeds to come": ["mask (2 of 3)"]}
    # the registry's defaults (test_comparisons_go_to_json_and_back_and_bad_ones_are_named), no plan
    results_cli.main([str(runs), "--out", str(out)])
    data = json.loads(out.with_suffix(".json").read_text())["datasets"]["multi30k-10k"]
    assert data["comparisons"] == registry_comparisons().to_json() and data["comparisons"]["planned_seeds"] == {}
    capsys.readouterr()
    for options, message in [
        (["--control", "mask_shuffled"], "argument --control: 'mask_shuffled': expected CONTROL=SYSTEM:KIND"),
        (["--control", "a=b:shuffled"], "argument --control: 'a=b:shuffled': kind 'shuffled' is not one of random, "
                                         "left, right, struct"),
        (["--plan", "mask=0"], "argument --plan: 'mask=0': expected SYSTEM=SEEDS with SEEDS a positive number"),
        (["--plan", "mask=2", "--plan", "mask=3"], "--plan mask: given twice"),
    ]:
        with pytest.raises(SystemExit) as stop:
            results_cli.main([str(runs), "--out", str(tmp_path / "bad.md"), *options])
        error = capsys.readouterr().err.strip().splitlines()
        assert stop.value.code == 2 and error[-1].startswith("fairseq-syntax-results: error: ") \
            and message in error[-1], error
    assert not (tmp_path / "bad.md").exists()


def test_a_results_json_without_an_answer_is_named_without_a_traceback():
    data = render_json(study_records())
    del data["datasets"]["multi30k-10k"]["answer"]
    with pytest.raises(ValueError) as error:
        readme_block(data, "RESULTS.md")
    assert str(error.value) == ("no answer for dataset 'multi30k-10k' (written by fairseq-syntax-results of this "
                                "version)")


def test_a_run_without_a_seed_in_a_seeds_table_is_a_row_with_no_seeds_not_a_traceback():
    runs = [dict(seed_run("sequence", seed, 30.0 + seed, 50.0, 20, "sequence", "transformer")) for seed in (1, 2)]
    older = seed_run("linearized", 1, 30.0, 52.0, 20, "linearized", "transformer")
    del older["seed"]  # a record from before runs recorded their seed
    lines = render_markdown(runs + [older]).splitlines()
    # sequence: (31 + 32) / 2 = 31.5, sd 0.71; linearized (its input the linearized parse): one run, no seed to list
    assert "| sequence | none (words only) | 2: 1, 2 | 31.50 ± 0.71 | 50.00 ± 0.00 | – | 20.0 |" in lines
    # one run has no spread: its score alone, not "± 0.00" (which would read as runs that agree exactly)
    assert "| linearized | parse | – | 30.00 (one seed) | 52.00 (one seed) | – | 20.0 |" in lines


def test_an_answer_with_no_system_tested_yet_names_no_rounds():
    assert _test_text([]).startswith("Test: two-sided seed-aware paired bootstrap (none run yet; each p ± its ")
    assert "?" not in _test_text([])
