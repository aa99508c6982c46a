"""transformers' own output (warnings, progress bars, the GGUF conversion's tqdm bar) stays off
stderr unless TRANSFORMERS_VERBOSITY asks for it."""

from __future__ import annotations

import pytest

transformers = pytest.importorskip("transformers")
from tqdm.auto import tqdm  # noqa: E402

from ctxeval.backends.hf_embedded import _quiet_gguf_bar, quiet_transformers  # noqa: E402


def _bar() -> None:
    for _ in tqdm(range(3), desc="Converting and de-quantizing GGUF tensors..."):
        pass


def test_the_conversion_bar_is_quiet_unless_transformers_verbosity_asks(capfd, monkeypatch):
    monkeypatch.delenv("TRANSFORMERS_VERBOSITY", raising=False)
    with _quiet_gguf_bar():
        _bar()
    assert "Converting" not in capfd.readouterr().err
    monkeypatch.setenv("TRANSFORMERS_VERBOSITY", "info")
    with _quiet_gguf_bar():
        _bar()
    assert "Converting" in capfd.readouterr().err


def test_transformers_progress_bars_and_warnings_are_off(monkeypatch):
    monkeypatch.delenv("TRANSFORMERS_VERBOSITY", raising=False)
    transformers.utils.logging.enable_progress_bar()
    quiet_transformers()
    assert not transformers.utils.logging.is_progress_bar_enabled()
    assert transformers.logging.get_verbosity() == transformers.logging.ERROR
