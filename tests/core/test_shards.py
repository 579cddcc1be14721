"""Tests for fairseq_syntax.parsing.shards (and parsing.batching) with a stand-in parser that needs no model: it
writes each line upper-cased (one record a line) and as a CoNLL-U-like block (one record, several lines), and
counts words, so that layouts, merges, resumption and refusals are checked by hand. The real parsers' sharded
outputs are compared with single runs in test_parsing.py.
"""
import argparse
import json

import pytest

from fairseq_syntax.parsing import shards
from fairseq_syntax.parsing.batching import token_batches
from fairseq_syntax.parsing.shards import BLOCKS, LINES, Outcome, ParseJob, Shard

# line 3 is empty, line 5 is no UTF-8: both are fallbacks, in the line numbers of the whole input
INPUT = b"a b\nc\n\nd e f\ng \xff h\ni\nj k\n"
FALLBACKS = [(3, "empty line"), (5, "unreadable line: {path}:5: not valid UTF-8 (byte 0xff at byte 3 of the line)")]


def test_shard_k_holds_every_nth_chunk_of_the_input():
    # 11 lines in chunks of 2: [1 2] [3 4] [5 6] [7 8] [9 10] [11], dealt to 3 shards in turn
    layout = [Shard(index, 3, 2) for index in range(3)]
    assert [[line for line in range(1, 12) if shard.holds(line)] for shard in layout] == [
        [1, 2, 7, 8], [3, 4, 9, 10], [5, 6, 11]]
    assert [shard.lines(11) for shard in layout] == [4, 4, 3]
    assert Shard(5, 6, 2).lines(11) == 1 and Shard(6, 7, 2).lines(11) == 0  # chunk 5 is line 11; no chunk 6
    assert layout[1].path("out/train.tree") == "out/train.tree.shard1-of-3"
    assert layout[2].path("train.arcs.jsonl.gz") == "train.arcs.jsonl.shard2-of-3.gz"


def test_token_batches_bound_the_padded_size_shortest_first():
    # lengths by index: 3 1 2 5 1; sorted 1 1 2 3 5; padded sizes 2x1, 1x2, 1x3, 1x5 (5 > 4 alone)
    assert token_batches([3, 1, 2, 5, 1], 4) == [[1, 4], [2], [0], [3]]
    assert token_batches([2, 2, 2], 6) == [[0, 1, 2]]
    assert token_batches([], 10) == []


def stand_in_job(path, tmp_path, settings=None) -> ParseJob:
    def load(device):
        def parse(lines, outputs, progress):
            fallbacks, words = [], 0
            for line in lines:
                outputs[0].write(" ".join(line.tokens).upper() + "\n")
                outputs[1].write(f"# line {line.number}\n" + "".join(f"{token}\n" for token in line.tokens) + "\n")
                if line.problem or not line.tokens:
                    fallbacks.append((line.number, line.problem or "empty line"))
                words += len(line.tokens)
                progress(1)
            return Outcome(fallbacks, {"words": words})

        return parse

    return ParseJob(str(path), None, [(str(tmp_path / "out.txt"), LINES), (str(tmp_path / "out.blocks.gz"), BLOCKS)],
                    2, settings or {"model": "upper"}, load)


def options(**given):
    defaults = {"num_shards": None, "shard_id": None, "merge": False, "workers": 1, "device": "cpu",
                "progress_file": None, "batch_size": 2}
    return argparse.Namespace(**{**defaults, **given})


def outputs(tmp_path):
    from fairseq_syntax.parsing.text import open_text

    with open_text(str(tmp_path / "out.blocks.gz")) as blocks:
        return (tmp_path / "out.txt").read_text(), blocks.read()


def leftovers(tmp_path):
    return sorted(path.name for path in tmp_path.iterdir() if ".shard" in path.name)


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "input.txt"
    path.write_bytes(INPUT)
    return path


def expected_fallbacks(path):
    return [(line, reason.format(path=path)) for line, reason in FALLBACKS]


def test_a_single_run_writes_every_line_once_and_lists_the_fallbacks(corpus, tmp_path):
    result = shards.run(stand_in_job(corpus, tmp_path), options(), [])
    lines, blocks = outputs(tmp_path)
    assert lines == "A B\nC\n\nD E F\n\nI\nJ K\n"
    assert blocks.startswith("# line 1\na\nb\n\n# line 2\nc\n\n# line 3\n\n# line 4\nd\n")
    assert result.whole and result.report.sentences == 7 and result.stats == {"words": 9}
    assert result.report.fallbacks == expected_fallbacks(corpus)


@pytest.mark.parametrize("count", [1, 2, 3])
def test_shards_merge_into_the_single_run_byte_for_byte(corpus, tmp_path, count):
    single = tmp_path / "single"
    single.mkdir()
    reference = shards.run(stand_in_job(corpus, single), options(), [])
    job = stand_in_job(corpus, tmp_path)
    for index in range(count):
        part = shards.run(job, options(num_shards=count, shard_id=index), [])
        assert not part.whole and not (tmp_path / "out.txt").exists()
    merged = shards.run(job, options(num_shards=count, merge=True), [])
    assert outputs(tmp_path) == outputs(single)
    assert merged.report.fallbacks == reference.report.fallbacks and merged.stats == reference.stats
    assert leftovers(tmp_path) == []


def test_merge_writes_nothing_until_every_shard_is_there_and_whole(corpus, tmp_path):
    job = stand_in_job(corpus, tmp_path)
    shards.run(job, options(num_shards=3, shard_id=1), [])
    with pytest.raises(SystemExit, match=r"shard 0 is missing; shard 2 is missing \(parse them with --num-shards 3"):
        shards.run(job, options(num_shards=3, merge=True), [])
    for index in (0, 2):
        shards.run(job, options(num_shards=3, shard_id=index), [])
    first = tmp_path / "out.txt.shard0-of-3"
    kept = first.read_text()
    first.write_text(kept.split("\n", 1)[1])  # one record short: a file that is not the shard's whole output
    with pytest.raises(SystemExit, match=r"out.txt.shard0-of-3 ends before its 3 records"):
        shards.run(job, options(num_shards=3, merge=True), [])
    assert not (tmp_path / "out.txt").exists()
    first.write_text(kept + "EXTRA\n")
    with pytest.raises(SystemExit, match=r"out.txt.shard0-of-3 holds more than its 3 records"):
        shards.run(job, options(num_shards=3, merge=True), [])
    first.write_text(kept)
    shards.run(job, options(num_shards=3, merge=True), [])
    assert outputs(tmp_path)[0] == "A B\nC\n\nD E F\n\nI\nJ K\n"


def test_shards_of_another_input_or_settings_are_not_merged(corpus, tmp_path):
    job = stand_in_job(corpus, tmp_path)
    for index in range(2):
        shards.run(job, options(num_shards=2, shard_id=index), [])
    other = stand_in_job(corpus, tmp_path, settings={"model": "lower"})
    with pytest.raises(SystemExit, match="shard 0 was made with another model; shard 1 was made with another model"):
        shards.run(other, options(num_shards=2, merge=True), [])
    corpus.write_bytes(INPUT + b"l\n")
    with pytest.raises(SystemExit, match="shard 0 was made with another input_lines, input_sha256"):
        shards.run(job, options(num_shards=2, merge=True), [])


def test_a_run_started_again_parses_only_the_shards_not_finished(corpus, tmp_path, capsys):
    job = stand_in_job(corpus, tmp_path)
    shards.run(job, options(num_shards=3, shard_id=0), [])
    manifest = tmp_path / "out.txt.shard1-of-3.json"
    shards.run(job, options(num_shards=3, shard_id=1), [])
    recorded = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**recorded, "settings": {**recorded["settings"], "model": "old"}}))
    (tmp_path / "out.txt.shard2-of-3.partial").write_text("A B\n")  # a write cut short: no manifest
    loads = []
    counted = stand_in_job(corpus, tmp_path)
    counted.load = lambda device: loads.append(device) or job.load(device)
    result = shards.run(counted, options(num_shards=3, workers=1), [])
    err = capsys.readouterr().err
    assert "shard 1 was made with another model: parsing it again" in err
    assert "1 of 3 shards already parsed; parsing 2 with 1 worker(s) on cpu" in err
    assert loads == ["cpu"]  # one model for both shards of this process
    assert outputs(tmp_path)[0] == "A B\nC\n\nD E F\n\nI\nJ K\n"
    assert result.report.fallbacks == expected_fallbacks(corpus) and result.stats == {"words": 9}
    assert leftovers(tmp_path) == []  # the .partial of the cut-short write was written again and renamed


def test_an_empty_shard_needs_no_parser(corpus, tmp_path):
    job = stand_in_job(corpus, tmp_path)
    job.load = lambda device: pytest.fail("no model is loaded for a shard without lines")
    shards.run(job, options(num_shards=5, shard_id=4), [])  # 7 lines in chunks of 2: chunk 4 does not exist
    assert (tmp_path / "out.txt.shard4-of-5").read_text() == ""
    assert json.loads((tmp_path / "out.txt.shard4-of-5.json").read_text())["lines"] == 0


def test_device_cuda_without_a_gpu_is_one_error_line():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here")
    with pytest.raises(SystemExit, match=r"^error: --device cuda: torch sees no CUDA device here"):
        shards.select_device("cuda")


def test_running_workers_hold_slots_and_each_slot_its_gpu(corpus, tmp_path, monkeypatch):
    """A worker that starts takes the lowest slot no running worker holds, and the slot names its GPU: shard 2 starts
    when shard 1 ends, while shard 0 still runs, so it gets shard 1's GPU, not shard 0's (2 mod 2)."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "7,9")
    monkeypatch.setattr(shards, "POLL_SECONDS", 0)
    polls_left = {0: 3, 1: 1, 2: 1, 3: 1}  # polls until each shard's worker has finished
    gpus = {}

    class FakeWorker:
        def __init__(self, argv, stdout, stderr, env):
            self.shard = int(argv[argv.index("--shard-id") + 1])
            gpus[self.shard] = env["CUDA_VISIBLE_DEVICES"]
            self.returncode = None

        def poll(self):
            polls_left[self.shard] -= 1
            if polls_left[self.shard] == 0:
                self.returncode = 0
            return self.returncode

    class Bar:
        count = 0

        def update(self, count):
            Bar.count += count

    monkeypatch.setattr(shards.subprocess, "Popen", FakeWorker)
    job = stand_in_job(corpus, tmp_path)
    source = shards.scan_input(str(corpus))
    todo = [Shard(index, 4, 2) for index in range(4)]
    shards._run_workers(job, source, todo, 2, "cuda", ["parse"], Bar())
    assert gpus == {0: "7", 1: "9", 2: "9", 3: "9"}
    assert Bar.count == 7  # every line of the 4 shards (2 + 2 + 2 + 1) counted once on the bar
