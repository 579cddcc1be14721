"""The results tables of the recipes, in Markdown (RESULTS.md) and JSON (RESULTS.json) from the same rows.

Every generated ``RESULTS.md`` / ``RESULTS.json`` is written by ``write_results``, from ``markdown_table`` /
``table_json`` or a ``Table`` of ``Cell``s. It imports no other module of the evaluation."""
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from fairseq_syntax.core.files import write_atomically


def markdown_cell(text) -> str:
    """Markdown table cells cannot hold a raw '|' or a line break."""
    return str(text).replace("\n", " ").replace("|", "\\|")


def _row(cells, header: Sequence) -> list:
    """``cells`` as a list, one a column of ``header`` (else a ValueError)."""
    cells = list(cells)
    if len(cells) != len(header):
        raise ValueError(f"a row of {len(cells)} cells in a table of {len(header)} columns: {cells!r}")
    return cells


def markdown_table(header: Sequence, rows: Iterable[Sequence], align: str | None = None) -> list[str]:
    """The lines of a Markdown table: ``header``, then one line per row (``str()`` of each cell, '|' and line breaks
    escaped). ``align``: one letter per column, "l" (default) or "r"."""
    align = align or "l" * len(header)
    if len(align) != len(header) or set(align) - {"l", "r"}:
        raise ValueError(f"align needs one of 'l' or 'r' per column ({len(header)}), got {align!r}")
    lines = ["| " + " | ".join(markdown_cell(cell) for cell in header) + " |",
             "|" + "".join("---:|" if letter == "r" else "---|" for letter in align)]
    return lines + ["| " + " | ".join(markdown_cell(cell) for cell in _row(row, header)) + " |" for row in rows]


def table_json(header: Sequence[str], rows: Iterable[Sequence], lists: bool = False) -> dict[str, Any]:
    """``{"columns": header, "rows": [{column: value}, ...]}``, one object per row, values unrounded (None for an
    empty cell); ``lists``: each row the list of its values, in the columns' order (the column names once)."""
    header = list(header)
    rows = [_row(row, header) for row in rows]
    return {"columns": header, "rows": [row if lists else dict(zip(header, row)) for row in rows]}


def table_rows(table: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows of a :func:`table_json` object written with ``lists``, each as ``{column: value}``."""
    return [dict(zip(table["columns"], row)) for row in table["rows"]]


class Cell(NamedTuple):
    """One cell of a ``Table``: its value for RESULTS.json (unrounded; None for none) and its text for RESULTS.md."""
    value: Any
    text: str


def number_cell(value, spec: str) -> Cell:
    """``value`` formatted by ``spec`` (``format``); "–" for None."""
    return Cell(value, "–" if value is None else format(value, spec))


class Table:
    """A results table built row by row, rendered to Markdown (``lines``) and JSON (``json``): a cell is a
    ``Cell(value, text)`` or a plain value that is its own text."""

    def __init__(self, header: Sequence[str], align: str | None = None):
        self.header, self.align, self.rows = list(header), align, []

    def add(self, *cells) -> None:
        self.rows.append([cell if isinstance(cell, Cell) else Cell(cell, str(cell))
                          for cell in _row(cells, self.header)])

    def lines(self) -> list[str]:
        return markdown_table(self.header, ([cell.text for cell in row] for row in self.rows), self.align)

    def json(self, lists: bool = False) -> dict[str, Any]:
        """:func:`table_json` of the cells' values."""
        return table_json(self.header, ([cell.value for cell in row] for row in self.rows), lists)


def _key_text(key) -> str:
    return json.dumps(key if isinstance(key, str) else json.dumps(key), ensure_ascii=False)


def _flat(value) -> bool:
    return not isinstance(value, (dict, list, tuple)) or (
        not isinstance(value, dict) and not any(isinstance(item, (dict, list, tuple)) for item in value))


def _flat_row(value) -> bool:
    """A list of plain values and flat lists, at least one plain (a table row whose cells may be lists)."""
    return all(map(_flat, value)) and not all(isinstance(item, (dict, list, tuple)) for item in value)


def _json_lines(value, depth: int, flat_objects: bool = False, compact: bool = False) -> str:
    """``compact``: no space after a ',' or ':' (a line's own separators and an indented member's ':')."""
    pad, end = " " * (depth + 1), " " * depth
    if isinstance(value, dict) and value and not (flat_objects and all(map(_flat, value.values()))):
        colon = ":" if compact else ": "
        items = (f"{pad}{_key_text(key)}{colon}{_json_lines(item, depth + 1, flat_objects, compact)}"
                 for key, item in value.items())
        return "{\n" + ",\n".join(items) + "\n" + end + "}"
    if isinstance(value, (list, tuple)) and not (_flat(value) or flat_objects and _flat_row(value)):
        return "[\n" + ",\n".join(pad + _json_lines(item, depth + 1, flat_objects, compact) for item in value) + (
            "\n" + end + "]")
    return json.dumps(value, ensure_ascii=False, separators=(",", ":") if compact else None)


def _significant(value, digits: int):
    """``value`` with each float to ``digits`` significant digits (keys and other values as they are)."""
    if isinstance(value, float):
        return float(f"{value:.{digits}g}")
    if isinstance(value, dict):
        return {key: _significant(item, digits) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_significant(item, digits) for item in value]
    return value


def json_text(data) -> str:
    """``data`` as the repository's JSON files hold it: indented by one space, a list of numbers or strings on one
    line, UTF-8, keys in order, a final newline; ``json.loads`` gives ``data`` back."""
    return _json_lines(data, 0) + "\n"


def results_text(data) -> str:
    """``data`` as RESULTS.json holds it: :func:`json_text`'s layout with an object of plain values, or a list of plain
    values and flat lists, on one line, no space after a ',' or ':' (``{"mean":21.21,"sd":0.32}``, ``"key":value``
    for an indented member too), and each float to 6 significant digits (the tables show at most 4; the records
    keep 8)."""
    return _json_lines(_significant(data, 6), 0, flat_objects=True, compact=True) + "\n"


def write_results(markdown_path, markdown: str, data: dict[str, Any]) -> tuple[Path, Path]:
    """Write ``markdown`` to ``markdown_path`` (RESULTS.md) and ``data`` to RESULTS.json beside it
    (:func:`results_text`). Returns both paths."""
    markdown_path = Path(markdown_path)
    json_path = markdown_path.with_suffix(".json")
    markdown_path.parent.mkdir(parents=True, exist_ok=True)
    # each whole or not at all: the other lane may read them meanwhile (its commit, its figure)
    write_atomically(markdown_path, markdown if markdown.endswith("\n") else markdown + "\n")
    write_atomically(json_path, results_text(data))
    return markdown_path, json_path


def load_results_json(path, datasets: bool = True) -> dict[str, Any]:
    """RESULTS.json as ``write_results`` wrote it (``datasets``: fairseq-syntax-results', else any JSON object); a
    file that is not valid JSON, or not such a file, is a ValueError naming it (and the line, for JSON that does not
    parse)."""
    with open(path, encoding="utf-8") as handle:
        try:
            results = json.load(handle)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}:{error.lineno}: not valid JSON ({error.msg})") from error
    if not isinstance(results, dict) or datasets and not isinstance(results.get("datasets"), dict):
        raise ValueError(f"{path}: not a RESULTS.json " + (
            "of fairseq-syntax-results (no 'datasets' object)" if datasets else "(no JSON object)"))
    return results


def replace_marked_block(text: str, block: Sequence[str], begin: str, end: str, what: str, path: str) -> str:
    """``text`` with the lines from a line starting ``begin`` to the next line ``end`` replaced by ``block`` (whose
    first line is such a line): the block that names what ``block`` names after ``begin``, else the only one. None,
    or several and none of that name, is a ValueError naming ``path`` and ``what`` the block is."""
    def named(line: str) -> str:
        return line[len(begin):].removesuffix("-->").strip()

    lines = text.split("\n")
    begins = [i for i, line in enumerate(lines) if line.startswith(begin)]
    same = [i for i in begins if named(lines[i]) == named(block[0])]
    start = same[0] if same else begins[0] if len(begins) == 1 else None
    if len(begins) > 1 and start is None:
        raise ValueError(f"{path}: {len(begins)} {what}s, none of {named(block[0])} (lines "
                         f"{', '.join(str(i + 1) for i in begins)})")
    stop = next((i for i in range(start, len(lines)) if lines[i] == end), None) if start is not None else None
    if start is None or stop is None:
        raise ValueError(f"{path}: no {what} to replace (a line starting {begin!r}, then a line {end!r})")
    return "\n".join(lines[:start] + list(block) + lines[stop + 1:])
