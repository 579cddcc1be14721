"""``--user-dir`` from a folder other than the repository's root (docs/usage.md)."""
import os
import shutil
import subprocess
import sys

import fairseq
from conftest import REPO

HELP = ["--help", "--task", "syntax_translation", "--arch", "transformer"]


def test_the_printed_folder_works_as_user_dir_from_another_folder(tmp_path):
    done = subprocess.run([sys.executable, "-m", "fairseq_syntax.user_dir"], cwd=tmp_path, capture_output=True,
                          text=True)
    assert done.returncode == 0 and done.stdout == os.path.join(REPO, "fairseq_syntax") + "\n"
    # the command docs/usage.md shows, with the folder it printed
    shown = subprocess.run(["bash", "-c", 'fairseq-train --help --user-dir "$(python -m fairseq_syntax.user_dir)" '
                            "--task syntax_translation --arch transformer"], cwd=tmp_path, capture_output=True,
                           text=True)
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert "--source-parser SOURCE_PARSER" in shown.stdout  # the plugin's task options: it was imported
    assert os.listdir(tmp_path) == []


def test_the_relative_name_from_another_folder_is_fairseqs_error(tmp_path):
    done = subprocess.run(["fairseq-train", "--user-dir", "fairseq_syntax", *HELP], cwd=tmp_path,
                          capture_output=True, text=True)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1] == f"FileNotFoundError: {tmp_path}/fairseq_syntax"


def test_a_package_beside_fairseq_is_found_by_its_name_from_any_folder(tmp_path):
    """What a non-editable install gives: fairseq_syntax in the folder that holds fairseq (copies here, so that
    fairseq's own ``__file__`` is in that folder)."""
    packages = tmp_path / "site-packages"
    fairseq_folder = os.path.dirname(fairseq.__file__)
    import fairseq_cli

    for source in (fairseq_folder, os.path.dirname(fairseq_cli.__file__), os.path.join(REPO, "fairseq_syntax")):
        shutil.copytree(source, packages / os.path.basename(source),
                        ignore=shutil.ignore_patterns("__pycache__"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = subprocess.run([sys.executable, "-m", "fairseq_cli.train", "--user-dir", "fairseq_syntax", *HELP],
                          cwd=elsewhere, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(packages)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "--source-parser SOURCE_PARSER" in done.stdout
