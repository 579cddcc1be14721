"""make_results.py's throughput ratio is over the minutes in which both models trained only."""
import runpy
import subprocess
import sys

import pytest

from conftest import REPO


@pytest.fixture(scope="module")
def make_results():
    return runpy.run_path(f"{REPO}/examples/ptb_induction/make_results.py")


def log(*lines):
    """A training log: (HH:MM:SS, tokens/s) per train_inner line."""
    return "".join(f"2026-11-29 {time} | INFO | train_inner | epoch 001:     25 / 160 loss=7.5, wps={wps}, ups=3.0\n"
                   for time, wps in lines)


def test_the_ratio_is_of_the_minutes_both_trained(make_results):
    # both train 00:00-00:11, then the Tree Transformer alone, faster, 01:00-01:19
    tree = log(*[(f"00:{minute:02d}:{second:02d}", 2000 + 100 * (minute % 2)) for minute in range(12)
                 for second in (10, 40)],
               *[(f"01:{minute:02d}:10", 5000) for minute in range(20)])
    plain = log(*[(f"00:{minute:02d}:{second:02d}", 2500) for minute in range(12) for second in (20, 50)])
    result = make_results["side_by_side_throughput"](tree, plain)
    # medians over 00:00-00:11 only: the tree's 24 values, half 2000 and half 2100, have median 2050
    assert result == {"ratio": 2050 / 2500, "minutes": 12}
    # (over every line the tree's median would be 2100, its 22nd and 23rd of 44 values: the minutes alone count)
    run = {"side_by_side": result}
    assert make_results["throughput_ratio"](run) == pytest.approx(0.82)
    assert "0.82 (medians of fairseq's logged tokens/s in the 12 minutes in which both trained" in \
        make_results["throughput_sentence"](run)


def test_no_ratio_for_models_that_did_not_train_at_the_same_time(make_results):
    tree = log(*[(f"00:{minute:02d}:10", 2000) for minute in range(30)])
    plain = log(*[(f"01:{minute:02d}:10", 2500) for minute in range(30)])
    assert make_results["side_by_side_throughput"](tree, plain) is None
    assert make_results["throughput_ratio"]({"side_by_side": None}) is None
    assert "not measured" in make_results["throughput_sentence"]({"side_by_side": None})
    # nine shared minutes are too few
    plain = log(*[(f"00:{minute:02d}:20", 2500) for minute in range(9)])
    assert make_results["side_by_side_throughput"](tree, plain) is None


def test_a_run_shorter_than_the_log_interval_has_no_speed_and_no_traceback(make_results):
    # run.sh --updates 10, fairseq's --log-interval 25: no train_inner line, so no logged tokens/s
    assert make_results["median_words_per_second"]("2026-11-29 00:00:01 | INFO | valid | loss 7.5\n") is None
    assert make_results["number_cell"](None, ".0f").text == "–"
    # with lines: the median of the logged values, (2000 + 2100) / 2 over an even count
    assert make_results["median_words_per_second"](log(("00:00:10", 2000), ("00:00:40", 2100))) == 2050
    assert make_results["number_cell"](2050.4, ".0f").text == "2050"


def test_a_run_folder_without_its_logs_is_named_not_a_traceback(tmp_path):
    run = tmp_path / "logs-ptb-text"  # finished by its scores, but its logs are gone
    run.mkdir()
    (run / "perplexity_roberta_prenorm.json").write_text("{}")
    result = subprocess.run([sys.executable, f"{REPO}/examples/ptb_induction/make_results.py", "--here",
                             str(tmp_path)], capture_output=True, text=True, check=False)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith(f"make_results.py: error: {run}: "), result.stderr
    assert "make_corpus.log" in result.stderr
