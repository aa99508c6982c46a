"""The one place that renders results: each kind's Markdown (a module per kind, called by the
task that builds the Result, which holds the text as data), every figure (`figures.py`, drawn
from the Result alone when the engine writes it) and the HTML pages (`diff_page.py`,
`agreement_page.py`, and the parts every page shares: `page.py`, the SVG `charts.py`, the
templates, CSS and JS in `templates/`). It reads results, stats and metrics only; the
`ctxeval report` explorer (explorer/) reads run folders and draws its page with these parts."""
