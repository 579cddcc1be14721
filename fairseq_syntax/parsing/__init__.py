"""Parsers for the source side: constituency trees (benepar, SuPar CRF) and dependency arc distributions
(SuPar biaffine), their training on local treebanks, and their evaluation. See the modules' docstrings."""
