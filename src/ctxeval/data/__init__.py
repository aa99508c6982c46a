"""Corpus and dataset loaders."""
