"""Figures of the code's shape that the spec-first redesign is judged by, for any checkout:

    python bench/face_figures.py [SRC]      # SRC: a src/ctxeval folder (default: this checkout's)

- option declarations: CLI flags declared with a help text (`typer.Option("--x", help=...)` or a
  spec field's `option("--x", ...)`), and how many of them repeat a flag declared elsewhere;
- literal defaults written more than once: the same `name = <number>` default (a function
  parameter, a dataclass field, or a spec field's `option(..., default)`) on several lines,
  e.g. `replicates = 2000`;
- lines of cli.py and api.py, and functions longer than 50 lines.
"""

from __future__ import annotations

import ast
import collections
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _flag_declarations(tree: ast.AST) -> list[str]:
    """Flags declared with a help text: `typer.Option("--x", help=...)` or a spec field's
    `option("--x", "help", ...)`."""
    flags = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str) \
                and node.args[0].value.startswith("--"):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id if isinstance(node.func, ast.Name) else ""
            if name in ("Option", "option"):
                flags.append(node.args[0].value.split("/")[0])
    return flags


def _parameter_uses(tree: ast.AST) -> list[str]:
    """Parameter names of typer command functions (each one a flag the CLI declares for a command)."""
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and any(isinstance(d, ast.Call) and getattr(d.func, "attr", "") == "command" for d in node.decorator_list):
            names += [a.arg for a in node.args.args + node.args.kwonlyargs]
    return names


def _option_default(call: ast.Call) -> ast.expr | None:
    """The default of a spec field declared with `option(flag, help, default)` or
    `argument(help, default)` (positional or `default=`)."""
    name = call.func.attr if isinstance(call.func, ast.Attribute) else call.func.id if isinstance(call.func, ast.Name) else ""
    position = {"option": 2, "argument": 1}.get(name)
    if position is None:
        return None
    keyword = next((k.value for k in call.keywords if k.arg == "default"), None)
    return keyword if keyword is not None else call.args[position] if len(call.args) > position else None


def _literal_defaults(tree: ast.AST, path: Path) -> list[tuple[str, object, str]]:
    """(name, value, where) of numeric literal defaults of parameters and annotated fields (a
    class constant such as a result kind's `VERSION` is its own, not a shared default)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args.args[len(node.args.args) - len(node.args.defaults):] if node.args.defaults else []
            pairs = list(zip(args, node.args.defaults)) + [(a, d) for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults) if d is not None]
            for arg, default in pairs:
                if isinstance(default, ast.Constant) and isinstance(default.value, (int, float)) and not isinstance(default.value, bool):
                    found.append((arg.arg, default.value, f"{path}:{default.lineno}"))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and not node.target.id.isupper():
            default = _option_default(node.value) if isinstance(node.value, ast.Call) else node.value
            if isinstance(default, ast.Constant) and isinstance(default.value, (int, float)) and not isinstance(default.value, bool):
                found.append((node.target.id, default.value, f"{path}:{node.lineno}"))
    return found


def figures(src: Path) -> dict[str, object]:
    flags: list[str] = []
    uses: list[str] = []
    defaults: list[tuple[str, object, str]] = []
    long_functions = []
    for path in sorted(src.rglob("*.py")):
        tree = ast.parse(path.read_text())
        flags += _flag_declarations(tree)
        uses += _parameter_uses(tree)
        defaults += _literal_defaults(tree, path.relative_to(src))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > 50:
                long_functions.append(f"{path.relative_to(src)}:{node.name} ({node.end_lineno - node.lineno + 1})")
    counts = collections.Counter(flags)
    by_default = collections.defaultdict(list)
    for name, value, where in defaults:
        by_default[(name, value)].append(where)
    repeated = {f"{name} = {value}": len(where) for (name, value), where in by_default.items() if len(where) > 1}
    lines = {name: len((src / name).read_text().splitlines()) for name in ("cli.py", "api.py") if (src / name).is_file()}
    return {
        "flag declarations with help": len(flags),
        "distinct flags": len(counts),
        "redundant copies (declarations beyond the first per flag)": sum(n - 1 for n in counts.values()),
        "typer command parameters (hand-declared per command)": len(uses),
        "of which repeat another command's": sum(n - 1 for n in collections.Counter(uses).values()),
        "numeric defaults written on more than one line": len(repeated),
        "lines carrying them": sum(repeated.values()),
        "most repeated": sorted(repeated.items(), key=lambda kv: -kv[1])[:6],
        "lines": lines,
        "functions over 50 lines": len(long_functions),
        "long functions": long_functions,
    }


def main() -> None:
    src = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "src" / "ctxeval"
    for key, value in figures(src).items():
        print(f"{key}: {value}")


if __name__ == "__main__":
    main()
