"""fairseq-syntax: source-side syntax for fairseq Transformers (``fairseq-train --user-dir fairseq_syntax``).

The package's layout and its import layers: docs/adding-a-method.md ("Layout").

The plugin (:mod:`fairseq_syntax.plugin`: every task, model, criterion and side input registered with fairseq, and
fairseq's fixes) loads when fairseq imports the package (``--user-dir fairseq_syntax``, or any import of the package
in a process that has imported fairseq) or when :func:`register` is called; importing the package alone loads
neither torch nor fairseq, so the commands that only read files (``fairseq-syntax-study init``, ``plan``,
``status``, ``report``; the method descriptions of :mod:`fairseq_syntax.methods`) start without them.

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
import sys


def register() -> None:
    """Loads the plugin (:mod:`fairseq_syntax.plugin`) in this process, once: for code that imported the package
    before fairseq (fairseq's ``--user-dir`` then finds it imported and loads nothing) and needs the registered
    tasks and models, e.g. to load a checkpoint."""
    from fairseq_syntax import plugin  # noqa: F401  (importing it registers everything)


if "fairseq" in sys.modules:  # imported by fairseq (--user-dir) or after it: fairseq's tools need the plugin
    register()
