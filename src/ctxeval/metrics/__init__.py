"""Pure metric functions over arrays of token records (no I/O, no model)."""
