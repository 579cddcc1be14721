"""The plugin's folder, for fairseq's ``--user-dir`` from any working folder:

    fairseq-train DATA --user-dir "$(python -m fairseq_syntax.user_dir)" --task syntax_translation ...

fairseq imports a user dir by its path before any plugin code runs (``fairseq.utils.import_user_module``): a
relative ``--user-dir fairseq_syntax`` resolves against the working folder (the repository's root), then beside
fairseq's own package (``site-packages/fairseq_syntax``, where a non-editable ``pip install .`` puts it), and
anywhere else ends in fairseq's ``FileNotFoundError``. This prints the installed package's folder, found the way
Python imports it (an editable install's included), so the command works from any folder.
"""
import os

import fairseq_syntax


def user_dir() -> str:
    """The absolute path of the installed ``fairseq_syntax`` package, what ``--user-dir`` takes."""
    return os.path.dirname(os.path.abspath(fairseq_syntax.__file__))


if __name__ == "__main__":
    print(user_dir())
