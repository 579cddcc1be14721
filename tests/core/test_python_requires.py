"""setup.py's ``python_requires`` is a Python the package runs on."""
import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODULES = sorted((ROOT / "fairseq_syntax").rglob("*.py"))
#: standard-library modules newer than 3.8, with the Python that added them
STDLIB_ADDED = {"zoneinfo": (3, 9), "graphlib": (3, 9), "tomllib": (3, 11)}
UNION_IN_ANNOTATION = (3, 10)  # PEP 604: int | None evaluated at run time


def stated_minimum() -> tuple[int, int]:
    match = re.search(r'python_requires=">=(\d+)\.(\d+)"', (ROOT / "setup.py").read_text())
    assert match, "setup.py states no python_requires='>=X.Y'"
    return int(match.group(1)), int(match.group(2))


def needs(source: str) -> list[tuple[tuple[int, int], str]]:
    """What of a newer Python a module's code needs at run time: ``[(version, why)]``."""
    tree = ast.parse(source)
    found = []
    for node in ast.walk(tree):
        names = ([alias.name for alias in node.names] if isinstance(node, ast.Import) else
                 [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else [])
        found += [(STDLIB_ADDED[name.split(".")[0]], f"{node.lineno}: import {name}") for name in names
                  if name.split(".")[0] in STDLIB_ADDED]
    postponed = any(isinstance(node, ast.ImportFrom) and node.module == "__future__"
                    and any(alias.name == "annotations" for alias in node.names) for node in tree.body)
    if not postponed:  # annotations of functions, classes (dataclass fields) and modules are evaluated
        annotations = [node.annotation for node in ast.walk(tree) if isinstance(node, (ast.arg, ast.AnnAssign))
                       and node.annotation is not None]
        annotations += [node.returns for node in ast.walk(tree)
                        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None]
        for annotation in annotations:
            if any(isinstance(part, ast.BinOp) and isinstance(part.op, ast.BitOr) for part in ast.walk(annotation)):
                found.append((UNION_IN_ANNOTATION, f"{annotation.lineno}: the annotation "
                                                   f"{ast.unparse(annotation)} without from __future__ import "
                                                   "annotations"))
    return found


@pytest.mark.parametrize("source, expected", [
    ("def f(x: int | None): pass", [UNION_IN_ANNOTATION]),
    ("def f(x) -> 'int | None': pass", []),  # a string is not evaluated
    ("def f(x) -> dict[str, int | None]: pass", [UNION_IN_ANNOTATION]),
    ("class C:\n    size: int | None = None", [UNION_IN_ANNOTATION]),  # a dataclass field's annotation
    ("from __future__ import annotations\ndef f(x: int | None) -> str | None: pass", []),
    ("flags = 1 | 2\ndef f(x: int = 1 | 2): pass", []),  # | of values, not in an annotation
    ("import tomllib", [(3, 11)]),
    ("from tomllib import load\nimport zoneinfo", [(3, 11), (3, 9)]),
    ("from . import tomllib", []),  # a module of the package, not the standard library's
])
def test_needs_finds_what_a_newer_python_gives(source, expected):
    assert [version for version, _ in needs(source)] == expected


def test_every_module_parses_as_the_stated_minimums_grammar():
    minimum = stated_minimum()
    for path in MODULES:  # feature_version: match statements (3.10), except* (3.11), type X = ... (3.12), ...
        ast.parse(path.read_text(encoding="utf-8"), filename=str(path), feature_version=minimum)


def test_the_stated_minimum_is_what_the_code_needs():
    """No module needs a newer Python than the one stated, and the newest one a module needs (the study's tomllib)
    is the one stated."""
    minimum = stated_minimum()
    found = [(version, f"{path.relative_to(ROOT)}:{why}") for path in MODULES
             for version, why in needs(path.read_text(encoding="utf-8"))]
    newer = [f"{where} needs Python {'.'.join(map(str, version))}" for version, where in found if version > minimum]
    assert not newer, f"python_requires='>={'.'.join(map(str, minimum))}', but " + "; ".join(newer[:10])
    assert max(found)[0] == minimum
