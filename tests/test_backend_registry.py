"""The backend registry recognises each model spec and answers what its backend can do, and no
module outside it reads a model spec's prefix or file kind."""

import ast
from pathlib import Path

import pytest

from ctxeval.backends.registry import BACKENDS, backend_for, load_scorer, parse_model_spec
from ctxeval.commands.common import refuse_api_models
from ctxeval.errors import UserError

SRC = Path(__file__).resolve().parents[1] / "src" / "ctxeval"
ALLOWED = {"backends/registry.py"}  # the one module that reads a model spec's prefix
MARKERS = tuple(b.prefix for b in BACKENDS.values() if b.prefix) + (".gguf",)


@pytest.mark.parametrize(("spec", "name"), [
    ("gemma-3-270m", "llamacpp"),
    ("gemma-3-270m?type_k=q8_0", "llamacpp"),
    ("models/x.GGUF", "llamacpp"),
    ("hf:gemma-3-270m", "hf"),
    ("hf:/tmp/ckpt?dtype=bfloat16", "hf"),
    ("openai:gpt-4o", "openai"),
    ("openai:", "openai"),
])
def test_each_spec_is_recognised_by_one_backend(spec, name):
    assert backend_for(spec).name == name
    assert [b.name for b in BACKENDS.values() if b.prefix and b.recognises(spec)] in ([], [name])


def test_capabilities_callers_ask_for():
    hf, openai, llama = BACKENDS["hf"], BACKENDS["openai"], BACKENDS["llamacpp"]
    assert [b.remote for b in (hf, openai, llama)] == [False, True, False]
    assert [b.full_distribution for b in (hf, openai, llama)] == [True, False, True]
    assert [b.takes_device for b in (hf, openai, llama)] == [True, False, False]
    assert [b.tokenizer for b in (hf, openai, llama)] == [False, False, True]
    assert [b.chat for b in (hf, openai, llama)] == [False, True, False]


def test_target_drops_only_the_backends_own_prefix():
    assert backend_for("openai:gpt-4o").target("openai:gpt-4o") == "gpt-4o"
    assert backend_for("hf:DIR?dtype=float32").target("hf:DIR?dtype=float32") == "DIR?dtype=float32"
    assert backend_for("x.gguf").target("x.gguf") == "x.gguf"


def test_refusals_come_from_capabilities():
    refuse_api_models([parse_model_spec("gemma-3-270m"), parse_model_spec("hf:DIR")], "diff", "the full distribution")
    with pytest.raises(UserError, match="diff cannot use openai:m"):
        refuse_api_models([parse_model_spec("gemma-3-270m"), parse_model_spec("openai:m")], "diff", "the full distribution")
    with pytest.raises(UserError, match="apply to hf: models only"):
        load_scorer(parse_model_spec("openai:m"), device="cpu")
    with pytest.raises(UserError, match="needs a model name"):
        load_scorer(parse_model_spec("openai:"))
    with pytest.raises(UserError, match="unknown model"):
        load_scorer(parse_model_spec("no-such-model"))


def test_parse_checks_options_by_backend():
    assert parse_model_spec("openai:m?anything=1").text == "openai:m?anything=1"
    with pytest.raises(UserError):
        parse_model_spec("hf:DIR?type_k=q8_0")
    with pytest.raises(UserError):
        parse_model_spec("gemma-3-270m?dtype=float32")
    with pytest.raises(UserError, match="applies to local models only"):
        parse_model_spec("openai:m?max_context=8")


def test_the_typed_spec_holds_backend_base_options_and_max_context():
    model = parse_model_spec("hf:smollm2-135m?press=SnapKVPress&budget=256&max_context=512")
    assert (model.backend.name, model.base, model.plain, model.max_context) == ("hf", "hf:smollm2-135m", "hf:smollm2-135m?press=SnapKVPress&budget=256", 512)
    assert model.pressed and model.press_budget == 256 and model.suffix == "?press=SnapKVPress&budget=256"
    plain = parse_model_spec("gemma-3-270m?type_k=q8_0&flash_attn=1")
    assert (plain.backend.name, plain.base, plain.max_context, plain.pressed, plain.press_budget) == ("llamacpp", "gemma-3-270m", None, False, None)
    assert (plain.options.type_k, plain.options.flash_attn) == ("q8_0", True)


def _prefix_tests(tree: ast.AST) -> list[int]:
    """Lines that test a string for a model-spec prefix or a .gguf file kind."""
    def marks(node: ast.AST) -> bool:
        values = node.elts if isinstance(node, ast.Tuple) else [node]
        return any(isinstance(v, ast.Constant) and isinstance(v.value, str) and v.value.lower() in MARKERS for v in values)

    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("startswith", "endswith", "removeprefix"):
            lines += [node.lineno] if any(marks(a) for a in node.args) else []
        elif isinstance(node, ast.Compare) and any(marks(c) for c in [node.left, *node.comparators]):
            lines.append(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len" and any(marks(a) for a in node.args):
            lines.append(node.lineno)
    return lines


def test_no_module_outside_the_registry_reads_a_spec_prefix():
    found = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel not in ALLOWED and (lines := _prefix_tests(ast.parse(path.read_text()))):
            found[rel] = lines
    assert found == {}


def test_the_scan_sees_a_prefix_test():
    assert sorted(_prefix_tests(ast.parse('s.startswith("hf:")\nx = s[len("openai:"):]\np.suffix == ".gguf"'))) == [1, 2, 3]


def test_models_lists_every_model_option_with_an_example_that_parses_and_its_extra():
    from ctxeval.backends.kv_press import PRESS_KEYS
    from ctxeval.backends.model_options import HF_KEYS, LLAMACPP_KEYS, MAX_CONTEXT, MODEL_OPTIONS
    from ctxeval.backends.registry import list_model_options
    from tests.conftest import run_cli

    listed = " ".join(o.keys for o in MODEL_OPTIONS)
    for key in (*LLAMACPP_KEYS, *HF_KEYS, *PRESS_KEYS, MAX_CONTEXT):
        assert f"{key}=" in listed, key  # no option of a model string is left unlisted
    for option in MODEL_OPTIONS:
        if "kvpress" in option.extra:
            pytest.importorskip("kvpress")
        spec = parse_model_spec(option.example)
        assert spec.backend.name == ("hf" if "hf: models" == option.takes else "llamacpp")
    assert {o.option.keys: o.option.extra for o in list_model_options()}["press=NAME&budget=B"] == ("hf", "kvpress")
    out = run_cli("models").stdout
    assert "hf:smollm2-135m?press=StreamingLLMPress&budget=128" in out and "needs the hf and kvpress extras" in out
    assert "gemma-3-270m?type_k=q8_0&type_v=q8_0&flash_attn=1" in out and "max_context=N" in out


def test_an_unknown_model_names_every_form():
    from ctxeval.backends.model_files import EMBEDDED
    from tests.conftest import run_cli

    proc = run_cli("score", "demo", "--model", "gemma-4", "--max-tokens", "8", "--out", "/tmp/never-written-52b")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    for form in (*EMBEDDED, *(f"hf:{name}" for name in EMBEDDED), "hf:DIR", "openai:MODEL", ".gguf"):
        assert form in proc.stderr, form
