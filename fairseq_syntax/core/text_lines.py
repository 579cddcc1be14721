r"""The text files users give the commands (sources, targets, trees, parser output, references, decodes): UTF-8, one
item per line, every problem named ``FILE:LINE: problem``.

Lines end at ``\n`` (or ``\r\n``); a carriage return inside a line is an error at that line. Bytes that are not
UTF-8 are an error at their line and column. Tabs are allowed; any other control character (category Cc:
U+0000-U+001F, U+007F-U+009F) is an error at its line and byte. A byte order mark at the start of a file is
removed. A ``.gz`` name is read through gzip; one cut short or damaged is an error naming the file."""
import gzip
import os
import re
import zlib
from typing import Iterable, Iterator, List, Union

UTF8_BOM = b"\xef\xbb\xbf"
#: the control characters a line may not hold: category Cc but the tab (\r and \n end lines, see decode_line)
CONTROL_CHARACTER = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f]")
CONTROL_NAMES = {0x00: "NUL", 0x08: "backspace", 0x0B: "vertical tab", 0x0C: "form feed", 0x1B: "escape",
                 0x7F: "DEL"}


class TextLineError(ValueError):
    """A line that cannot be read; ``str()`` is ``FILE:LINE: problem``."""


def _raw_lines(path: str) -> Iterator[bytes]:
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such file")
    with (gzip.open(path, "rb") if str(path).endswith(".gz") else open(path, "rb")) as handle:
        try:
            yield from line_bytes(handle)
        except (EOFError, gzip.BadGzipFile, zlib.error) as error:  # a gzip file cut short or damaged
            raise TextLineError(f"{path}: not a whole gzip file ({error}); a run killed while writing it leaves it "
                                "cut short: write it again") from None


def line_bytes(stream: Iterable[bytes]) -> Iterator[bytes]:
    """Each line of a binary stream without its ending, read as it goes (a corpus is never held whole); lines end at
    ``\\n`` only (or ``\\r\\n``), and a byte order mark at the start is removed."""
    for index, raw in enumerate(stream):
        if index == 0:  # an editor's marker of the encoding, not text: kept, it joins the first word
            raw = raw.removeprefix(UTF8_BOM)
            if not raw:  # a file of the marker alone has no line
                return
        raw = raw.removesuffix(b"\n")
        yield raw.removesuffix(b"\r")


def decode_line(raw: bytes, path: str, number: int) -> str:
    """One line's bytes (without its ending) -> text; raises :class:`TextLineError` naming file, line and column."""
    if b"\r" in raw:
        position = raw.index(b"\r") + 1
        raise TextLineError(f"{path}:{number}: a carriage return inside the line (byte {position}); lines end with "
                            "\\n (or \\r\\n)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise TextLineError(f"{path}:{number}: not valid UTF-8 (byte 0x{raw[error.start]:02x} at byte "
                            f"{error.start + 1} of the line)") from None
    control = CONTROL_CHARACTER.search(text)
    if control is not None:
        code = ord(control.group())
        name = f"U+{code:04X}" + (f" ({CONTROL_NAMES[code]})" if code in CONTROL_NAMES else "")
        position = len(text[: control.start()].encode("utf-8")) + 1
        raise TextLineError(f"{path}:{number}: a control character {name} at byte {position} of the line; a line "
                            "may hold tabs but no other control character: remove it")
    return text


def iter_lines_or_errors(path: str) -> Iterator[str | TextLineError]:
    """:func:`read_lines_or_errors` line by line as the file is read, for a corpus too large to hold (the parsers'
    input); a gzip file cut short raises when the reading gets there."""
    yield from decoded_or_errors(_raw_lines(path), path)


def decoded_or_errors(raw_lines: Iterable[bytes], path: str) -> Iterator[str | TextLineError]:
    """Per line of ``raw_lines`` (:func:`line_bytes`; ``path`` names them in messages): its text, or its
    :class:`TextLineError`."""
    for number, raw in enumerate(raw_lines, 1):
        try:
            yield decode_line(raw, path, number)
        except TextLineError as error:
            yield error


def read_lines_or_errors(path: str) -> List[Union[str, TextLineError]]:
    """Every line of ``path``: its text, or the :class:`TextLineError` that says why it cannot be read (for
    ``--skip-invalid``; raised, not returned, when the whole file cannot be read: a gzip file cut short)."""
    return list(iter_lines_or_errors(path))


def read_lines(path: str) -> List[str]:
    """Every line of ``path`` (line break removed); raises :class:`TextLineError` at the first bad line (or for a
    gzip file cut short) and ``FileNotFoundError`` (``PATH: no such file``) for a missing file."""
    return [decode_line(raw, path, number) for number, raw in enumerate(_raw_lines(path), 1)]


def read_stream_lines(stream: Iterable[bytes], name: str) -> List[str]:
    """:func:`read_lines` of a binary stream (a file held in an archive), named ``name`` in messages."""
    return [decode_line(raw, name, number) for number, raw in enumerate(line_bytes(stream), 1)]
