"""fairseq-syntax: source-side syntax for fairseq Transformers (``fairseq-train --user-dir fairseq_syntax``).

Layout: :mod:`fairseq_syntax.core` holds what every method shares (trees, structure tensors, the attention base,
the encoder and model bases, side inputs, the data directory format, the tasks); each paper is one folder under
:mod:`fairseq_syntax.methods` with its model, attention (the equations), structure, side input, preprocessing and
analysis, described by one :class:`~fairseq_syntax.core.method.Method`. :mod:`fairseq_syntax.parsing` trains and
runs the parsers; :mod:`fairseq_syntax.evaluation` scores translations and writes the results tables.

Importing the package registers every task, model and criterion with fairseq (methods first: their side inputs
and interactive options are part of the translation task's configuration) and the constituency parsers with the
translation task's raw-text path (:mod:`fairseq_syntax.core.source_parsers`), and lets fairseq's own command-line
tools load fairseq checkpoints under torch >= 2.6, and save them so that a run killed while saving leaves every
checkpoint whole (:mod:`fairseq_syntax.core.checkpoints`), resume ``--patience`` where it stood
(:mod:`fairseq_syntax.core.early_stopping`), list the task's options under ``--help``
(:mod:`fairseq_syntax.core.command_help`), and train with ``--bf16`` on a GPU without fairseq's TPU path
(:mod:`fairseq_syntax.core.mixed_precision`).

Papers (the docstrings cite them by author and year):

* Vaswani et al. 2017. Attention Is All You Need. NeurIPS.
* McDonald & Chiang 2021. Syntax-Based Attention Masking for Neural Machine Translation. NAACL SRW.
* Pu & Sima'an 2022. Passing Parser Uncertainty to the Transformer: Labeled Dependency Distributions for Neural
  Machine Translation. EAMT.
* Wang, Lee & Chen 2019. Tree Transformer: Integrating Tree Structures into Self-Attention. EMNLP.
* Nguyen, Joty, Hoi & Socher 2020. Tree-Structured Attention with Hierarchical Accumulation. ICLR.
* Shen et al. 2018a (PRPN), 2018b (ON-LSTM); Kim et al. 2019b (URNNG): the unsupervised-parsing F1 conventions the
  Tree Transformer evaluation follows (cited as Wang, Lee & Chen 2019 cite them).

Cited in passing: Papineni et al. 2002 (BLEU), Isozaki et al. 2010 (RIBES), Koehn 2004 (paired bootstrap),
Dozat & Manning 2017 (biaffine dependency parser), Kitaev & Klein 2018 (benepar), Devlin et al. 2019 (BERT
masking), Tai et al. 2015 (SST node labels).
"""
from fairseq_syntax.core import checkpoints, command_help, early_stopping, mixed_precision

checkpoints.allow_fairseq_checkpoints()
checkpoints.make_checkpoints_crash_safe()
early_stopping.make_patience_resumable()
command_help.list_task_options_in_help()
mixed_precision.decouple_bf16_from_tpu()

from fairseq_syntax import parsing  # noqa: E402,F401  (registers the constituency parsers of fairseq-interactive)
from fairseq_syntax import methods  # noqa: E402,F401  (registers the models and side inputs)
from fairseq_syntax.core import tasks  # noqa: E402,F401  (registers the tasks and the criterion)
