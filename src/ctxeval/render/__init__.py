"""The one place that renders results: each kind's Markdown (a module per kind, called by the
task that builds the Result, which holds the text as data) and every figure (`figures.py`,
drawn from the Result alone when the engine writes it). It reads results, stats and metrics
only; the HTML pages are explorer/'s."""
