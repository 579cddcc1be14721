"""The controlled study of source-side syntax on any corpus (``fairseq-syntax-study``): its file
(:mod:`~fairseq_syntax.study.config`), grid and identity (:mod:`~fairseq_syntax.study.grid`), data preparation
(:mod:`~fairseq_syntax.study.prepare`), one run start to end (:mod:`~fairseq_syntax.study.runner`), the records over
seeds (:mod:`~fairseq_syntax.study.over_seeds`), the executors (:mod:`~fairseq_syntax.study.local`,
:mod:`~fairseq_syntax.study.slurm`), the commands (:mod:`~fairseq_syntax.study.commands`) and the report
(:mod:`~fairseq_syntax.study.report`). This layer sits above evaluation and below the command lines."""
