"""The naive (dense) hierarchical accumulation and its fairseq model ``transformer_hier_accum_dense``, the benchmark's
``transformer_hier_accum:dense`` variant (:mod:`hier_accum_dense.dense`, with ``bench/`` on ``sys.path``)."""
