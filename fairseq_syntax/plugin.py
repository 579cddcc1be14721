"""The fairseq plugin: what ``fairseq-train --user-dir fairseq_syntax`` (and fairseq's other tools) load.

Importing this module registers every task, model and criterion with fairseq (the methods' modules first,
:func:`fairseq_syntax.methods.register`: their side inputs and interactive options are part of the translation
task's configuration) and the constituency parsers with the translation task's raw-text path
(:mod:`fairseq_syntax.core.source_parsers`), and lets fairseq's own command-line tools load fairseq checkpoints
under torch >= 2.6, and save them so that a run killed while saving leaves every checkpoint whole
(:mod:`fairseq_syntax.core.checkpoints`), resume ``--patience`` where it stood
(:mod:`fairseq_syntax.core.early_stopping`), list the task's options under ``--help``
(:mod:`fairseq_syntax.core.command_help`), and train with ``--bf16`` on a GPU without fairseq's TPU path
(:mod:`fairseq_syntax.core.mixed_precision`).

The package imports it when fairseq imports the package (or the package is imported after fairseq);
:func:`fairseq_syntax.register` imports it in a process that imported the package first. Python runs it once.
"""
from fairseq_syntax.core import checkpoints, command_help, early_stopping, mixed_precision

checkpoints.allow_fairseq_checkpoints()
checkpoints.make_checkpoints_crash_safe()
early_stopping.make_patience_resumable()
command_help.list_task_options_in_help()
mixed_precision.decouple_bf16_from_tpu()

from fairseq_syntax import parsing  # noqa: E402,F401  (registers the constituency parsers of fairseq-interactive)
from fairseq_syntax import methods  # noqa: E402

methods.register()  # the models, criteria, tasks and side inputs of every method

from fairseq_syntax.core import tasks  # noqa: E402,F401  (registers the shared tasks and the criterion)
