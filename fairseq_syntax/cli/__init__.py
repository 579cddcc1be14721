"""Command-line entry points of fairseq-syntax (console scripts declared in setup.py)."""
