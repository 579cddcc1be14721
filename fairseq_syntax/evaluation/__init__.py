"""Evaluation of induced trees and masked language models (grammar-induction F1, masked-word perplexity)."""
