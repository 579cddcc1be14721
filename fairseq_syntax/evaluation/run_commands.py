"""The commands a run record holds: each as its argv list (what ran, word for word).

A record holds ``command``, ``decode_command`` and ``score_command`` as ``FIELD_argv``, program first
(:func:`stored_form`); :func:`with_argv` puts the display string (:func:`command_text`) back under ``FIELD`` on
reading, never read back.

**The old form** (the committed Multi30k studies' per-run records, checkpoints' ``train_command.txt``) holds a
command as its words joined by spaces, unquoted; :func:`old_form_words` splits it once with :func:`shlex.split` (a
word with a space comes back as two). Nothing is written back to such a record."""
from __future__ import annotations

import re
import shlex

#: the fields of a record that hold a command; each has its argv beside it under ``FIELD + ARGV``
COMMAND_FIELDS = ("command", "decode_command", "score_command")
ARGV = "_argv"
#: a word the display quotes: one with a space or a quote in it, or an empty one
_NEEDS_QUOTES = re.compile(r"""[\s'"\\]|^$""")


def command_text(argv: list[str]) -> str:
    """``argv``'s words joined by spaces, a word quoted only where it holds a space or a quote (``$SEED`` stays a
    variable)."""
    return " ".join(shlex.quote(word) if _NEEDS_QUOTES.search(word) else word for word in argv)


def command_fields(field: str, argv: list[str]) -> dict[str, object]:
    """A record's ``field`` (its display string) and ``field_argv`` (its words)."""
    return {field: command_text(argv), field + ARGV: list(argv)}


def record_argv(record: dict, field: str = "command") -> list[str] | None:
    """The words of ``record``'s command ``field`` (a record read by :func:`with_argv`), None where it has none."""
    return record.get(field + ARGV)


def old_form_words(text: str) -> list[str]:
    """The words of a command of the old form: its text split once with :func:`shlex.split`."""
    return shlex.split(text)


def with_argv(record: dict) -> dict:
    """``record`` with both forms of each command field: the argv as written (old form: :func:`old_form_words`), and
    the display string as written or :func:`command_text`."""
    upgraded = dict(record)
    for field in COMMAND_FIELDS:
        text, argv = record.get(field), record.get(field + ARGV)
        if isinstance(argv, list) and not isinstance(text, str):
            upgraded[field] = command_text(argv)
        elif isinstance(text, str) and not isinstance(argv, list):
            upgraded[field + ARGV] = old_form_words(text)
    return upgraded


def stored_form(record: dict) -> dict:
    """``record`` as a file holds it: each command field's argv, no display string."""
    return {key: value for key, value in record.items()
            if not (key in COMMAND_FIELDS and isinstance(record.get(key + ARGV), list))}


def as_old_form(argv: list[str]) -> list[str]:
    """``argv`` as a record of the old form gives it back (joined by spaces, then :func:`old_form_words`)."""
    return old_form_words(" ".join(argv))


def option_value(argv: list[str], option: str) -> str | None:
    """The value ``argv`` gives ``option`` (``--patience 5`` or ``--patience=5``; the last where given twice, as
    argparse takes it), else None."""
    found = None
    for index, word in enumerate(argv):
        if word == option and index + 1 < len(argv):
            found = argv[index + 1]
        elif word.startswith(option + "="):
            found = word[len(option) + 1:]
    return found


def with_seed_variable(argv: list[str], seed: int) -> list[str]:
    """A seed's command with that seed written as ``$SEED``: the value of ``--seed``, a run's name ``NAME.seedK``
    and a control's data directory ``DATA.CONTROL-sK`` within a word."""
    words = []
    for index, word in enumerate(argv):
        if index and argv[index - 1] == "--seed" and word == str(seed):
            word = "$SEED"
        elif word == f"--seed={seed}":
            word = "--seed=$SEED"
        word = re.sub(rf"(\.[a-z]+)-s{seed}(?![\w.-])", r"\g<1>-s$SEED", word)
        words.append(re.sub(rf"\.seed{seed}(?!\d)", ".seed$SEED", word))
    return words
