"""A run record's commands (fairseq_syntax/evaluation/run_commands.py): argv lists with a display string beside them,
read back word for word; a record of the old form (commands as text) read once into words, its text kept, nothing
written back; the options and the ``$SEED`` command read from the words."""
import json
import shlex

from fairseq_syntax.evaluation.records import load_record, record_run
from fairseq_syntax.evaluation.run_commands import (
    command_fields,
    command_text,
    option_value,
    record_argv,
    with_argv,
    with_seed_variable,
)

LOG = "2024-05-01 10:00:03 | INFO | train | epoch 002 | loss 4.4 | num_updates 20 | wall 3\n"
ARGV = ["fairseq-train", "OUT_DIR/data-bin/preorder.random-s2", "--adam-betas", "(0.9, 0.98)", "--seed", "2",
        "--save-dir", "OUT_DIR/ckpt/ckpt-mask_random.seed2", "--patience=5", "--name", "it's", "--empty", ""]
#: the old form of the Multi30k records: words joined by spaces, unquoted
OLD = ("fairseq-train OUT_DIR/data-bin/preorder.random-s2 --adam-betas (0.9, 0.98) --seed 2 --save-dir "
       "OUT_DIR/ckpt/ckpt-mask_random.seed2 --patience 5")


def test_a_record_holds_each_command_as_its_words_and_reads_them_back(tmp_path):
    (tmp_path / "train.log").write_text(LOG)
    path = tmp_path / "mask_random.seed2.run.json"
    record_run(path, dataset="d", system="mask_random", arch="a", command=ARGV, train_log=tmp_path / "train.log",
               metrics={"BLEU": 1.0}, **command_fields("decode_command", ["fairseq-generate", "a b"]))
    text = path.read_text()
    written = json.loads(text)
    assert written["command_argv"] == ARGV and written["decode_command_argv"] == ["fairseq-generate", "a b"]
    assert "command" not in written and "decode_command" not in written  # the file holds the words only
    assert '"command_argv": ["fairseq-train", "OUT_DIR/data-bin/preorder.random-s2", "--adam-betas",' in text
    written = load_record(path)
    # the display quotes only a word with a space or a quote (or none): a shell gives the same words back
    assert written["command"] == ("fairseq-train OUT_DIR/data-bin/preorder.random-s2 --adam-betas '(0.9, 0.98)' "
                                  "--seed 2 --save-dir OUT_DIR/ckpt/ckpt-mask_random.seed2 --patience=5 --name "
                                  "'it'\"'\"'s' --empty ''")
    assert shlex.split(written["command"]) == ARGV
    assert record_argv(written) == ARGV and record_argv(written, "decode_command") == ["fairseq-generate", "a b"]
    assert record_argv(written, "score_command") is None
    assert option_value(ARGV, "--seed") == "2" and option_value(ARGV, "--patience") == "5"
    assert option_value(ARGV, "--max-epoch") is None and option_value(ARGV, "--adam-betas") == "(0.9, 0.98)"


def test_a_record_of_the_old_form_is_read_once_into_words_and_kept_as_it_is(tmp_path):
    path = tmp_path / "mask_random.seed2.run.json"
    old = {"dataset": "d", "system": "mask_random", "arch": "a", "command": OLD, "updates": 20, "epochs": 2,
           "wall_time_s": 3.0, "train_log": "l", "metrics": {}, "significance": {}, "decode_command": "gen x --seed 2"}
    path.write_text(json.dumps(old))
    before = path.read_bytes()
    read = load_record(path)
    assert read["command"] == OLD  # its display: the text as recorded
    words = record_argv(read)
    assert words[3:5] == ["(0.9,", "0.98)"]  # a word of the old form that held a space comes back as two
    assert command_text(words) == OLD and option_value(words, "--patience") == "5"
    assert record_argv(read, "decode_command") == ["gen", "x", "--seed", "2"]
    assert path.read_bytes() == before
    # a record that has its words is not split again
    assert with_argv({"command": "a b", "command_argv": ["a b"]})["command_argv"] == ["a b"]


def test_a_seeds_command_shows_the_seed_as_a_variable():
    """``--seed 2``, ``--seed=2``, ``NAME.seed2`` and a control's ``DATA.CONTROL-s2`` written as ``$SEED``; another
    number that begins with the seed is left alone."""
    words = with_seed_variable([*ARGV, "--seed=2", "--bootstrap", "25", "x.seed23"], 2)
    assert command_text(words) == (
        "fairseq-train OUT_DIR/data-bin/preorder.random-s$SEED --adam-betas '(0.9, 0.98)' --seed $SEED --save-dir "
        "OUT_DIR/ckpt/ckpt-mask_random.seed$SEED --patience=5 --name 'it'\"'\"'s' --empty '' --seed=$SEED "
        "--bootstrap 25 x.seed23")
    # the old form's words shown as the old form showed them
    assert command_text(with_seed_variable(record_argv(with_argv({"command": OLD})), 2)) == (
        OLD.replace("random-s2", "random-s$SEED").replace("--seed 2", "--seed $SEED").replace(".seed2", ".seed$SEED"))
