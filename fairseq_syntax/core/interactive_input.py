"""The lines ``fairseq-interactive`` reads (stdin or ``--input FILE``), read as preprocessing reads files.

fairseq's reader (``fairseq_cli.interactive.buffered_read``) decodes with Python's text layer: with ``--input FILE``
a byte that is not UTF-8 ends the run with a ``UnicodeDecodeError`` after nothing was printed, on stdin (under a C
locale) it becomes a stray character that turns the word into ``<unk>``, and a lone ``\\r`` inside a line starts a new
line, which shifts the id of every later line. :func:`buffered_read` reads bytes instead, as every other input of
the plugin is read (:mod:`fairseq_syntax.core.text_lines`: lines end at ``\\n`` or ``\\r\\n``, a byte order mark at
the start is removed, a line's problem is named with its number): a line that cannot be read becomes an
:class:`UnreadableLine`, which the task reports as ``<input>:N: problem`` and answers with an empty hypothesis, and
the lines after it keep their ids.

:func:`use_in_fairseq_interactive` puts it in place of fairseq's reader; ``syntax_translation`` does so when it is
set up, so only tasks that know :class:`UnreadableLine` get it.
"""
import contextlib
import os
import sys
from collections.abc import Iterator

from fairseq_syntax.core.text_lines import TextLineError, decoded_or_errors, line_bytes

INPUT_NAME = "<input>"  # how messages name the lines of fairseq-interactive, wherever they come from


class UnreadableLine(str):
    """A line that could not be read (empty text); ``message`` is ``<input>:N: problem``."""

    message: str

    def __new__(cls, message: str):
        line = super().__new__(cls, "")
        line.message = message
        return line


def read_lines(stream) -> Iterator[str]:
    """Each line of the binary ``stream``: its text without the line ending and surrounding blanks (as fairseq
    strips them), or an :class:`UnreadableLine`."""
    for line in decoded_or_errors(line_bytes(stream), INPUT_NAME):
        yield UnreadableLine(str(line)) if isinstance(line, TextLineError) else line.strip()


def buffered_read(input: str, buffer_size: int) -> Iterator[list[str]]:
    """What fairseq's ``buffered_read`` yields (lists of up to ``buffer_size`` lines of ``input``, ``-`` for
    stdin), read by :func:`read_lines`."""
    if input != "-" and not os.path.isfile(input):
        raise SystemExit(f"error: --input {input}: no such file")
    buffer = []
    # stdin stays open, as fairseq's reader leaves it
    with contextlib.nullcontext(sys.stdin.buffer) if input == "-" else open(input, "rb") as stream:
        for line in read_lines(stream):
            buffer.append(line)
            if len(buffer) >= buffer_size:
                yield buffer
                buffer = []
    if buffer:
        yield buffer


def use_in_fairseq_interactive() -> bool:
    """Replace ``buffered_read`` of a running ``fairseq-interactive`` (the console script's module, or the main
    module of ``python -m fairseq_cli.interactive``); nothing happens in other commands. Returns whether it did,
    i.e. whether this process is fairseq-interactive."""
    replaced = False
    for name in ("fairseq_cli.interactive", "__main__"):
        module = sys.modules.get(name)
        spec = getattr(module, "__spec__", None)
        if module is not None and spec is not None and spec.name == "fairseq_cli.interactive":
            module.buffered_read = buffered_read
            replaced = True
    return replaced
