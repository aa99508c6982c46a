"""The one list (`ctxeval.catalog`): a command and its result kind catalogued on one line show up in
the CLI, the API, `ctxeval.__all__`, `read_result`, the HTML report and probe-report, following
docs/design.md's "Add a command": a model-backed probe command is four new files and that line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

TOY_FAMILY = '''
"""A toy post-hoc command: the number of words of a text file."""
from dataclasses import dataclass
from pathlib import Path

from ctxeval.commands.base import Command
from ctxeval.errors import FieldError
from ctxeval.options import argument, option
from ctxeval.results.base import Result
from ctxeval.results.io import Json, folder


@dataclass
class ToyResult(Result):
    KIND = "toy"
    FILES = (Json("toy.json", {"words": "words"}),)  # its fields, declared: the one writer and reader do the rest
    out: Path = folder()
    words: int


@dataclass(frozen=True)
class ToySpec:
    """Count the words of a text file."""

    text: Path = argument("A text file.")
    out: Path = option("--out", "Folder to write.", Path("toy-out"))
    max_words: int = option("--max-words", "Refuse a longer text.", 100)


def run_toy(spec: ToySpec) -> ToyResult:
    words = len(spec.text.read_text().split())
    if words > spec.max_words:  # found by the task, named by the caller's spelling
        raise FieldError("max_words", f"is {spec.max_words}, below the {words} words of the text; raise it or shorten the text ({{out}} is untouched)")
    return ToyResult(spec.out, words)


COMMANDS = (Command("toy", ToySpec, run_toy, lambda result, spec, display: f"{result.words} words", inputs=("text",),
                    posthoc=lambda spec: (spec.out, (spec.text,))),)
'''

DRIVER = '''
import importlib, json, sys
import ctxeval.errors
from pathlib import Path

from ctxeval import catalog

catalog.COMMANDS["toy"] = catalog.Entry("toy_family", "Count the words of a text file.", catalog.Kind("toy", "toy_family", "ToyResult"))  # the one line
import ctxeval

importlib.reload(ctxeval)  # __all__ was computed when the package was first imported
from ctxeval import cli, read_result

text, out_api, out_cli = (Path(a) for a in sys.argv[1:4])
result = ctxeval.toy(text, out=out_api)
sys.argv = ["ctxeval", "toy", str(text), "--out", str(out_cli)]
try:
    cli.main()
except SystemExit as exc:
    assert not exc.code, exc.code
import contextlib, io
try:
    ctxeval.toy(text, out=out_api, max_words=2)
except ctxeval.errors.UserError as exc:
    python_error = str(exc)
sys.argv = ["ctxeval", "toy", str(text), "--max-words", "2"]
stderr = io.StringIO()
with contextlib.redirect_stderr(stderr):
    try:
        cli.main()
    except SystemExit as exc:
        cli_code = exc.code
print(json.dumps({"python_error": python_error, "cli_error": stderr.getvalue().strip(), "cli_code": cli_code}))
print(json.dumps({"in_all": "toy" in ctxeval.__all__, "api_words": result.words, "read_api": read_result(out_api).words,
                  "read_cli": type(read_result(out_cli)).__name__, "manifest": json.loads((out_cli / "manifest.json").read_text())["command"]}))
'''


def test_a_catalogued_command_appears_everywhere(tmp_path: Path):
    (tmp_path / "toy_family.py").write_text(TOY_FAMILY)
    (tmp_path / "driver.py").write_text(textwrap.dedent(DRIVER))
    text = tmp_path / "t.txt"
    text.write_text("one two three four")
    done = subprocess.run([sys.executable, str(tmp_path / "driver.py"), str(text), str(tmp_path / "api"), str(tmp_path / "cli")],
                          capture_output=True, text=True, cwd=tmp_path, env=_env(tmp_path), timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[0] == "4 words"  # the CLI's echo
    assert json.loads(lines[-2]) == {"python_error": "max_words= is 2, below the 4 words of the text; raise it or shorten the text (out= is untouched)",
                                      "cli_error": "ctxeval: error: --max-words is 2, below the 4 words of the text; raise it or shorten the text (--out is untouched)",
                                      "cli_code": 2}
    assert json.loads(lines[-1]) == {"in_all": True, "api_words": 4, "read_api": 4, "read_cli": "ToyResult", "manifest": "toy"}


def test_every_command_is_in_the_cli_the_api_and_all():
    """The built registry, the CLI, the API and `__all__` hold exactly the catalogued commands, and
    every result class a command's run returns is a catalogued kind."""
    import typing

    import ctxeval
    import ctxeval.judge  # noqa: F401  subpackages named like a command: the function still wins
    import ctxeval.leval.report  # noqa: F401
    from ctxeval import api, catalog, cli
    from ctxeval.commands import COMMANDS
    from ctxeval.results.base import Result

    assert list(COMMANDS) == list(catalog.COMMANDS)
    assert [c.name for c in cli.app.registered_commands] == list(catalog.COMMANDS)
    assert list(ctxeval.__all__) == list(api.__all__) == catalog.public_names()
    for name in ctxeval.__all__:
        assert getattr(ctxeval, name) is getattr(api, name)
    kinds = {k.cls for k in catalog.kinds().values()}
    for command in COMMANDS.values():
        returned = typing.get_type_hints(command.run).get("return")
        for cls in typing.get_args(returned) or (returned,):
            if isinstance(cls, type) and issubclass(cls, Result) and cls is not Result:  # summary returns whichever kind it reads
                assert cls.__name__ in kinds and cls is getattr(api, cls.__name__), (command.name, cls)


def _env(package: Path) -> dict[str, str]:
    """The environment of a driver: its toy modules in `package`, then this ctxeval's sources."""
    import ctxeval

    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(package), str(Path(ctxeval.__file__).parents[1])])}


# -- a model-backed probe command, four new files and one catalog line ---------------------------

TOY_PROBE = {
    "toy_result.py": '''
"""The toy probe's result: each model's mean log-probability of a text's tokens."""
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ctxeval.results.base import Result, Section
from ctxeval.results.io import Json, Text, folder, rows

TOY = Section("toy", "Mean log-probability of a whole text")


@dataclass
class ToyResult(Result):
    KIND = "toy"
    FILES = (Json("toy.json", {"scores": rows("scores")}), Text("toy.md", "markdown"))
    PROBE = (TOY,)  # its probe-report section

    out: Path = folder()
    scores: pd.DataFrame  # model, tokens, mean_logprob
    markdown: str = ""

    def probe_rows(self, run: Path) -> dict[str, pd.DataFrame]:
        return {TOY.key: self.scores.assign(run=str(run))[["run", "model", "tokens", "mean_logprob"]]}
''',
    "toy_task.py": '''
"""The toy probe as a task of the engine: one record per model, every token of the text scored."""
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from ctxeval.pipeline.engine import Plan, Step
from ctxeval.pipeline.executors import ScorerSpec, Work
from ctxeval.pipeline.executors.work import one_per_unit
from ctxeval.results.records import RecordKind, append_row
from toy_result import ToyResult


@dataclass(frozen=True)
class MeanLogprob:
    """What a worker runs: the text's tokens after BOS, scored in one pass."""

    def __call__(self, model, items):
        out = []
        for text in items:
            ids = np.asarray(model.tokenize(text), dtype=np.int32)
            inputs = np.concatenate([[model.info.bos_id], ids]).astype(np.int32)
            scores = model.score(inputs, np.arange(len(ids)), ids, 1, ())
            out.append({"tokens": len(ids), "mean_logprob": float(scores.logprob.mean())})
        return out


class ToyRun:
    records = RecordKind("toy_records.parquet", "model", ("model",))
    schema = pa.schema([("model", pa.string()), ("tokens", pa.int32()), ("mean_logprob", pa.float64())])
    unit = "texts"
    finish_incomplete = False

    def __init__(self, text, models):
        self.text, self.specs = text, [ScorerSpec(m) for m in models]

    def load_specs(self):
        return self.specs

    def plan(self, models, done):
        work = [Work(MeanLogprob(), one_per_unit([m.info.name] if m.info.name not in done else []), lambda job: self.text, lambda job: 1) for m in models]
        return Plan(work, units=len(models), noun="texts", total=len(models), already=len(done))

    def record(self, model, job, result, columns):
        append_row(columns, {"model": model.info.name, **result})

    def progress(self, model, job):
        return Step(1, model.info.name)

    def model_done(self, run_dir, model):
        """Nothing to keep from the loaded model."""

    def finish(self, run_dir: Path, manifest) -> ToyResult:
        return ToyResult(run_dir, pd.read_parquet(run_dir / self.records.file))
''',
    "toy_command.py": '''
"""`ctxeval toy`: its options, the run and what the CLI prints."""
from dataclasses import dataclass
from pathlib import Path

from ctxeval.commands import common
from ctxeval.commands.base import Command
from ctxeval.config import config_id
from ctxeval.options import argument
from ctxeval.pipeline.engine import RunSpec, run
from ctxeval.render.kinds import RENDERING
from toy_result import ToyResult
from toy_task import ToyRun


@dataclass(frozen=True)
class ToySpec:
    """Mean log-probability of every token of a text, per model."""

    text: Path = argument("A text file.")
    model: tuple[str, ...] = common.models("Model to score with (repeat for several).")
    out: Path = common.out("Run directory.", Path("runs/toy"))


def run_toy(spec: ToySpec) -> ToyResult:
    text = spec.text.read_text()
    config = {"text": text, "models": list(spec.model)}
    return run(ToyRun(text, common.model_specs(spec.model)), RunSpec("toy", config_id(config), config), spec.out, render=RENDERING)


def _echo(result: ToyResult, spec: ToySpec, display: None) -> str:
    return "\\n".join(f"{r.model}: mean log p {r.mean_logprob:.4f} over {r.tokens} tokens" for r in result.scores.itertuples())


COMMANDS = (Command("toy", ToySpec, run_toy, _echo, inputs=("text",)),)
''',
    "toy_render.py": '''
"""The toy kind's texts and its view on the report page."""
from dataclasses import replace

from ctxeval.render.renderer import Renderer
from ctxeval.render.views import RunView, header
from ctxeval.results.manifest import read_manifest


def texts(r):
    return replace(r, markdown="# Toy probe\\n\\n" + r.scores.to_markdown(index=False, floatfmt=".4f") + "\\n")


def view(r, label, first_arm):
    manifest = read_manifest(r.out).to_json()
    shown = RunView(label, r.out, "toy", manifest, header(manifest, "toy"))
    shown.headline = [{"label": f"toy mean log p {s.model}", "value": f"{s.mean_logprob:.4f}", "interval": f"{s.tokens} tokens"} for s in r.scores.itertuples()]
    return shown, []


RENDERER = Renderer(texts, view)
''',
}

TOY_DRIVER = '''
import contextlib, importlib, io, json, sys
from pathlib import Path

from ctxeval import catalog

catalog.COMMANDS["toy"] = catalog.Entry("toy_command", "Mean log-probability of a text.", catalog.Kind("toy", "toy_result", "ToyResult", "toy_render"))
import ctxeval

importlib.reload(ctxeval)  # __all__ was computed when the package was first imported
from ctxeval import cli, read_result


def main(*argv):
    """The CLI on `argv`: what it printed and its exit code."""
    sys.argv, out = ["ctxeval", *argv], io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            cli.main()
        except SystemExit as exc:
            return out.getvalue(), exc.code or 0
    return out.getvalue(), 0


model, text, root = sys.argv[1], sys.argv[2], Path(sys.argv[3])
listed, _ = main("--help")
helped, _ = main("toy", "--help")
printed, code = main("toy", text, "--model", model, "--out", str(root / "cli"))
result = ctxeval.toy(Path(text), model=(model,), out=root / "api")
main("report", str(root / "cli"), "--out", str(root / "report.html"))
main("probe-report", str(root / "cli"), "--out", str(root / "probes"))
probes = read_result(root / "probes")
print(json.dumps({"listed": "Mean log-probability of a text." in listed, "help": "Mean log-probability of every token of a text, per model." in " ".join(helped.split()),
                  "printed": printed, "code": code, "in_all": "toy" in ctxeval.__all__, "api": result.scores.to_dict("records"),
                  "read": read_result(root / "cli").scores.to_dict("records"), "kind": type(read_result(root / "api")).__name__,
                  "section": probes.sections["toy"].to_dict("records"), "probe_md": probes.markdown}))
'''


@pytest.mark.model
def test_a_probe_command_is_four_files_and_one_catalog_line(tmp_path):
    """A toy probe (spec + run, task, Result, renderer) and its one catalog line: a tiny random
    Llama runs through the engine, and the command is in the CLI, the API, read_result, the HTML
    report (its view) and probe-report (its section); its number is the model's own."""
    pytest.importorskip("transformers")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ctxeval.data.texts import load_text
    from tests.hf_tiny import tiny_llama_dir

    demo = load_text("demo").content
    model = tiny_llama_dir(tmp_path / "tiny", demo[:20000], max_positions=256)
    package = tmp_path / "package"
    package.mkdir()
    for name, source in TOY_PROBE.items():
        (package / name).write_text(source)
    (tmp_path / "driver.py").write_text(TOY_DRIVER)
    text = tmp_path / "t.txt"
    text.write_text(demo[:300])
    assert len(list(package.iterdir())) == 4  # the four new files
    (line,) = [line for line in TOY_DRIVER.splitlines() if "catalog." in line]  # and one catalog line
    assert line.startswith('catalog.COMMANDS["toy"] = ')

    done = subprocess.run([sys.executable, str(tmp_path / "driver.py"), f"hf:{model}", str(text), str(tmp_path / "out")],
                          capture_output=True, text=True, cwd=tmp_path, env=_env(package), timeout=600)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["listed"] and seen["help"] and seen["code"] == 0 and seen["in_all"] and seen["kind"] == "ToyResult"
    (row,) = seen["api"]
    assert seen["read"] == seen["api"]
    assert seen["printed"] == f"{row['model']}: mean log p {row['mean_logprob']:.4f} over {row['tokens']} tokens\n"

    # the model's own float32 forward pass: the mean log-softmax of every token after BOS
    tokenizer = AutoTokenizer.from_pretrained(str(model))
    ids = tokenizer(demo[:300], add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logits = AutoModelForCausalLM.from_pretrained(str(model)).float()(torch.as_tensor([[tokenizer.bos_token_id, *ids]])).logits[0, :-1]
    expected = torch.log_softmax(logits.double(), -1)[torch.arange(len(ids)), torch.as_tensor(ids)].mean().item()
    assert row["tokens"] == len(ids) and row["mean_logprob"] == pytest.approx(expected, abs=1e-4)

    page = (tmp_path / "out" / "report.html").read_text()
    assert f"toy mean log p {row['model']}" in page and f"{row['mean_logprob']:.4f}" in page  # its view's headline
    (section,) = seen["section"]  # probe_report.json holds 10 significant digits (pandas' to_json)
    assert section == {"run": str(tmp_path / "out" / "cli"), **row, "mean_logprob": pytest.approx(row["mean_logprob"], rel=1e-9)}
    assert "## Mean log-probability of a whole text" in seen["probe_md"]
