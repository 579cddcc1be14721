"""Analysis of trained models: figures of what the syntax-aware attention learned."""
