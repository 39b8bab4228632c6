"""Structural rules the code base keeps (Harlequin style: a test, not a convention)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_engine_never_imports_the_ui():
    offenders = {str(p.relative_to(ROOT)): sorted(m for m in imported_modules(p)
                                                  if m.split(".")[0] in ("textual", "tui",
                                                                          "textual_plotext"))
                 for p in (ROOT / "engine").rglob("*.py")}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_tui_reaches_vllm_only_through_the_engine():
    offenders = [str(p.relative_to(ROOT)) for p in (ROOT / "tui").rglob("*.py")
                 if any(m.split(".")[0] == "vllm" for m in imported_modules(p))]
    assert offenders == []


VLLM_PRIVATE = re.compile(r"\._(schedule\w*|preempt\w*|swap_\w+|get_stats|can_append_slots|"
                          r"append_slots|get_num_new_tokens|allocate_and_set_running)\b")


def test_only_the_adapters_know_vllms_private_names():
    hits = {}
    for path in list((ROOT / "engine").rglob("*.py")) + list((ROOT / "tui").rglob("*.py")):
        if "adapters" in path.relative_to(ROOT).parts:
            continue
        found = VLLM_PRIVATE.findall(path.read_text())
        if found:
            hits[str(path.relative_to(ROOT))] = found
    assert hits == {}
    assert VLLM_PRIVATE.search((ROOT / "engine" / "adapters" / "v0" / "hooks.py").read_text())


# ---------------------------------------------------------------------- import circles
def import_graph(root: Path, packages: tuple[str, ...]) -> dict[str, set[str]]:
    """Module -> the project modules it imports, at any depth in the file (a deferred import
    inside a function counts): /work/shared/tools/import-cycles' static analysis. A module's
    import of its own package's __init__ is not an edge (Python runs that first anyway)."""
    files: dict[str, Path] = {}
    for package in packages:
        for path in (root / package).rglob("*.py"):
            module = ".".join(path.relative_to(root).with_suffix("").parts)
            files[module.removesuffix(".__init__")] = path

    def resolve(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {module: set() for module in files}
    for module, path in files.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
            else:
                continue
            for target in targets:
                found = resolve(target)
                if found and found != module and not (
                        files[found].name == "__init__.py" and module.startswith(found + ".")):
                    graph[module].add(found)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            step = next(edges, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph[step]))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_circle_finder_finds_a_circle_through_a_deferred_import(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.b import thing\n")
    (pkg / "b.py").write_text("def thing():\n    from pkg import c\n")
    (pkg / "c.py").write_text("from . import a\n")
    (pkg / "d.py").write_text("import pkg.a\n")
    assert circles(import_graph(tmp_path, ("pkg",))) == [["pkg.a", "pkg.b", "pkg.c"]]


def test_engine_and_tui_have_no_import_circle():
    graph = import_graph(ROOT, ("engine", "tui"))
    assert "engine.spec" in graph and "tui.cli" in graph  # the walk saw both packages
    assert circles(graph) == []


# ---------------------------------------------------------------------- the command line
def test_every_subcommand_is_registered_once():
    """One module per subcommand, each a CLISubcommand listed once: engine/cli/registry.py
    lists the headless ones, tui/cli/registry.py all of them, and no other module adds a
    subparser."""
    import importlib
    import pkgutil

    import engine.cli
    import tui.cli
    from engine.cli.base import CLISubcommand
    from engine.cli.registry import HEADLESS
    from tui.cli.registry import SUBCOMMANDS, build_parser

    defined: dict[type, str] = {}
    for package in (engine.cli, tui.cli):
        for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
            if info.name.endswith("__main__"):
                continue
            module = importlib.import_module(info.name)
            mine = [c for c in vars(module).values() if isinstance(c, type)
                    and issubclass(c, CLISubcommand) and c.__module__ == module.__name__
                    and "name" in vars(c)]
            assert len(mine) <= 1, f"{info.name} defines {len(mine)} subcommands"
            defined.update({c: info.name for c in mine})
    assert len(defined) >= 14
    registered = [type(s) for s in SUBCOMMANDS]
    assert sorted(registered, key=str) == sorted(defined, key=str)  # each one, once
    names = [s.name for s in SUBCOMMANDS]
    assert len(set(names)) == len(names), names
    assert [type(s) for s in HEADLESS] == [c for c in registered
                                          if defined[c].startswith("engine.")]
    _, sub = build_parser(SUBCOMMANDS)
    assert list(sub.choices) == names
    adds_parsers = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "engine").rglob("*.py")
                          if re.search(r"\.add_(sub)?parsers?\(", p.read_text()))
    adds_parsers += sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tui").rglob("*.py")
                           if re.search(r"\.add_(sub)?parsers?\(", p.read_text()))
    assert adds_parsers == ["engine/cli/base.py", "engine/cli/registry.py"]


# -- colours come from the theme ------------------------------------------------------------

HEX_COLOR = re.compile(r"(?<![\w&])#(?:[0-9a-fA-F]{3}|[0-9a-fA-F]{6}|[0-9a-fA-F]{8})\b")
COLOR_PROPERTIES = re.compile(r"([\w-]*(?:color|background|border|outline|tint)[\w-]*)\s*:"
                              r"\s*([^;{}]+);")


def color_names() -> set[str]:
    from rich.color import ANSI_COLOR_NAMES
    from textual._color_constants import COLOR_NAME_TO_RGB

    return set(ANSI_COLOR_NAMES) | set(COLOR_NAME_TO_RGB)


def string_literals(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)]


def colour_offences(lineno: int, text: str, names: set[str]) -> list[str]:
    """What in one string literal names a colour itself: a hex value, a Rich style with a
    colour ("bold red", "white on #c0003c"), or a CSS colour property that is not a $variable."""
    from rich.errors import StyleSyntaxError
    from rich.style import Style

    found = [f"{lineno}: {m.group()}" for m in HEX_COLOR.finditer(text)]
    try:
        style = Style.parse(text)
    except (StyleSyntaxError, ValueError):
        style = None
    if style is not None and (style.color is not None or style.bgcolor is not None):
        found.append(f"{lineno}: style {text!r}")
    for prop, value in COLOR_PROPERTIES.findall(text):
        words = set(re.findall(r"(?<![$\w-])[a-z_]+\d*\b", value))
        named = sorted(words & names)
        if named:
            found.append(f"{lineno}: {prop}: {value.strip()}")
    return found


def test_no_colour_is_hard_coded_in_the_ui():
    """Textual's themes and NO_COLOR reach every cell only if every colour is a theme
    variable: in DEFAULT_CSS ($primary, $error, ...) or resolved from the app's theme."""
    names = color_names()
    offenders = {}
    for path in sorted((ROOT / "tui").rglob("*.py")):
        found = [offence for lineno, text in string_literals(path)
                 for offence in colour_offences(lineno, text, names)]
        tree = ast.parse(path.read_text(), filename=str(path))
        found += [f"{node.lineno}: RGB literal" for node in ast.walk(tree)
                  if isinstance(node, ast.Tuple) and len(node.elts) == 3
                  and all(isinstance(e, ast.Constant) and type(e.value) is int
                          and 0 <= e.value <= 255 for e in node.elts)]
        if found:
            offenders[str(path.relative_to(ROOT))] = found
    assert offenders == {}


def test_the_colour_check_finds_what_it_looks_for():
    names = color_names()
    assert colour_offences(1, "bold #f4005f", names)
    assert colour_offences(1, "bold white on red", names)
    assert colour_offences(1, "grey37", names)
    assert colour_offences(1, "Foo { background: red; }", names)
    assert colour_offences(1, "Foo { color: #fff; }", names)
    assert not colour_offences(1, "Foo { background: $error; color: $text-error 50%; }", names)
    assert not colour_offences(1, "bold reverse", names)
    assert not colour_offences(1, "vLLM issue #5578: the red line is the abort", names)


def test_every_widget_styles_by_component_classes():
    """Each widget that styles its text declares the classes it reads (Textual's way), and
    every class it declares has a rule in its DEFAULT_CSS."""
    from tui.replay.compare_screen import CompareScreen
    from tui.widgets.decisions_table import DecisionsTable
    from tui.widgets.event_log import EventLog
    from tui.widgets.help_screen import HelpScreen
    from tui.widgets.replay_bar import ReplayBar
    from tui.widgets.status_bar import StatusBar
    from tui.widgets.step_detail import StepDetail

    for widget in (StatusBar, DecisionsTable, EventLog, StepDetail, HelpScreen, ReplayBar,
                   CompareScreen):
        assert widget.COMPONENT_CLASSES, widget.__name__
        for name in widget.COMPONENT_CLASSES:
            assert f".{name} " in widget.DEFAULT_CSS, (widget.__name__, name)
