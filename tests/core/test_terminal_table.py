"""fairseq-syntax-results --terminal: system, BLEU, chrF, p, time; best BLEU first, under 100 columns."""
import json

from fairseq_syntax.cli.results import main, terminal_table


def record(system, bleu, chrf, seconds, p_values=None, dataset="demo"):
    significance = {} if p_values is None else {"sequence": {"BLEU": {"p_value": p_values[0]},
                                                             "chrF": {"p_value": p_values[1]}}}
    return {"dataset": dataset, "system": system, "metrics": {"BLEU": bleu, "chrF": chrf},
            "significance": significance, "wall_time_s": seconds}


def test_rows_best_bleu_first_with_p_against_the_baseline_and_the_training_time():
    table = terminal_table([record("sequence", 59.844, 76.242, 53.0),
                            record("hier_accum_random", 66.5, 79.81, 3725.4, (0.0123, 0.5)),
                            record("mask", 78.738, 87.8696, 88.0, (0.001, 0.001))])
    # widths: the longest cell of each column ("hier_accum_random", 17; the p header, 27; "training", 8)
    assert table == (
        "demo: 3 runs\n"
        "system              BLEU   chrF  p vs sequence (BLEU / chrF)  training\n"
        "-----------------  -----  -----  ---------------------------  --------\n"
        "mask               78.74  87.87                0.001 / 0.001   0:01:28\n"
        "hier_accum_random  66.50  79.81                0.012 / 0.500   1:02:05\n"
        "sequence           59.84  76.24                            –   0:00:53\n")
    assert max(len(line) for line in table.splitlines()) < 100


def test_each_dataset_its_own_block_and_a_run_without_a_comparison_or_score_shows_a_dash():
    table = terminal_table([record("a", 10.0, 20.0, 1.0, dataset="one"), record("b", None, 30.0, 2.0, dataset="two"),
                            record("c", 12.0, 21.0, 3.0, dataset="one")], against="sequence")
    blocks = table.split("\n\n")
    assert [block.splitlines()[0] for block in blocks] == ["one: 2 runs", "two: 1 runs"]
    assert [line.split()[0] for line in blocks[0].splitlines()[3:]] == ["c", "a"]
    assert blocks[1].splitlines()[3].split() == ["b", "–", "30.00", "–", "0:00:02"]


def test_the_command_prints_the_short_table_and_writes_the_full_one(tmp_path, capsys):
    from fairseq_syntax.evaluation.records import REQUIRED_FIELDS

    runs = tmp_path / "runs"
    runs.mkdir()
    for system, bleu, p in (("sequence", 30.0, None), ("mask", 31.5, (0.04, 0.2))):
        full = {**record(system, bleu, bleu + 20, 60.0, p), "arch": "transformer", "updates": 10, "epochs": 1,
                "command": f"fairseq-train data --arch {system}", "train_log": f"{system}.train.log"}
        full["metrics"].update({"tokenize": "13a", "n_sentences": 2, "signatures": {}})
        if p:
            full["significance"]["sequence"].update({"test": "paired bootstrap", "n_samples": 1000, "seed": 1})
        assert set(REQUIRED_FIELDS) <= set(full)
        (runs / f"{system}.run.json").write_text(json.dumps(full))
    main([str(runs), "--out", str(tmp_path / "RESULTS.md"), "--terminal"])
    printed = capsys.readouterr().out
    assert printed.splitlines()[3].split() == ["mask", "31.50", "51.50", "0.040", "/", "0.200", "0:01:00"]
    assert "fairseq-train" not in printed  # the commands are in the full table
    assert "fairseq-train data --arch mask" in (tmp_path / "RESULTS.md").read_text()
