"""fairseq-syntax-results --terminal: system, BLEU, chrF, p, time; best BLEU first, under 100 columns."""
from fairseq_syntax.cli.results import terminal_table


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

