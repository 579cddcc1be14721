r"""The lines ``fairseq-interactive`` reads (stdin or ``--input FILE``), read as preprocessing reads files.

fairseq's ``buffered_read`` decodes with Python's text layer: a non-UTF-8 byte ends the run (``--input``) or
becomes ``<unk>`` (stdin), and a lone ``\r`` starts a new line, shifting every later id. :func:`buffered_read`
reads bytes as :mod:`fairseq_syntax.core.text_lines` does: an unreadable line becomes an :class:`UnreadableLine`,
reported as ``<input>:N: problem`` with an empty hypothesis, and later lines keep their ids.
:func:`use_in_fairseq_interactive` installs it; ``syntax_translation`` does so when set up."""
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
    """Replace ``buffered_read`` of a running ``fairseq-interactive`` (console script or
    ``python -m fairseq_cli.interactive``); returns whether this process is fairseq-interactive."""
    replaced = False
    for name in ("fairseq_cli.interactive", "__main__"):
        module = sys.modules.get(name)
        spec = getattr(module, "__spec__", None)
        if module is not None and spec is not None and spec.name == "fairseq_cli.interactive":
            module.buffered_read = buffered_read
            replaced = True
    return replaced
