"""Pure statistics over per-window or per-item numbers (no I/O, no model)."""
