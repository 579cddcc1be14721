"""Runs a function (or imports a module) with torch and fairseq forbidden, for the tests of the commands that only read
files (``fairseq-syntax-study init``, ``plan``, ``status``, ``report``)::

    python tests/study/forbid_torch.py fairseq_syntax.cli.study:main plan STUDY.toml
    python tests/study/forbid_torch.py fairseq_syntax.methods          (a module: only imported)

A finder first on ``sys.meta_path`` refuses every import of ``torch``, ``fairseq`` and ``fairseq_cli`` (an
ImportError) and notes who asked. The process exits with the function's status, or with 3 and each refused import
with the lines that asked for it on stderr where there was one, even where the importer caught the ImportError
(an optional import would have loaded torch all the same). The tests start it with :func:`forbidding_torch`.
"""
import importlib
import importlib.abc
import subprocess
import sys
import traceback

FORBIDDEN = ("torch", "fairseq", "fairseq_cli")
FORBIDDEN_STATUS = 3


class Forbid(importlib.abc.MetaPathFinder):
    def __init__(self):
        self.refused: list[str] = []

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in FORBIDDEN:
            frames = [frame for frame in traceback.extract_stack()[:-1] if not frame.filename.startswith("<frozen")]
            asked = "".join(traceback.format_list(frames[-4:]))
            self.refused.append(f"import of {name} refused; asked by:\n{asked}")
            raise ImportError(f"{name} is forbidden here (tests/study/forbid_torch.py)")
        return None


def run(target: str, argv: list[str]) -> int:
    """Imports ``target`` (``MODULE`` or ``MODULE:FUNCTION``, FUNCTION then called with ``argv``) under the finder;
    its status, or FORBIDDEN_STATUS where a forbidden import was asked for."""
    loaded = [name for name in FORBIDDEN if name in sys.modules]
    if loaded:
        print(f"forbid_torch: {loaded} already imported at start", file=sys.stderr)
        return FORBIDDEN_STATUS
    finder = Forbid()
    sys.meta_path.insert(0, finder)
    try:
        module, _, function = target.partition(":")
        imported = importlib.import_module(module)
        status = getattr(imported, function)(argv) if function else 0
    except Exception:
        if not finder.refused:
            raise
        traceback.print_exc()
    sys.stdout.flush()
    for refused in finder.refused:
        print(f"forbid_torch: {refused}", file=sys.stderr)
    return FORBIDDEN_STATUS if finder.refused else status

def forbidding_torch(target: str, *args: str, cwd) -> subprocess.CompletedProcess:
    """``target`` with ``args`` in a new process of this script, run in ``cwd``; its output captured."""
    return subprocess.run([sys.executable, __file__, target, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600)


def study_forbidding_torch(*args: str, cwd) -> subprocess.CompletedProcess:
    """``fairseq-syntax-study ARGS`` (its ``main``) with torch and fairseq forbidden."""
    return forbidding_torch("fairseq_syntax.cli.study:main", *args, cwd=cwd)


if __name__ == "__main__":
    sys.exit(run(sys.argv[1], sys.argv[2:]))
