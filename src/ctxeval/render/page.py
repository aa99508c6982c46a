"""What every HTML page shares: Jinja2 with autoescaping for all markup, the static CSS and JS
(`templates/`) inlined, the data embedded as JSON that cannot end its <script> element, and
typed columns as base64 arrays the page decodes."""

from __future__ import annotations

import base64
import json
from importlib import resources

import jinja2
import numpy as np
from markupsafe import Markup

_SCRIPT_SAFE = {ord("<"): "\\u003c", ord(">"): "\\u003e", ord("&"): "\\u0026", 0x2028: "\\u2028", 0x2029: "\\u2029"}


def script_json(value: object) -> Markup:
    """JSON safe inside <script>: `<`, `>`, `&` and the JS line separators written as \\u escapes,
    so no string in the data (`</script>`, `<!--`) can close or change the element."""
    return Markup(json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).translate(_SCRIPT_SAFE))


def static(name: str) -> str:
    return resources.files("ctxeval.render").joinpath("templates", name).read_text(encoding="utf-8")


def page_js(name: str) -> Markup:
    """A page's script: the shared helpers (`common.js`), then the page's own, in one element."""
    return Markup(static("common.js") + "\n" + static(name))


def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("ctxeval.render", "templates"), autoescape=True, undefined=jinja2.StrictUndefined)
    env.filters["phrases"] = phrases
    return env


_OPEN, _CLOSE = "[(", "])"


def phrase_list(text: str) -> list[str]:
    """A table cell's text split where a line may break: at a space outside brackets that follows
    ';', ',', ':' or a closing bracket, or that precedes an opening one. "−30.0 [−60.3, +6.1] too
    few samples to tell (about 10 would settle it)" is four phrases; "≥ 1024 [128, ≥ 1024]" two."""
    out, start, depth = [], 0, 0
    for i, c in enumerate(text):
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth = max(0, depth - 1)
        elif c == " " and depth == 0 and i > start and (text[i - 1] in ";,:" + _CLOSE or text[i + 1 : i + 2] in tuple(_OPEN)):
            out.append(text[start:i])
            start = i + 1
    return [*out, text[start:]] if text[start:] or not out else out


def phrases(text: object) -> Markup:
    """A cell's text (escaped) as phrases that do not break inside (`span.phrase`, white-space:
    nowrap), with the line breaks between them: a verdict or an interval wraps whole."""
    parts = phrase_list(str(text))
    if len(parts) == 1:
        return Markup('<span class="phrase">{}</span>').format(parts[0])
    return Markup(" ").join(Markup('<span class="phrase">{}</span>').format(p) for p in parts)


def b64(array: np.ndarray, dtype: str) -> str:
    """Little-endian bytes of `array` as `dtype`, base64: what the page decodes into a typed array."""
    return base64.b64encode(np.ascontiguousarray(array, dtype=np.dtype(dtype).newbyteorder("<")).tobytes()).decode("ascii")


def runs_of(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start index and length of each run of equal consecutive `keys` (one window's tokens)."""
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]) if len(keys) else np.zeros(0, dtype=np.int64)
    return starts, np.diff(np.r_[starts, len(keys)])
