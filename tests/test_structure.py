"""Structure of the package: no import cycles, the layers (engine, tasks, report, face) import
only downwards, one module writes manifests, and a registry that imports no backend."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import ctxeval

SRC = Path(ctxeval.__file__).parent
# the output contract: Result, its header, the declarations of its files and the one writer and
# reader (results/io.py), with the plain table helpers they use; the row an interval writes is
# the interval's own (stats/interval.py, which imports only the level's default)
RESULT_CONTRACT = ("ctxeval.results.base", "ctxeval.results.io", "ctxeval.results.rows", "ctxeval.results.tables")
ROW_FORM = ("ctxeval.stats.interval", "ctxeval.stats.defaults")


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _top_level_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Import statements run when the module is imported: at module level, also inside
    module-level `if`/`try` blocks (except `if TYPE_CHECKING:`), never inside functions."""
    found: list[ast.Import | ast.ImportFrom] = []
    body = list(tree.body)
    while body:
        node = body.pop(0)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif isinstance(node, ast.If) and not (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
            body.extend(node.body + node.orelse)
        elif isinstance(node, ast.Try):
            body.extend(node.body + node.orelse + node.finalbody + [n for h in node.handlers for n in h.body])
    return found


def import_graph(deferred: bool = False) -> dict[str, set[str]]:
    """ctxeval module -> the ctxeval modules it imports at import time (with `deferred`, also
    inside functions: a cycle hidden in a function-level import is still a cycle of design)."""
    modules = {_module_name(p): p for p in SRC.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text())
        nodes = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))] if deferred else _top_level_imports(tree)
        for node in nodes:
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
                # `from pkg import mod` imports the submodule pkg.mod when there is one
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
            graph[name] |= {t for t in targets if t in modules and t != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One cycle of `graph` as a path [a, b, ..., a], or [] if it is acyclic (iterative DFS)."""
    state: dict[str, int] = {}  # 1 on the current path, 2 finished
    for root in sorted(graph):
        if root in state:
            continue
        path, stack = [root], [iter(sorted(graph[root]))]
        state[root] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph[nxt])))
    return []


def test_cycle_finder_finds_a_planted_cycle_and_accepts_a_dag():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []


def test_graph_sees_known_edges():
    graph = import_graph()
    assert "ctxeval.pipeline.engine" in graph["ctxeval.scoring.run"]
    assert "ctxeval.pipeline.windows" in graph["ctxeval.scoring.planning"]  # `from ctxeval.pipeline import windows`
    assert "ctxeval.backends.model_files" in graph["ctxeval.backends.llamacpp"]


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph between ctxeval's first-level modules and subpackages (ctxeval.report, ...).
    The output contract (`results.base` and its writer and reader, which the engine writes
    through) is a unit of its own: the kinds above it hold manifests and records of the engine."""
    def unit(module: str) -> str:
        return RESULT_CONTRACT[0] if module in RESULT_CONTRACT else ".".join(module.split(".")[:2])

    out: dict[str, set[str]] = {}
    for module, imported in graph.items():
        out.setdefault(unit(module), set()).update(unit(m) for m in imported if unit(m) not in (unit(module), "ctxeval"))
    return out


def test_the_result_contract_imports_only_errors_and_the_catalog():
    """The catalog (which class reads which kind) imports nothing itself."""
    graph = import_graph(deferred=True)
    for module in RESULT_CONTRACT:
        assert graph[module] <= {"ctxeval.errors", "ctxeval.catalog", *RESULT_CONTRACT, *ROW_FORM}, module
    for module in ROW_FORM:
        assert graph[module] <= set(ROW_FORM), module
    assert graph["ctxeval.catalog"] == set()


def test_module_import_graph_is_acyclic():
    assert find_cycle(import_graph()) == []


def test_module_import_graph_with_function_level_imports_is_acyclic():
    assert find_cycle(import_graph(deferred=True)) == []


def test_subpackage_graph_is_acyclic():
    """e.g. report/ and pairing.py: one may use the other, not both each other."""
    assert find_cycle(package_graph(import_graph(deferred=True))) == []


def test_registry_and_backends_are_not_coupled_both_ways():
    """The registry names backends by dotted path, so no backend module is imported by it."""
    graph = import_graph(deferred=True)
    backends = {"ctxeval.backends.llamacpp", "ctxeval.backends.hf", "ctxeval.backends.openai"}
    assert not graph["ctxeval.backends.registry"] & backends
    leaf = graph["ctxeval.backends.model_files"]
    assert leaf <= {"ctxeval.errors"}


def _fresh_interpreter(code: str) -> object:
    """What `code` prints as JSON when run in a new Python process (nothing imported yet)."""
    out = subprocess.run([sys.executable, "-c", "import json, sys\n" + code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_importing_the_registry_imports_no_backend_or_heavy_dependency():
    loaded = _fresh_interpreter(
        "import ctxeval.backends.registry\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers', 'httpx', 'llama_cpp') "
        "or m in ('ctxeval.backends.openai', 'ctxeval.backends.hf', 'ctxeval.backends.llamacpp'))))"
    )
    assert loaded == []


def test_backend_class_imports_the_backend_on_demand():
    seen = _fresh_interpreter(
        "from ctxeval.backends.registry import backend_class\n"
        "before = 'ctxeval.backends.openai' in sys.modules\n"
        "name = backend_class('openai').__name__\n"
        "print(json.dumps([before, 'ctxeval.backends.openai' in sys.modules, name]))"
    )
    assert seen == [False, True, "OpenAIScorer"]


def test_cli_imports_only_the_command_registry():
    """The CLI is built from the command specs: it imports the registry, the option metadata
    and the errors it reports, and no module that does work (at any level)."""
    graph = import_graph(deferred=True)
    assert graph["ctxeval.cli"] == {"ctxeval.catalog", "ctxeval.commands", "ctxeval.commands.base", "ctxeval.errors", "ctxeval.options"}


def test_api_is_built_from_the_registry_too():
    """The API declares no option: every public function is a command of the registry, whose
    parameters are its spec's fields."""
    import inspect
    from dataclasses import fields

    from ctxeval import api
    from ctxeval.commands import COMMANDS

    for command in COMMANDS.values():
        function = getattr(api, command.function_name)
        assert list(inspect.signature(function).parameters) == sorted((f.name for f in fields(command.spec)), key=lambda n: n not in command.inputs)
    assert "def " not in "".join(line for line in (SRC / "api.py").read_text().splitlines() if "Parameter(" in line)


def test_cli_reads_back_no_file():
    source = (SRC / "cli.py").read_text()
    assert "read_text" not in source and "open(" not in source


# The layers, bottom up: metrics/stats (pure functions); results (plain typed data); render
# (draws Results); the engine (pipeline/: run lifecycle, manifest, records, planners, executors);
# the tasks (one per command family: they compute and return a Result); report/explorer (files
# and tables); the commands (which hand render/ to the engine); the face (api, cli, serve).
ENGINE = ("ctxeval.pipeline",)
TASKS = ("ctxeval.scoring", "ctxeval.judge", "ctxeval.probes", "ctxeval.ruler", "ctxeval.qa", "ctxeval.leval", "ctxeval.modeldiff", "ctxeval.agreement")
COMMANDS = ("ctxeval.commands",)  # the specs: options, checks, what a command runs and prints
REPORT = ("ctxeval.report", "ctxeval.explorer")
FACE = ("ctxeval.api", "ctxeval.cli", "ctxeval.serve", "ctxeval.server")
RESULTS = ("ctxeval.results",)  # plain typed data: what a folder holds, its readers and writers
# each kind's Markdown, figure and HTML page, from the Result alone (render/kinds.py), handed by
# the command layer to the engine's one write path
RENDER = ("ctxeval.render",)


def _in(module: str, layer: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in layer)


def _imports_of(layer: tuple[str, ...]) -> dict[str, set[str]]:
    return {m: imported for m, imported in import_graph(deferred=True).items() if _in(m, layer)}


def test_layer_checks_see_every_layer():
    assert set(_imports_of(ENGINE)) >= {"ctxeval.pipeline.engine", "ctxeval.pipeline.executors.work"}
    assert set(_imports_of(RESULTS)) >= {"ctxeval.results.base", "ctxeval.results.manifest", "ctxeval.results.records", "ctxeval.results.scoring"}
    assert set(_imports_of(TASKS)) >= {"ctxeval.scoring.run", "ctxeval.judge", "ctxeval.probes.retrieval_run", "ctxeval.qa.passes", "ctxeval.modeldiff.run", "ctxeval.agreement.analysis"}
    assert set(_imports_of(RENDER)) >= {"ctxeval.render.kinds", "ctxeval.render.figures", "ctxeval.render.page"}


def test_engine_imports_no_command_task_report_or_face():
    bad = {m: sorted(i for i in imported if _in(i, COMMANDS + TASKS + REPORT + FACE)) for m, imported in _imports_of(ENGINE).items()}
    assert {m: b for m, b in bad.items() if b} == {}


def test_tasks_and_the_engine_import_nothing_from_render():
    """Results hold data; render/ draws: a task returns its Result and report/ computes, neither
    builds Markdown, a page or a figure; the engine writes what the command layer's `Rendering`
    renders, so it imports no render/ code either."""
    bad = {m: sorted(i for i in imported if _in(i, RENDER)) for m, imported in _imports_of(TASKS + ("ctxeval.report",) + ENGINE).items()}
    assert {m: b for m, b in bad.items() if b} == {}


def test_render_and_explorer_import_no_task():
    """render/ and explorer/ (render's page of a set of runs) read Results: what they show is
    in the Result, never computed by calling into a task."""
    bad = {m: sorted(i for i in imported if _in(i, TASKS)) for m, imported in _imports_of(RENDER + ("ctxeval.explorer",)).items()}
    assert {m: b for m, b in bad.items() if b} == {}


def test_tasks_import_no_command_or_face():
    bad = {m: sorted(i for i in imported if _in(i, COMMANDS + FACE)) for m, imported in _imports_of(TASKS).items()}
    assert {m: b for m, b in bad.items() if b} == {}


def test_commands_import_no_cli_or_api():
    bad = {m: sorted(i for i in imported if _in(i, ("ctxeval.api", "ctxeval.cli"))) for m, imported in _imports_of(COMMANDS).items()}
    assert {m: b for m, b in bad.items() if b} == {}


def test_report_imports_no_backend():
    """Renderers read what runs recorded (a manifest's numeric paths are plain records); they
    never reach into a model backend."""
    bad = {m: sorted(i for i in imported if _in(i, ("ctxeval.backends",))) for m, imported in _imports_of(REPORT).items()}
    assert {m: b for m, b in bad.items() if b} == {}


def test_metrics_and_stats_import_nothing_above_them():
    allowed = ("ctxeval.metrics", "ctxeval.stats", "ctxeval.errors")
    bad = {m: sorted(i for i in imported if not _in(i, allowed)) for m, imported in _imports_of(("ctxeval.metrics", "ctxeval.stats")).items()}
    assert {m: b for m, b in bad.items() if b} == {}


def _ctxeval_imports(path: Path) -> list[str]:
    """Every ctxeval module or package a file names in an import, at any depth (in functions
    too), relative imports resolved against its package."""
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            names += [f"{base}.{alias.name}" if base == "ctxeval" else base for alias in node.names]
    return [n for n in names if n == "ctxeval" or n.startswith("ctxeval.")]


def test_stats_and_metrics_files_import_only_errors_and_each_other():
    """docs/design.md: stats/ and metrics/ import nothing of ctxeval but errors and each other
    (not the options a command builds its flags from), read from every file's syntax tree."""
    files = sorted((SRC / "stats").rglob("*.py")) + sorted((SRC / "metrics").rglob("*.py"))
    assert len(files) > 10
    bad = {str(path.relative_to(SRC)): sorted(n for n in _ctxeval_imports(path) if not _in(n, ("ctxeval.stats", "ctxeval.metrics", "ctxeval.errors")))
           for path in files}
    assert {k: v for k, v in bad.items() if v} == {}
    assert _ctxeval_imports(SRC / "metrics" / "config.py") and all(_in(n, ("ctxeval.stats", "ctxeval.metrics", "ctxeval.errors")) for n in _ctxeval_imports(SRC / "metrics" / "config.py"))


def _calls(name: str) -> set[str]:
    """Modules whose code calls a function named `name`."""
    found = set()
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                func = node.func
                called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
                if called == name:
                    found.add(_module_name(path))
    return found


def test_exactly_one_module_writes_manifests():
    """The engine reads and writes every run's manifest (through manifest.py); no task does."""
    assert {"ctxeval.commands.scoring", "ctxeval.judge", "ctxeval.qa.passes", "ctxeval.probes.retrieval_run"} <= _calls("run")  # every task runs through the engine
    assert _calls("write_manifest") == {"ctxeval.pipeline.engine"}
    assert _calls("existing_manifest") == {"ctxeval.pipeline.engine"}


def test_api_options_are_keyword_only():
    """An API function takes its inputs positionally (at most three: runs, models, files) and
    every option by name, the output directory included (`compare(a, b, out=...)`), so an
    option added or reordered never shifts another."""
    import inspect

    from ctxeval import api

    functions = [getattr(api, name) for name in api.__all__ if inspect.isfunction(getattr(api, name))]
    assert len(functions) >= 14
    for function in functions:
        positional = [p for p in inspect.signature(function).parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        assert len(positional) <= 3, (function.__name__, [p.name for p in positional])
        assert "out" not in [p.name for p in positional], function.__name__


# -- outputs: one writer and one reader per kind ---------------------------------------------

# modules that write files and are not results: records and manifests (their own typed, versioned
# writers), the token pieces beside the records, the embedded model's cache, the HTML report
# (one file, not a folder), the model files' hash cache; every other write goes through
# results/io.py, the one writer of every Result
NON_RESULT_WRITERS = {"ctxeval.results.records", "ctxeval.results.manifest", "ctxeval.pieces", "ctxeval.backends.hf_embedded", "ctxeval.explorer.render",
                      "ctxeval.backends.model_files"}
_WRITE_CALLS = ("write_text", "write_bytes", "to_csv", "to_parquet", "write_table", "dump")


def _functions_calling(names: tuple[str, ...]) -> dict[str, set[str]]:
    """module -> names of its functions that call one of `names` (as a function or method)."""
    found: dict[str, set[str]] = {}
    for path in SRC.rglob("*.py"):
        for fn in ast.walk(ast.parse(path.read_text())):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(fn):
                    if isinstance(node, ast.Call):
                        f = node.func
                        if (f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None) in names:
                            found.setdefault(_module_name(path), set()).add(fn.name)
    return found


def test_every_output_file_is_written_by_its_result():
    """Outside results/, only the named non-result writers write files; a figure is drawn only
    by render/figures.py, from the Result, when the engine writes it (`draw`)."""
    writers = {m for m in _functions_calling(_WRITE_CALLS) if not m.startswith("ctxeval.results.")}
    assert writers <= NON_RESULT_WRITERS, sorted(writers - NON_RESULT_WRITERS)
    assert set(_functions_calling(("savefig",))) == {"ctxeval.render.figures"}
    from ctxeval.catalog import RESULTS
    from ctxeval.render.kinds import renderer

    drawers = [renderer(kind).draw for kind in RESULTS if renderer(kind).draw is not None]
    called = {name for draw in drawers for name in draw.__code__.co_names}  # what each kind's drawer calls
    assert _functions_calling(("savefig",))["ctxeval.render.figures"] <= called


def test_results_import_only_stats_metrics_and_errors():
    """results/ is plain typed data: it computes nothing a task computes and renders nothing, so
    it imports no task, report, engine or backend (the catalog, a leaf, tells kinds apart)."""
    allowed = RESULTS + ("ctxeval.stats", "ctxeval.metrics", "ctxeval.errors", "ctxeval.catalog")
    bad = {m: sorted(i for i in imported if not _in(i, allowed)) for m, imported in _imports_of(RESULTS).items()}
    assert {m: b for m, b in bad.items() if b} == {}


def test_render_reads_results_only():
    """The figures read a Result alone: render/ imports results, stats and metrics, nothing above
    (and the catalog, a leaf, which names each kind's renderer)."""
    allowed = RENDER + RESULTS + ("ctxeval.stats", "ctxeval.metrics", "ctxeval.errors", "ctxeval.catalog")
    bad = {m: sorted(i for i in imported if not _in(i, allowed)) for m, imported in _imports_of(RENDER).items()}
    assert {m: b for m, b in bad.items() if b} == {}


def test_html_pages_are_built_with_render_parts_only():
    """One place renders: Jinja2 (the page environment), the templates, CSS and JS are render/'s;
    the `ctxeval report` explorer draws its page with them."""
    users = set()
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if any(n == "jinja2" or n.startswith("jinja2.") for n in names):
                users.add(_module_name(path))
    assert users == {"ctxeval.render.page", "ctxeval.backends.chat_template"}  # a model's chat template, sandboxed, no page
    page_files = {p.relative_to(SRC).as_posix() for suffix in ("*.j2", "*.js", "*.css") for p in SRC.rglob(suffix)}
    assert page_files and all(f.startswith("render/templates/") for f in page_files), page_files


def test_markdown_tables_are_built_in_render_only():
    """One place renders: every Markdown table a result or the CLI shows is built in render/."""
    assert {m for m in _functions_calling(("to_markdown",))} <= {m for m in import_graph() if _in(m, RENDER)}


def test_every_result_kind_with_a_figure_file_has_its_drawer():
    from ctxeval.catalog import RESULTS as KINDS
    from ctxeval.render.kinds import renderer
    from ctxeval.results.base import result_class
    from ctxeval.results.io import Figure

    with_png = {kind for kind in KINDS if any(name.endswith(".png") for name in result_class(kind).file_names())}
    assert {kind for kind in KINDS if renderer(kind).draw is not None} == with_png
    assert all(isinstance(f, Figure) for kind in with_png for f in result_class(kind).FILES if f.name.endswith(".png"))


def test_the_engine_is_the_one_module_that_writes_results():
    """One write path: runs, post-hoc commands and rewrites of a finished run all go through the
    engine (`write_result` is called nowhere else)."""
    assert set(_functions_calling(("write_result",))) == {"ctxeval.pipeline.engine"}


def _all_flags() -> set[str]:
    from ctxeval.commands import COMMANDS
    from ctxeval.options import field_flag, flat_fields

    flags = {field_flag(f).flag for c in COMMANDS.values() for spec in (c.spec, c.display) if spec for _, f in flat_fields(spec)}
    return {flag.split("/")[0] for flag in flags if flag} | {field_flag(f).negative for c in COMMANDS.values() for _, f in flat_fields(c.spec) if field_flag(f).negative}


def test_no_error_below_the_commands_spells_a_flag():
    """Below commands/ an error names an option by its spec field (`FieldError("lengths", ...)`,
    `{head}` for another); the command spells it `--lengths` for the CLI and `lengths=` for
    Python. The server's HTTP errors (`ApiError`, answers to a client about how the server was
    started) are the exception."""
    import re

    flags = _all_flags()
    found = []
    for path in SRC.rglob("*.py"):
        module = _module_name(path)
        if module.startswith("ctxeval.commands") or module in ("ctxeval.cli", "ctxeval.options"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and (getattr(node.func, "id", None) or getattr(node.func, "attr", "")).endswith("Error") \
                    and getattr(node.func, "id", None) != "ApiError":
                text = " ".join(c.value for arg in node.args for c in ast.walk(arg) if isinstance(c, ast.Constant) and isinstance(c.value, str))
                spelled = [f for f in re.findall(r"--[a-z][a-z0-9-]*", text) if f in flags]
                if spelled:
                    found.append(f"{module}:{node.lineno} {spelled}")
    assert found == []


def test_every_field_error_names_a_spec_field():
    """A FieldError's field (and each {placeholder}) is a field of some command's spec, so a
    command can spell it."""
    from ctxeval.commands import COMMANDS
    from ctxeval.errors import FieldError
    from ctxeval.options import flat_fields

    names = {path[-1] for c in COMMANDS.values() for path, _ in flat_fields(c.spec)}
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "FieldError" and len(node.args) == 2:
                field, problem = node.args
                text = " ".join(c.value for c in ast.walk(problem) if isinstance(c, ast.Constant) and isinstance(c.value, str))
                wanted = FieldError("x", text).placeholders() | ({field.value} if isinstance(field, ast.Constant) else set())
                assert wanted <= names, (_module_name(path), node.lineno, wanted - names)


def test_no_default_is_written_twice():
    """A setting's default lives in one place (its spec field, a group, or a named constant);
    bench/face_figures.py counts a numeric default written on two lines. The one pair left is
    two unrelated counters that start at zero (an API client's HTTP attempts, the generate
    protocol's requests), not a setting."""
    sys.path.insert(0, str(SRC.parents[1] / "bench"))
    try:
        import face_figures
    finally:
        sys.path.pop(0)
    repeated = dict(face_figures.figures(SRC)["most repeated"])
    assert set(repeated) <= {"requests = 0"}, repeated


def test_one_result_class_per_kind_and_every_kind_registered():
    from ctxeval.catalog import RESULTS
    from ctxeval.results.base import result_class

    for kind, (module, name) in RESULTS.items():
        cls = result_class(kind)
        assert cls.KIND == kind and cls.__module__ == module and cls.__name__ == name and cls.FILES


def test_every_result_class_in_results_is_a_registered_kind():
    """A Result written by a new module but missing from the catalog would write folders that
    read_result then refuses: every Result subclass under results/ is catalogued under its KIND."""
    import importlib

    from ctxeval.catalog import RESULTS
    from ctxeval.results.base import Result

    for path in (SRC / "results").glob("*.py"):
        importlib.import_module(_module_name(path))
    found = {cls.KIND: (cls.__module__, cls.__name__) for cls in _subclasses(Result) if "KIND" in vars(cls) and cls.__module__.startswith("ctxeval.results.")}
    assert found == RESULTS


def test_a_kind_is_registered_once_in_the_catalog():
    """`result_class` reads the catalog alone: a Result class does not register itself."""
    from ctxeval.results.base import Result

    assert "__init_subclass__" not in vars(Result)


def test_every_result_declares_its_fields_and_reads_and_writes_none_by_hand():
    """A kind declares its files (`FILES`, results/io.py); the one writer and reader do the rest:
    no kind defines a writer or reader of its own or writes a file, every field is held by one
    file, says where a reader finds it (folder, loaded, derived) or has a default."""
    from dataclasses import MISSING, fields

    from ctxeval.catalog import RESULTS
    from ctxeval.results.base import result_class
    from ctxeval.results.io import File

    for kind, (module, _) in RESULTS.items():
        cls = result_class(kind)
        assert cls.FILES and all(isinstance(f, File) for f in cls.FILES), kind
        assert not {"write_files", "read_files", "from_json", "to_json"} & set(vars(cls)), kind
        held = [name for f in cls.FILES for name in f.holds()]
        assert len(held) == len(set(held)), (kind, held)  # one file holds a field
        for f in fields(cls):
            assert f.name in held or f.metadata or f.default is not MISSING or f.default_factory is not MISSING, (kind, f.name)
        assert module not in _functions_calling(_WRITE_CALLS + ("dumps",)), module


def _subclasses(cls: type) -> list[type]:
    return [c for sub in cls.__subclasses__() for c in (sub, *_subclasses(sub))]


def test_a_command_missing_from_the_catalog_stops_the_import(monkeypatch):
    """A family that declares a command the catalog does not list fails loudly, never drops it."""
    import dataclasses
    import importlib

    import ctxeval.commands as registry
    from ctxeval.commands import tools

    toy = dataclasses.replace(tools.COMMANDS[0], name="toy")
    monkeypatch.setattr(tools, "COMMANDS", [*tools.COMMANDS, toy])
    with pytest.raises(RuntimeError, match="differ: \\['toy'\\]"):
        importlib.reload(registry).COMMANDS  # the registry is built on first use
    monkeypatch.undo()
    importlib.reload(registry)
    from ctxeval import catalog

    assert list(registry.COMMANDS) == list(catalog.COMMANDS)


def test_nothing_outside_results_names_another_commands_output_file():
    """Reading another command's output goes through read_result: no module outside results/
    spells the name of a file a result owns (the report's default file name aside)."""
    from ctxeval.catalog import RESULTS
    from ctxeval.results.base import result_class

    owned = {name for kind in RESULTS for name in result_class(kind).file_names()}
    found = []
    for path in SRC.rglob("*.py"):
        module = _module_name(path)
        if module.startswith("ctxeval.results"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in owned and not (module == "ctxeval.commands.tools" and node.value == "report.html"):
                found.append(f"{module}:{node.lineno} {node.value}")
    assert found == []


def test_explorer_and_pipeline_import_no_command_and_no_task():
    graph = import_graph(deferred=True)
    for module, imported in graph.items():
        if _in(module, ("ctxeval.explorer",)):
            assert not {i for i in imported if _in(i, COMMANDS + TASKS)}, module
        if _in(module, ENGINE):
            assert not {i for i in imported if _in(i, COMMANDS)}, module


def test_the_cli_starts_without_scipy_or_matplotlib():
    """Every command (and every one-line refusal) starts by importing the CLI: scipy and
    matplotlib were 0.7 s of its 1.3 s of imports (`python -X importtime`, 2-core AMD EPYC,
    2026-11-27), so they are imported where an interval or a figure is computed."""
    code = "import sys, ctxeval.cli; print(sorted(m for m in ('scipy', 'matplotlib') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# -- the model spec travels typed ---------------------------------------------------------------

FACE_MODULES = ("ctxeval.options", "ctxeval.commands", "ctxeval.cli", "ctxeval.api")


def _call_sites(name: str) -> list[str]:
    """Where `name(...)` is called in src: "module.function" of each call (module level: the module)."""
    found = []
    for path in SRC.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for outer in ast.walk(tree):
            scope = outer.name if isinstance(outer, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
            body = outer.body if scope else []
            for node in (n for stmt in body for n in ast.walk(stmt)):
                if isinstance(node, ast.Call) and (getattr(node.func, "id", None) or getattr(node.func, "attr", None)) == name:
                    found.append(f"{_module_name(path)}.{scope}")
    return found


def test_the_model_string_is_parsed_in_one_function_called_from_one_place():
    """`parse_model_spec` is the one parser of a model string; the command layer's conversion
    (`commands.common.model_spec`, cached) is its one caller, so a run parses each model once and
    checks, planning, executors and loading receive the typed spec. The pieces of the parser
    are called by the parser alone (and by the option merge of a noise floor's second path)."""
    assert _call_sites("parse_model_spec") == ["ctxeval.commands.common.model_spec"]
    assert sorted(set(_call_sites("pop_max_context"))) == ["ctxeval.backends.registry.parse_model_spec"]
    assert sorted(set(_call_sites("split_spec"))) == ["ctxeval.backends.model_options.pop_max_context", "ctxeval.backends.model_options.with_options",
                                                 "ctxeval.backends.registry.parse_model_spec"]


def test_one_model_spec_class():
    named = [f"{_module_name(p)}" for p in SRC.rglob("*.py") for node in ast.walk(ast.parse(p.read_text()))
             if isinstance(node, ast.ClassDef) and node.name == "ModelSpec"]
    assert named == ["ctxeval.backends.registry"]


def test_loading_takes_the_typed_spec():
    import inspect
    import typing

    from ctxeval.backends.registry import ModelSpec, load_scorer
    from ctxeval.pipeline.executors.spec import ScorerSpec

    assert typing.get_type_hints(load_scorer)[next(iter(inspect.signature(load_scorer).parameters))] is ModelSpec
    assert typing.get_type_hints(ScorerSpec)["model"] is ModelSpec


def test_backends_import_nothing_from_the_face():
    """Backends describe their options in their own terms (ctxeval/described.py); the command
    layer gives them flags."""
    bad = {m: sorted(i for i in imported if _in(i, FACE_MODULES)) for m, imported in _imports_of(("ctxeval.backends",)).items()}
    assert {m: b for m, b in bad.items() if b} == {}


def test_no_backend_error_names_a_command():
    """A backend's error says what is wrong with the model or its options; which commands take
    what is the command layer's to say (no `ctxeval COMMAND`, no list of commands)."""
    import re

    from ctxeval import catalog

    commands = set(catalog.COMMANDS)
    found = []
    for path in (SRC / "backends").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and (getattr(node.func, "id", None) or getattr(node.func, "attr", "")).endswith("Error"):
                text = " ".join(c.value for arg in node.args for c in ast.walk(arg) if isinstance(c, ast.Constant) and isinstance(c.value, str))
                named = [w for w in re.findall(r"[a-z][a-z0-9-]*", text) if w in commands]
                if set(re.findall(r"ctxeval ([a-z][a-z0-9-]*)", text)) & commands or len(set(named)) > 1:
                    found.append(f"{_module_name(path)}:{node.lineno} {named}")
    assert found == []


def _functions() -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every function and method in src/ with its module's name."""
    found = []
    for path in SRC.rglob("*.py"):
        tree = ast.parse(path.read_text())
        found += [(_module_name(path), node) for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return found


# where each kind of paired verdict is decided: one function each, read by everything else
VERDICT_CALLERS = {
    ("ctxeval.ruler.paired", "paired_cell"),  # RULER's paired tables (score and answer log p)
    ("ctxeval.ruler.ppi", "difference_verdict"),  # RULER's prediction-powered differences
    ("ctxeval.modeldiff.finish", "diff_verdict"),  # diff's Δ log-loss
    ("ctxeval.probes.effective_length", "compare_gains"),  # effective-length's gain difference
    ("ctxeval.byor.answer", "against"),  # compare's per-sample runs of other tools (score and answer log p)
}


def test_each_paired_verdict_is_decided_in_one_function_and_render_decides_none():
    calls = {(module, fn.name) for module, fn in _functions()
             for node in ast.walk(fn) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "verdict"}
    assert calls == VERDICT_CALLERS
    assert not [c for c in calls if c[0].startswith("ctxeval.render")]
    # ruler/until and bench/ read the stored verdicts (no call of verdict there)
    for path in (*SRC.joinpath("ruler").glob("*.py"), *(SRC.parents[1] / "bench").glob("*.py")):
        tree = ast.parse(path.read_text())
        names = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        assert "verdict" not in names or path.stem in ("paired", "ppi"), path


MAX_FUNCTION_LINES = 80
MAX_PARAMETERS = 8
MAX_FUNCTIONS_WITH_MANY_PARAMETERS = 5


def test_functions_are_short_and_few_take_many_parameters():
    long = [f"{m}.{fn.name}: {fn.end_lineno - fn.lineno + 1} lines" for m, fn in _functions() if fn.end_lineno - fn.lineno + 1 > MAX_FUNCTION_LINES]
    assert not long, long

    def count(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
        a = fn.args
        return len([x for x in a.posonlyargs + a.args + a.kwonlyargs if x.arg not in ("self", "cls")])

    many = sorted(f"{m}.{fn.name}: {count(fn)}" for m, fn in _functions() if count(fn) > MAX_PARAMETERS)
    assert len(many) <= MAX_FUNCTIONS_WITH_MANY_PARAMETERS, many


def test_no_generation_option_is_read_back_untyped():
    """The generation mode is read from a run's manifest by `Generation.from_config` alone."""
    for path in SRC.rglob("*.py"):
        if path.name == "generation.py":
            continue
        text = path.read_text()
        assert 'config.get("generate' not in text and "config['generate" not in text and 'config["generate' not in text, path
