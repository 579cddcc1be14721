"""The package's imports run one way (core <- parsing <- methods <- evaluation <- study <- cli), with no circle."""
import ast
from pathlib import Path

from conftest import REPO

PACKAGE = "fairseq_syntax"
#: the layers, lowest first: a module may import its own layer and those before it
LAYERS = ("core", "parsing", "methods", "evaluation", "study", "cli")


def module_files(root: Path, package: str = PACKAGE) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` of ``root/package`` (a package by its ``__init__.py``)."""
    files = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return files


def imported_modules(module: str, path: Path, files: dict[str, Path]) -> set[str]:
    """The modules of ``files`` that ``path`` imports; ``from P import name`` is ``P.name`` where there is one."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: level 1 is this package, each further level one up
                above = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(above + ([base] if base else []))
            found.update(f"{base}.{alias.name}" if f"{base}.{alias.name}" in files else base for alias in node.names)
    return {name for name in found if name in files and name not in (module, PACKAGE)}


def import_graph(root: Path, package: str = PACKAGE) -> dict[str, set[str]]:
    files = module_files(root, package)
    return {module: imported_modules(module, path, files) for module, path in files.items()}


def layer(module: str) -> int | None:
    """The index of the module's layer in LAYERS; None for one outside them (the package's entry point)."""
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else None


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{importer} -> {imported}" for importer, names in graph.items() for imported in names
                  if layer(importer) is not None and layer(imported) is not None and layer(imported) > layer(importer))


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The sets of more than one module that each reach one another through imports, sorted."""
    reach = {}
    for start in graph:
        seen, todo = set(), list(graph[start])
        while todo:
            node = todo.pop()
            if node not in seen:
                seen.add(node)
                todo.extend(graph[node])
        reach[start] = seen
    return sorted(map(list, {tuple(sorted(other for other in reach[module] if module in reach[other]))
                             for module in graph if module in reach[module]}))


def write_package(root: Path, sources: dict[str, str]) -> None:
    for name, source in sources.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)


def test_the_checker_finds_an_upward_import_and_a_circle(tmp_path):
    # five files breaking each rule once: an upward import, a circle of two, a circle of three; cli is downward
    write_package(tmp_path, {
        "fairseq_syntax/__init__.py": "from fairseq_syntax.cli import main\n",
        "fairseq_syntax/core/__init__.py": "",
        "fairseq_syntax/core/a.py": "def f():\n    from fairseq_syntax.parsing import p\n",
        "fairseq_syntax/parsing/__init__.py": "",
        "fairseq_syntax/parsing/p.py": "import fairseq_syntax.core.a\n",
        "fairseq_syntax/evaluation/__init__.py": "",
        "fairseq_syntax/evaluation/x.py": "from . import y\n",
        "fairseq_syntax/evaluation/y.py": "from .z import thing\n",
        "fairseq_syntax/evaluation/z.py": "from fairseq_syntax.evaluation.x import other\n",
        "fairseq_syntax/cli/__init__.py": "",
        "fairseq_syntax/cli/main.py": "import fairseq_syntax\nfrom ..evaluation import x\nimport json\n",
    })
    graph = import_graph(tmp_path)
    assert graph["fairseq_syntax.cli.main"] == {"fairseq_syntax.evaluation.x"}
    assert graph["fairseq_syntax.evaluation.y"] == {"fairseq_syntax.evaluation.z"}
    assert upward_imports(graph) == ["fairseq_syntax.core.a -> fairseq_syntax.parsing.p"]
    assert circles(graph) == [
        ["fairseq_syntax.core.a", "fairseq_syntax.parsing.p"],
        ["fairseq_syntax.evaluation.x", "fairseq_syntax.evaluation.y", "fairseq_syntax.evaluation.z"]]


def test_no_import_runs_upward():
    assert upward_imports(import_graph(Path(REPO))) == []


def test_no_circle_between_the_packages_files():
    assert circles(import_graph(Path(REPO))) == []
