"""Which cheap likelihood measure tracks task accuracy across models: measures read from finished runs, and their rank correlations."""
