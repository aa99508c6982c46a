"""Model backends: the only code that touches a model."""
