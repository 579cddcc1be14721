"""The controlled study of source-side syntax on any corpus (``fairseq-syntax-study``): its file, grid, data
preparation, runs, records over seeds, executors (local, Slurm), commands and report. This layer sits above
evaluation and below the command lines."""
