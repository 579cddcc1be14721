"""Issue 60, item 7: a recipe whose first Python command fails says so. examples/demo/run.sh reads
its systems with ``$(python3 -m fairseq_syntax.methods systems ... 2> /dev/null)``
under ``set -e``: a package that did not import ended the main job with status 1 and no word. Now its error is shown
and one line names the command, before anything is made. ``python3`` is a stand-in here (first on PATH) that fails
as a broken install does, so nothing of the recipes' real work can start."""
import os
import subprocess

from conftest import REPO

IMPORT_ERROR = "ModuleNotFoundError: No module named 'fairseq'"
SYSTEMS_FAILED = ("error: python3 -m fairseq_syntax.methods systems failed (its error is above): install the package "
                  "and its dependencies (README's set-up line)")


def broken_python(tmp_path):
    """A folder holding ``python3``, which fails as an install without fairseq does for the package's modules and
    refuses anything else (so a recipe that went on would stop at once)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "python3").write_text(f"""#!/usr/bin/env bash
if [ "$1" = -m ] && [[ "$2" == fairseq_syntax* ]]; then echo "{IMPORT_ERROR}" >&2; exit 1; fi
echo "unexpected python3 $*" >&2; exit 97
""")
    (folder / "python3").chmod(0o755)
    return folder


def recipe(script, tmp_path, path, **variables):
    environment = {name: value for name, value in os.environ.items() if name != "SYSTEMS"}
    environment.update(PATH=f"{path}{os.pathsep}{os.environ['PATH']}", **variables)
    return subprocess.run(["bash", script, str(tmp_path / "work")], cwd=REPO, env=environment, capture_output=True,
                          text=True, timeout=120)


def test_the_demo_says_which_command_failed(tmp_path):
    done = recipe("examples/demo/run.sh", tmp_path, broken_python(tmp_path))
    assert done.returncode == 1
    assert done.stderr.splitlines() == [IMPORT_ERROR, SYSTEMS_FAILED]
    assert done.stdout == "" and not (tmp_path / "work").exists()


def test_the_demo_stops_on_an_unknown_system_before_making_data(tmp_path):
    # the real interpreter: data-dirs refused the name, unseen, and the data was made for no system
    done = recipe("examples/demo/run.sh", tmp_path, tmp_path / "none", SYSTEMS="bogus:transformer:sequence")
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "error: unknown system 'bogus:transformer:sequence'; see python -m fairseq_syntax.methods systems --controls",
        'error: python3 -m fairseq_syntax.methods data-dirs failed (its error is above): '
        'SYSTEMS="bogus:transformer:sequence"']
    assert not (tmp_path / "work").exists()
