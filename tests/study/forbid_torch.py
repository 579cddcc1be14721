"""``python forbid_torch.py MODULE[:FUNCTION] ARGS``: runs it with torch, fairseq and fairseq_cli imports refused;
exits 3, naming who asked, where one was asked for (even if caught), else with the function's status."""
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
    """Imports MODULE, calls FUNCTION(argv) if given; FORBIDDEN_STATUS where a forbidden import was asked for."""
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

def forbidding_torch(target: str, *args: str, cwd, env=None) -> subprocess.CompletedProcess:
    """``target`` with ``args`` under this script in ``cwd``, output captured."""
    return subprocess.run([sys.executable, __file__, target, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600, env=env)


def study_forbidding_torch(*args: str, cwd, env=None) -> subprocess.CompletedProcess:
    """``fairseq-syntax-study ARGS`` (its ``main``) with torch and fairseq forbidden."""
    return forbidding_torch("fairseq_syntax.cli.study:main", *args, cwd=cwd, env=env)


if __name__ == "__main__":
    sys.exit(run(sys.argv[1], sys.argv[2:]))
