"""Long-context probes: context gain, key-token perplexity (LongPPL) and line retrieval."""
