"""The fairseq-train flags of the Multi30k recipe (3+3 layers, d=256: the project's reference Transformer) that the
benchmark and the bf16 parity check train with: model size, regularisation, criterion and optimizer. Batches are
chosen by the callers."""

MODEL_SIZE = [
    "--encoder-layers", "3", "--decoder-layers", "3", "--encoder-embed-dim", "256", "--decoder-embed-dim", "256",
    "--encoder-ffn-embed-dim", "1024", "--decoder-ffn-embed-dim", "1024", "--encoder-attention-heads", "4",
    "--decoder-attention-heads", "4", "--share-all-embeddings",
]
#: the papers' size (McDonald & Chiang and Nguyen et al. on IWSLT/WMT: Transformer base)
LARGE_MODEL_SIZE = [
    "--encoder-layers", "6", "--decoder-layers", "6", "--encoder-embed-dim", "512", "--decoder-embed-dim", "512",
    "--encoder-ffn-embed-dim", "2048", "--decoder-ffn-embed-dim", "2048", "--encoder-attention-heads", "8",
    "--decoder-attention-heads", "8", "--share-all-embeddings",
]
MODEL_SIZES = {"recipe": MODEL_SIZE, "large": LARGE_MODEL_SIZE}
REGULARISATION = ["--dropout", "0.3", "--weight-decay", "0.0001"]
TRAINING = [
    "--task", "syntax_translation", "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1",
    "--optimizer", "adam", "--adam-betas", "(0.9, 0.98)", "--lr", "1e-3", "--lr-scheduler", "inverse_sqrt",
    "--warmup-updates", "1000", "--clip-norm", "1.0", "--cpu", "--seed", "1",
]
