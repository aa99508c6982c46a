"""Corpora as input: `.txt` files, folders, JSON-lines and Parquet files, read lazily.

A corpus is scanned once (every document read, checked and hashed, one at a time) so that
its document list, ids and sha256s are known before a run starts: they decide the run id,
and a bad row must stop the run before anything is scored. Afterwards `Corpus.__iter__`
reads the chosen documents again one at a time, so no more than one document's text is held
in memory (JSON lines line by line, Parquet with `iter_batches`). Document texts keep their
exact characters, as `.txt` files do (DESIGN.md: text is bytes first); a document's sha256 is
that of its UTF-8 bytes, so the same text read from a `.txt` file, a JSON line or a Parquet
row has the same sha256 and pairs across runs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ctxeval.data.texts import DEMO_TEXT_NAME, Text, demo_text_path, load_text
from ctxeval.errors import FieldError, UserError
from ctxeval.options import option, shared

JSONL_SUFFIXES = (".jsonl", ".json")
PARQUET_SUFFIXES = (".parquet",)
_PARQUET_BATCH_ROWS = 64


@dataclass(frozen=True)
class CorpusOptions:
    """How corpus inputs are read and which of their documents are used."""

    glob: str = option("--glob", "Corpus folders: files to read, matched recursively (document id: path below the folder).", "*.txt")
    text_field: str = option("--text-field", "JSONL/Parquet corpora: the field holding each document's text.", "text")
    id_field: str | None = option("--id-field", "JSONL/Parquet corpora: the field holding each document's id (default: <file stem>:<row>).", None)
    max_docs: int | None = option("--max-docs", "Use only the first N documents of the corpus.", None)
    sample: int | None = option("--sample", "Use a seeded random sample of N documents (after --max-docs; seed: --seed).", None)
    seed: int = field(default=0, metadata=shared("seed"))  # the command's --seed
    skip_bad: bool = option("--skip-bad", "Skip bad documents (malformed line, missing field, empty, not UTF-8) and count them in the manifest, instead of stopping.", False)


@dataclass(frozen=True)
class DocRef:
    """A document without its text: where it is, its id and hash."""

    text_id: str
    source: str  # path, `path:line` (JSON lines) or `path#row` (Parquet)
    sha256: str
    input_index: int  # which input argument
    row: int  # row (JSON lines: line number - 1; files: index in the folder listing)


@dataclass
class Corpus:
    """The chosen documents of some inputs; iterating yields their `Text`s one at a time."""

    inputs: tuple[str, ...]
    options: CorpusOptions
    refs: list[DocRef]
    bad: list[dict] = field(default_factory=list)  # skipped bad documents: source and reason
    n_scanned: int = 0  # good documents seen before --max-docs / --sample

    def __len__(self) -> int:
        return len(self.refs)

    def __iter__(self) -> Iterator[Text]:
        wanted: dict[tuple[int, int], DocRef] = {(r.input_index, r.row): r for r in self.refs}
        by_input: dict[int, list[DocRef]] = {}
        for ref in self.refs:
            by_input.setdefault(ref.input_index, []).append(ref)
        # documents come back in the order of `refs` (input order, then row order)
        for index in sorted(by_input):
            rows = {r.row for r in by_input[index]}
            last = max(rows)
            for row, source, _, content in _documents(self.inputs[index], self.options, rows):
                ref = wanted[(index, row)]
                if isinstance(content, _Bad) or _sha(content) != ref.sha256:
                    raise UserError(f"{source} changed while the run was reading it; re-run on an unchanging corpus")
                yield Text(ref.text_id, ref.source, content, ref.sha256)
                if row == last:
                    break

    def facts(self) -> dict:
        """What the manifest records about the input beyond its documents."""
        opts = self.options
        return {
            "inputs": list(self.inputs),
            "options": {"glob": opts.glob, "text_field": opts.text_field, "id_field": opts.id_field, "max_docs": opts.max_docs, "sample": opts.sample, "seed": opts.seed, "skip_bad": opts.skip_bad},
            "documents": len(self.refs),
            "documents_scanned": self.n_scanned,
            "bad_documents": len(self.bad),
            "bad": self.bad,
        }


@dataclass(frozen=True)
class _Bad:
    reason: str


def open_corpus(inputs: Sequence[str | Path], options: CorpusOptions = CorpusOptions()) -> Corpus:
    """Scan the inputs (one document in memory at a time), check every document and choose
    them (`max_docs`, then `sample`). A bad document is a UserError naming its file and line
    or row, or, with `skip_bad`, skipped and counted."""
    if not inputs:
        raise UserError("no text given")
    _check_options(options)
    specs = tuple(str(s) for s in inputs)
    refs: list[DocRef] = []
    bad: list[dict] = []
    seen_ids: dict[str, int] = {}
    for index, spec in enumerate(specs):
        for row, source, row_id, content in _documents(spec, options, None):
            if isinstance(content, _Bad):
                if not options.skip_bad:
                    raise FieldError("skip_bad", f"{source}: {content.reason}; fix it or pass {{name}} to skip bad documents")
                bad.append({"source": source, "reason": content.reason})
                continue
            text_id = _unique(row_id if row_id is not None else _file_id(spec, source), seen_ids)
            refs.append(DocRef(text_id, source, _sha(content), index, row))
            if options.max_docs is not None and options.sample is None and len(refs) == options.max_docs:
                break
        if options.max_docs is not None and options.sample is None and len(refs) == options.max_docs:
            break
    n_scanned = len(refs)
    if options.max_docs is not None:
        refs = refs[: options.max_docs]
    if options.sample is not None and options.sample < len(refs):
        chosen = np.sort(np.random.default_rng(options.seed).choice(len(refs), size=options.sample, replace=False))
        refs = [refs[i] for i in chosen]
    if not refs:
        raise UserError(f"no usable document in {', '.join(specs)}" + (f" ({len(bad)} bad documents skipped)" if bad else ""))
    return Corpus(specs, options, refs, bad, n_scanned)


def _check_options(options: CorpusOptions) -> None:
    for name, value in (("max_docs", options.max_docs), ("sample", options.sample)):
        if value is not None and value < 1:
            raise FieldError(name, f"must be a positive integer, got {value}")
    if not options.text_field:
        raise FieldError("text_field", "must not be empty")


def _unique(text_id: str, seen: dict[str, int]) -> str:
    """Ids stay unique across inputs (two `a.txt` in different folders) by a stable suffix."""
    count = seen.get(text_id, 0)
    seen[text_id] = count + 1
    return text_id if count == 0 else f"{text_id}-{count + 1}"


def _sha(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def _file_id(spec: str, source: str) -> str:
    """A file's stem; in a folder, its path below the folder without the suffix."""
    path = Path(spec)
    if spec == DEMO_TEXT_NAME:
        return DEMO_TEXT_NAME
    if path.is_dir():
        return Path(source).relative_to(path).with_suffix("").as_posix()
    return path.stem



Doc = tuple[int, str, "str | None", "str | _Bad"]  # row, source, the row's id (None: from the file name), text


def _documents(spec: str, options: CorpusOptions, rows: set[int] | None) -> Iterator[Doc]:
    """(row, source, id, text or _Bad) of one input, in order; `rows` limits which are decoded."""
    path = demo_text_path() if spec == DEMO_TEXT_NAME else Path(spec)
    if path.is_dir():
        yield from _folder(path, options, rows)
    elif path.suffix.lower() in JSONL_SUFFIXES:
        yield from _jsonl(path, options, rows)
    elif path.suffix.lower() in PARQUET_SUFFIXES:
        yield from _parquet(path, options, rows)
    else:
        text = load_text(spec)  # a single text file: any problem is the user's to fix, as always
        yield 0, text.source, None, text.content


def _read_bytes(path: Path, spec: str) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise UserError(f"text file not found: {spec}") from None
    except OSError as exc:
        raise UserError(f"cannot read text file {spec}: {exc.strerror}") from None


def _folder(root: Path, options: CorpusOptions, rows: set[int] | None) -> Iterator[Doc]:
    files = sorted(p for p in root.rglob(options.glob) if p.is_file())
    if not files:
        raise FieldError("glob", f"directory {root} holds no file matching {{name}} {options.glob!r}")
    for row, file in enumerate(files):
        if rows is not None and row not in rows:
            continue
        raw = _read_bytes(file, str(file))
        try:
            content = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield row, str(file), None, _Bad(f"not valid UTF-8 (byte {exc.start}; in directory {root})")
            continue
        yield row, str(file), None, content if content.strip() else _Bad(f"empty document (in directory {root})")


def _jsonl(path: Path, options: CorpusOptions, rows: set[int] | None) -> Iterator[Doc]:
    """One document per line; blank lines are not documents. Row = line number - 1."""
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        raise UserError(f"corpus file not found: {path}") from None
    except OSError as exc:
        raise UserError(f"cannot read corpus file {path}: {exc.strerror}") from None
    with handle:
        for row, line in enumerate(handle):
            if (rows is not None and row not in rows) or not line.strip():
                continue
            source = f"{path}:{row + 1}"
            try:
                obj = json.loads(line.decode("utf-8"))
            except UnicodeDecodeError as exc:
                yield row, source, None, _Bad(f"line is not valid UTF-8 (byte {exc.start})")
                continue
            except json.JSONDecodeError as exc:
                yield row, source, None, _Bad(f"malformed JSON ({exc.msg})")
                continue
            if not isinstance(obj, dict):
                yield row, source, None, _Bad(f"a JSON object was expected, got {type(obj).__name__}")
                continue
            yield row, source, *_row_text(obj.get(options.text_field, _MISSING), obj.get(options.id_field, _MISSING) if options.id_field else None, options, path, row)


_MISSING = object()


def _row_text(text, text_id, options: CorpusOptions, path: Path, row: int) -> tuple[str | None, str | _Bad]:
    """(id, text) of one row, or (None, _Bad) saying what is wrong with it."""
    if text is _MISSING:
        return None, _Bad(f"missing field {options.text_field!r}")
    if not isinstance(text, str):
        return None, _Bad(f"field {options.text_field!r} is not a string (got {'null' if text is None else type(text).__name__})")
    if not text.strip():
        return None, _Bad("empty document")
    if options.id_field is None:
        return f"{path.stem}:{row}", text
    if text_id is _MISSING or text_id is None:
        return None, _Bad(f"missing id field {options.id_field!r}")
    if not isinstance(text_id, (str, int)) or isinstance(text_id, bool) or str(text_id) == "":
        return None, _Bad(f"id field {options.id_field!r} must be a non-empty string or an integer")
    return str(text_id), text


def _parquet(path: Path, options: CorpusOptions, rows: set[int] | None) -> Iterator[Doc]:
    """Rows in batches (`iter_batches`), reading only the text and id columns."""
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
    except FileNotFoundError:
        raise UserError(f"corpus file not found: {path}") from None
    except Exception as exc:  # pyarrow raises ArrowInvalid / OSError for a file that is not Parquet
        raise UserError(f"cannot read Parquet file {path}: {exc}") from None
    names = parquet.schema_arrow.names
    columns = [options.text_field] + ([options.id_field] if options.id_field else [])
    for column, field in zip(columns, ("text_field", "id_field")):
        if column not in names:
            raise FieldError(field, f"{path}: missing field {column!r} (columns: {', '.join(names)}); choose it with {{name}}")
    row = 0
    for batch in parquet.iter_batches(batch_size=_PARQUET_BATCH_ROWS, columns=columns):
        texts = batch.column(0).to_pylist()
        ids = batch.column(1).to_pylist() if options.id_field else [None] * len(texts)
        for text, text_id in zip(texts, ids):
            if rows is None or row in rows:
                yield row, f"{path}#row{row}", *_row_text(text, text_id, options, path, row)
            row += 1
