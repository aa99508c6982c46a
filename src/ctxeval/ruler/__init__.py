"""RULER (Hsieh et al. 2024) in one package: its tasks and seeded samples (`tasks`, `samples`,
`aggregation`, `prompt`), scoring one sample by generation and likelihood (`score`), the run as
an engine task (`run`, with `generation` saying how much is generated), and what a run's samples
report (`report`: cells, means and effective lengths; `paired`: every variant against the first
model; `ppi`: prediction-powered scores; `until`: sampling until each cell is answered). Its
Result is `results/ruler.py`; its Markdown, figure and report view are `render/ruler*.py`."""
