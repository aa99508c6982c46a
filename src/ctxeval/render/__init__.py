"""Rendering that reads a Result alone: the figures every result folder holds (figures.py)."""
