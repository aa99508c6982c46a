"""Character/byte spans of tokens and byte-exact text loading."""

import hashlib

import numpy as np
import pytest

from ctxeval.data.texts import Text, demo_text_path, load_text
from ctxeval.errors import UserError
from ctxeval.pipeline.tokens import tokenized_from_pieces


def make_text(content: str) -> Text:
    return Text("t", "mem", content, hashlib.sha256(content.encode()).hexdigest())


def test_spans_with_multibyte_characters_and_a_split_character():
    text = make_text("aé€b")  # bytes: a | c3 a9 | e2 82 ac | b
    pieces = [b"a", "é".encode(), b"\xe2", b"\x82\xac", b"b"]
    tt = tokenized_from_pieces(text, np.arange(5, dtype=np.int32), pieces)
    assert tt.byte_starts.tolist() == [0, 1, 3, 4, 6]
    assert tt.n_bytes.tolist() == [1, 2, 1, 2, 1]
    assert tt.char_starts.tolist() == [0, 1, 2, 2, 3]
    assert tt.char_ends.tolist() == [1, 2, 3, 3, 4]


def test_pieces_that_do_not_reproduce_the_text_are_refused():
    with pytest.raises(UserError, match="byte for byte"):
        tokenized_from_pieces(make_text("ab"), np.arange(2, dtype=np.int32), [b"a", b"c"])


def test_load_keeps_crlf_and_hashes_raw_bytes(tmp_path):
    path = tmp_path / "crlf.txt"
    path.write_bytes(b"line one\r\nline two\r\n")
    text = load_text(path)
    assert text.content == "line one\r\nline two\r\n"
    assert text.sha256 == hashlib.sha256(b"line one\r\nline two\r\n").hexdigest()
    assert text.text_id == "crlf"


def test_demo_text_is_bundled_and_public_domain_attributed():
    text = load_text("demo")
    assert text.text_id == "demo"
    assert text.content.startswith("[The Man Who Was Thursday by G. K. Chesterton 1908]")
    assert (demo_text_path().parent / "README.md").read_text().count("public domain") >= 1


@pytest.mark.parametrize(
    "content,message",
    [(None, "not found"), (b"\xff\xfe\x00bad", "not valid UTF-8"), (b"  \n\t ", "empty")],
)
def test_bad_text_files(tmp_path, content, message):
    path = tmp_path / "x.txt"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(UserError, match=message):
        load_text(path)
