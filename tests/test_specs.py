"""Command specs: options declared once, the CLI and the API built from them, a bad value named
the way each caller spells it."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from ctxeval import api
from ctxeval.backends.openai_options import DEFAULT_CACHE, OpenAIOptions
from ctxeval.cli import _build, _parameters, _top_values, app
from ctxeval.commands import COMMANDS
from ctxeval.commands.scoring import ScoreSpec, SweepSpec
from ctxeval.errors import UserError
from ctxeval.options import SpecError, check_spec, field_flag, flat_fields

SRC = Path(api.__file__).parent
FIXTURES = Path(__file__).parent / "fixtures"


def _cli_options() -> dict[str, dict[str, str]]:
    command = typer.main.get_command(app)
    out = {}
    for name, c in command.commands.items():
        out[name] = {("/".join(p.opts) + ("|" + "/".join(p.secondary_opts) if p.secondary_opts else "") if p.opts[0].startswith("-") else "ARG:" + p.name): repr(p.default) for p in c.params}
    return out


def test_every_command_keeps_its_flags_and_defaults():
    """The flags and defaults --help lists, per command, are the recorded ones (a change to a
    default is a change users see: update tests/fixtures/cli_options.json on purpose)."""
    assert _cli_options() == json.loads((FIXTURES / "cli_options.json").read_text())


def test_no_flag_is_declared_in_the_cli_or_the_api():
    for name in ("cli.py", "api.py"):
        source = (SRC / name).read_text()
        assert '"--' not in source, name


def test_a_flag_has_one_meaning_per_command():
    for command in COMMANDS.values():
        flags = [field_flag(f).flag for _, f in flat_fields(command.spec) if field_flag(f).flag]
        assert len(flags) == len(set(flags)), command.name


def test_a_bad_value_names_the_flag_on_the_cli_and_the_field_in_python(tmp_path):
    result = CliRunner().invoke(app, ["score", "demo", "--window", "0", "--out", str(tmp_path / "r")])
    assert isinstance(result.exception, UserError) and str(result.exception) == "--window must be a positive integer, got 0"
    with pytest.raises(UserError, match=r"^window= must be a positive integer, got 0$"):
        api.score("demo", window=0, out=tmp_path / "r")
    with pytest.raises(UserError, match=r"^metrics.penalty= must not be negative, got -1"):
        api.sweep(metrics=api.MetricConfig(penalty=-1), out=tmp_path / "s")
    with pytest.raises(UserError, match=r"^unknown method= 'rolling'; choose one of chunked, sliding, fixed$"):
        api.score("demo", method="rolling", out=tmp_path / "r")


def test_rules_across_fields_name_the_field():
    with pytest.raises(SpecError, match="--method sliding needs --stride"):
        check_spec(ScoreSpec(texts=("demo",), method="sliding"))


def test_cli_values_build_the_groups_with_the_commands_shared_seed():
    values = {p.name: p.default for p in _parameters(SweepSpec, None)}  # what typer passes when no flag is given
    values |= {"texts": None, "models": None, "lengths": "16,32", "seed": 7, "corpus__sample": 2, "openai__base_url": ["http://a:1/v1", "http://b:2"],
               "openai__cache": "none", "metrics__cutoff": "full", "metrics__alphas": "0.5", "temperatures": "2"}
    spec = _build(SweepSpec, values, (), _top_values(SweepSpec, values))
    assert spec.lengths == (16, 32) and spec.texts == ("demo",) and spec.models == ("gemma-3-270m",)
    assert spec.corpus.seed == 7 and spec.corpus.sample == 2  # --seed also seeds --sample
    assert spec.openai.base_url == "http://a:1" and spec.openai.fanout == ("http://b:2",) and spec.openai.cache is None
    assert spec.metrics.cutoff is None and spec.metrics.alphas == (0.5,) and spec.temperatures == (2.0,)


def test_python_callers_get_the_specs_defaults_and_conversions():
    spec = api._spec(COMMANDS["score"], ("demo",), {"openai": None, "executor": None})
    assert spec.texts == ("demo",) and spec.openai == OpenAIOptions() and spec.openai.cache == str(DEFAULT_CACHE)
    with pytest.raises(TypeError, match="unexpected keyword argument 'windows'"):
        api._spec(COMMANDS["score"], ("demo",), {"windows": 3})
    with pytest.raises(TypeError, match="positional"):
        api._spec(COMMANDS["compare"], ("a", "b", "c", "d"), {})


def test_every_api_function_is_exported_and_documented():
    import ctxeval

    for command in COMMANDS.values():
        function = getattr(api, command.function_name)
        assert function.__doc__ and function.__name__ == command.function_name
    assert set(ctxeval.__all__) == set(api.__all__)
    assert ctxeval.sweep is api.sweep and ctxeval.leval_corr is api.leval_corr


def test_every_spec_field_has_a_face_or_is_python_only():
    for command in COMMANDS.values():
        for f in fields(command.spec):
            assert {"flag", "group", "python_only"} & set(f.metadata), (command.name, f.name)


@pytest.mark.parametrize(("command", "args", "param", "value"), [
    ("compare", ["a", "b", "--no-cluster-by-text"], "cluster_by_text", False),
    ("compare", ["a", "b", "--cluster-by-text"], "cluster_by_text", True),
    ("compare", ["a", "b"], "cluster_by_text", None),
    ("sweep", ["--non-exhaustive"], "exhaustive", False),
    ("sweep", ["--exhaustive"], "exhaustive", True),
])
def test_a_boolean_pair_sets_its_field_on_and_off(command, args, param, value):
    click_command = typer.main.get_command(app).commands[command]
    assert click_command.make_context(command, list(args)).params[param] is value


def test_every_model_flag_has_one_help_naming_every_backend():
    from ctxeval.backends.model_files import EMBEDDED

    helps = {}
    for command in COMMANDS.values():
        for _, f in flat_fields(command.spec):
            flag = field_flag(f)
            if flag is not None and flag.flag == "--model":
                helps[command.name] = flag.help
    assert {"sweep", "score", "context-gain", "effective-length", "retrieval", "ruler", "pplqa"} <= set(helps)
    assert len(set(helps.values())) == 1, helps
    text = next(iter(helps.values()))
    for form in (*EMBEDDED, *(f"hf:{name}" for name in EMBEDDED), "hf:DIR", "openai:MODEL", ".gguf", "max_context=N", "press=", "type_k=", "ctxeval models"):
        assert form in text, form


def test_a_flag_shared_with_one_default_keeps_one_help():
    """A flag several commands share with the same default reads the same in each --help
    (declared once, in commands/common.py); --out alone differs where a command writes its
    files elsewhere than a run directory of its own (trends into the run, leval-corr beside its input),
    and --delta, whose margin is in the unit of each command's own paired difference (diff: Δ
    log-loss per token; effective-length: gain lost per token)."""
    from collections import defaultdict
    from dataclasses import MISSING

    helps: dict[tuple[str, str], dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for command in COMMANDS.values():
        for _, f in flat_fields(command.spec):
            flag = field_flag(f)
            if flag is not None and flag.flag:
                default = f.default if f.default is not MISSING else f.default_factory
                helps[(flag.flag, repr(default))][flag.help].add(command.name)
    split = {key: dict(texts) for key, texts in helps.items() if len(texts) > 1}
    assert set(split) <= {("--out", "None"), ("--delta", "0.01")}, split
    assert sorted(c for cs in split.get(("--delta", "0.01"), {}).values() for c in cs) in ([], ["diff", "effective-length"])
    assert sorted(c for texts in (split.get(("--out", "None"), {}),) for h, cs in texts.items() if not h.startswith("Run directory") for c in cs) == ["leval-corr", "trends"]
