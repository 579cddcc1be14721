"""The tests' tiny study settings (demo corpus in raw/, its archive in parses/; ``{epochs}``), less [[systems]]."""

TINY_MODEL = """\
[model]
encoder_layers = 1
decoder_layers = 1
embed_dim = 16
ffn_dim = 32
heads = 2
"""

SETTINGS = """\
[study]
name = "tiny"
work = "work"
runs = "runs"
report = "report"
[corpus]
raw = "raw"
text = "tokenized"
[parses]
archive = "parses"
[bpe]
merges = 50
""" + TINY_MODEL + """\
dropout = 0.0
[training]
batch_sentences = 16
lr = 5e-3
warmup_updates = 10
patience = 1
max_epoch = {epochs}
[decoding]
beam = 2
batch_size = 16
[seeds]
count = 2
[test]
bootstrap_rounds = 200
run_bootstrap_rounds = 100
by_length = []
"""
