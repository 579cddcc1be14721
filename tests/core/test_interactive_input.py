"""The lines fairseq-interactive reads: split at ``\n`` only; an unreadable line is one report, ids kept."""
import io

import pytest

from fairseq_syntax.core.interactive_input import (
    UnreadableLine,
    buffered_read,
    read_lines,
)

# line 1 starts with a BOM; 2 holds a Latin-1 byte; 3 a lone \r; 4 ends with \r\n
RAW = (b"\xef\xbb\xbfthe cat sees the dog .\nthe caf\xe9 .\nthe dog\r likes the man .\n  the man sees the cat .\r\n"
       b"\n")


def test_unreadable_lines_are_reported_in_place_and_the_rest_read():
    lines = list(read_lines(io.BytesIO(RAW)))
    assert lines == ["the cat sees the dog .", "", "", "the man sees the cat .", ""]
    assert [type(line) is UnreadableLine for line in lines] == [False, True, True, False, False]
    assert lines[1].message == "<input>:2: not valid UTF-8 (byte 0xe9 at byte 8 of the line)"
    assert lines[2].message == ("<input>:3: a carriage return inside the line (byte 8); lines end with \\n "
                                "(or \\r\\n)")


@pytest.mark.parametrize("buffer_size", [1, 2, 10])
def test_buffers_of_a_file_hold_every_line_in_order(tmp_path, buffer_size):
    path = tmp_path / "input.txt"
    path.write_bytes(RAW)
    buffers = list(buffered_read(str(path), buffer_size))
    assert [len(buffer) for buffer in buffers] == {1: [1] * 5, 2: [2, 2, 1], 10: [5]}[buffer_size]
    assert [line for buffer in buffers for line in buffer] == list(read_lines(io.BytesIO(RAW)))


def test_a_missing_input_file_is_one_line(tmp_path):
    with pytest.raises(SystemExit, match=rf"^error: --input {tmp_path}/missing.txt: no such file$"):
        next(buffered_read(str(tmp_path / "missing.txt"), 1))
