"""fairseq-syntax: source-side syntax for fairseq Transformers.

Importing the package (which ``--user-dir fairseq_syntax`` does) registers the tasks, models and criterions
and makes fairseq's own command-line tools load fairseq checkpoints under torch >= 2.6 (see ``checkpoints``).
"""
from fairseq_syntax import checkpoints

checkpoints.allow_fairseq_checkpoints()

from fairseq_syntax import criterions, models, tasks  # noqa: E402,F401  (registers with fairseq)
