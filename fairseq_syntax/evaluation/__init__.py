"""Scoring of translations (BLEU, chrF, TER, RIBES, paired bootstrap) and the results library every recipe's
``RESULTS.md`` / ``RESULTS.json`` is generated with."""
