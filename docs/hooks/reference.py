"""MkDocs hook: the reference pages, generated from the code at every build.

A page holds a marker, `<!-- generated: NAME -->`, and this hook replaces it with what the code
declares now: every subcommand and flag from the argparse parser the `observatory` command
builds (tui/cli/registry.py, its flags from engine/options.py), the presets and policies
(engine/spec.py, engine/policy.py and the `?` screen's words), the record format
(engine/stream/records.py, fields and their comments), the exit statuses (engine/exit_status.py)
and every one-line error the code can raise. Why generated and not written: a hand copy goes
stale the day a flag is added, and `mkdocs build --strict` cannot see that; a marker nobody
knows, or a generator that fails, fails the build.

Nothing here imports vLLM (the docs venv has none): the modules read are the ones `observatory
--help` itself loads, and the build fails if any of them pulled vLLM in. The records' field
comments and the error messages are read from the source with `ast`, never by importing the
modules that raise them (several import vLLM).
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

from mkdocs.exceptions import PluginError

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # the build may run from a venv whose editable install is older
    sys.path.insert(0, str(ROOT))

MARKER = re.compile(r"<!-- generated: ([a-z-]+) -->")
ERROR_CLASSES = ("ConfigError", "RecordingError", "PeerError", "EngineError", "ObservatoryError")
RECORD_CLASSES = ("Header", "DeviceInfo", "StepRecord", "V1StepRecord", "Arrivals",
                  "PolicyChanged", "EngineAborted", "LogLine", "LogWindow", "LogEvent",
                  "ObserverError", "RunFinished", "Check", "Index")


def cell(text: str) -> str:
    """`text` safe inside a Markdown table cell (one line, no bare pipe)."""
    return " ".join(str(text).split()).replace("|", "\\|")


def code(text: str) -> str:
    """`text` as an inline code span, whatever backticks it holds."""
    text = " ".join(str(text).split())
    fence = "``" if "`" in text else "`"
    pad = " " if "`" in text else ""
    return f"{fence}{pad}{text}{pad}{fence}"


# ------------------------------------------------------------------------------------ the CLI
def cli_parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The `observatory` parser and its subparsers by name, built as the console script does."""
    from engine.cli.registry import build_parser
    from tui.cli.registry import SUBCOMMANDS

    parser, sub = build_parser(SUBCOMMANDS)
    return parser, dict(sub.choices)


def _action_help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    if action.help in (None, argparse.SUPPRESS):
        return ""
    return parser._get_formatter()._expand_help(action)  # %(default)s and friends, as --help


def _action_name(action: argparse.Action) -> str:
    if action.option_strings:
        names = ", ".join(action.option_strings)
        if action.nargs != 0 and not isinstance(action, argparse.BooleanOptionalAction):
            metavar = action.metavar or (action.dest.upper() if not action.choices else
                                         "{" + ",".join(map(str, action.choices)) + "}")
            if isinstance(metavar, tuple):
                metavar = " ".join(metavar)
            names += f" {metavar}"
        return names
    return str(action.metavar or action.dest)


def gen_cli() -> str:
    """Every subcommand: its help, usage and each argument group's flags, as --help says them."""
    parser, subs = cli_parser()
    out = ["| command | what it does |", "| --- | --- |"]
    helps = {a.dest: a.help for a in parser._subparsers._group_actions[0]._choices_actions}
    for name in subs:
        out.append(f"| [`observatory {name}`](#observatory-{name}) | {cell(helps.get(name, ''))} |")
    out.append("")
    for name, sub in subs.items():
        out += [f"## `observatory {name}` {{ #observatory-{name} }}", ""]
        if helps.get(name):
            out += [cell(helps[name]).replace("\\|", "|") + ".", ""]
        if sub.description:
            out += [sub.description, ""]
        out += ["```text", sub.format_usage().strip(), "```", ""]
        for group in sub._action_groups:
            actions = [a for a in group._group_actions if a.help is not argparse.SUPPRESS]
            if not actions:
                continue
            out += [f"**{group.title}**" + (f": {group.description}" if group.description
                                            else ""), "",
                    "| argument | meaning |", "| --- | --- |"]
            for action in actions:
                out.append(f"| {code(_action_name(action))} | "
                           f"{cell(_action_help(sub, action))} |")
            out.append("")
    return "\n".join(out)


# ------------------------------------------------------------------- presets, policies, settings
def gen_presets() -> str:
    """Each preset as the flags it changes from RunSpec's defaults (resolved, not copied), and
    its fix: the policy the live monitor's `f` switches on."""
    from engine.options import options
    from engine.spec import PRESETS, RunSpec, preset_engine, preset_fix, preset_spec

    flags = {name: option.flag for name, option in options(RunSpec).items()}
    default = RunSpec()
    out = ["| preset | engine | its fix (`f`) | differs from the defaults |",
           "| --- | --- | --- | --- |"]
    for name in PRESETS:
        spec = preset_spec(name)
        if name == "recorded":  # a recording's re-run: its engine's settings, its kind's fix
            continue
        kind = preset_engine(name).upper()
        changed = []
        for field in spec.__struct_fields__:
            value = getattr(spec, field)
            if field != "preset" and value != getattr(default, field):
                changed.append(f"`{flags.get(field, field)}` {_show(value)}")
        out.append(f"| `{name}` | {kind} | `{preset_fix(name, preset_engine(name))}` | "
                   f"{cell('; '.join(changed) or '(the defaults)')} |")
    return "\n".join(out)


def _show(value: Any) -> str:
    if hasattr(value, "__struct_fields__"):
        return ", ".join(f"{f}={getattr(value, f)!r}" for f in value.__struct_fields__)
    return repr(value) if isinstance(value, str) else str(value)


def gen_settings() -> str:
    """Every RunSpec field: its --config/--grid key, flag, bounds, default and help."""
    from engine.options import options
    from engine.spec import RunSpec

    out = ["| field (`--config` and `--grid` key) | flag | allowed | default | meaning |",
           "| --- | --- | --- | --- | --- |"]
    for name, option in options(RunSpec).items():
        out.append(f"| `{name}` | `{option.flag}` | {cell(option.describe())} | "
                   f"{code(repr(option.default))} | {cell(option.setting.help)} |")
    return "\n".join(out)


def gen_policies() -> str:
    """Every policy name per engine kind, in the words the `?` screen shows; a policy without
    words fails the build."""
    from engine.policy import ENGINE_KINDS, POLICY_NAMES
    from tui.widgets.help_screen import POLICIES, V1_POLICIES

    said = {("v0", n): text for n, text in POLICIES} | {("v1", n): text for n, text in V1_POLICIES}
    out = ["| policy | engine | what it does (the `?` screen's words) |", "| --- | --- | --- |"]
    for name in POLICY_NAMES:
        for kind in ENGINE_KINDS[name]:
            text = said.get((kind, name))
            if text is None:
                raise PluginError(f"policy {name} ({kind}) has no words in the ? screen")
            out.append(f"| `{name}` | {kind.upper()} | {cell(text)} |")
    out += ["", "On V1 an admission rule, a victim choice and a scan order combine with `+` "
                "(`whole-context+least-computed`, `full-isl+skip-and-continue`)."]
    return "\n".join(out)



def gen_releases() -> str:
    """Every row of the release table (engine/adapters/releases.json): the family each release
    resolves to, the date and figures of the bench run that earned it, or what is missing; a
    release the bench adds appears here at the next build."""
    from engine.adapters.release_table import load
    from engine.adapters.versions import DEFAULT, KNOWN

    by_version = {r.version: r for r in KNOWN}
    out = ["| vLLM | engine | resolves to | earned | the bench: `off` / the fix | install |",
           "| --- | --- | --- | --- | --- | --- |"]
    for row in load():
        release = by_version.get(row.version)
        if release is None:
            out.append(f"| {row.version} | {row.engine.upper()} | refused: {cell(row.refused)} "
                       f"| – | – | – |")
            continue
        figures = "–"
        bench = row.bench
        if bench is not None and bench.off_max_preemptions is not None:
            figures = (f"{bench.off_max_preemptions} / {bench.fix_max_preemptions} "
                       f"(most preemptions of one request, `{bench.preset}`, {bench.steps} "
                       f"steps, `{bench.fix}`); verify {bench.verify}")
        elif bench is not None:
            fixed = (f"`{bench.fix}` ran {bench.fix_steps:,} steps" if bench.fix_steps
                     else f"`{bench.fix}` aborted")
            figures = (f"aborts at step {bench.off_abort_step:,}; {fixed} (`{bench.preset}`); "
                       f"verify {bench.verify}")
        if bench is not None and bench.load is not None:
            figures += f" (load {bench.load:.1f})"
        install = f"`{release.install}`"
        if release.ci:
            install = f"CI line `{release.extra}`: {install}"
        default = " (default)" if release is DEFAULT else ""
        out.append(f"| {row.version}{default} | {row.engine.upper()} | `{row.family}` | "
                   f"{row.earned or '–'} | {figures} | {cell(install)} |")
    return "\n".join(out)


# ---------------------------------------------------------------------------- the record format
def _comments(lines: list[str], node: ast.AnnAssign) -> str:
    """The field's comment: the one on its line, else the comment block right above it."""
    line = lines[node.lineno - 1]
    if "#" in line.split(":", 1)[-1]:
        tail = line[line.index("#", len(line.split(":", 1)[0])):]
        return tail.lstrip("# ").strip()
    above = []
    k = node.lineno - 2
    while k >= 0 and lines[k].strip().startswith("#"):
        above.insert(0, lines[k].strip().lstrip("# ").strip())
        k -= 1
    return " ".join(above)


def gen_records() -> str:
    """Every record class with its fields and their comments, read from the source (the
    comments are the documentation, and msgspec does not keep them)."""
    import engine.stream.records as records

    path = Path(records.__file__)
    source = path.read_text()
    lines = source.splitlines()
    classes = {n.name: n for n in ast.parse(source).body if isinstance(n, ast.ClassDef)}
    missing = [c for c in RECORD_CLASSES if c not in classes]
    if missing:
        raise PluginError(f"records.py has no class {', '.join(missing)}: update the docs hook")
    out = [*gen_conventions(), "## The records", "",
           f"Schema version **{records.SCHEMA_VERSION}**. Counts are integers from 0 to "
           f"{records.MAX_COUNT:,}, seconds finite from 0 to {records.MAX_SECONDS:g}.", ""]
    for name in RECORD_CLASSES:
        node = classes[name]
        tag = next((ast.literal_eval(k.value) for k in node.keywords if k.arg == "tag"), None)
        title = f"`{name}`" + (f": `\"kind\": \"{tag}\"`" if tag else " (nested)")
        doc = (ast.get_docstring(node) or "").split("\n\n")[0]
        out += [f"### {title}", "", " ".join(doc.split()), "",
                "| field | type | default | meaning |", "| --- | --- | --- | --- |"]
        for item in node.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                default = ast.unparse(item.value) if item.value is not None else "required"
                out.append(f"| `{item.target.id}` | {code(ast.unparse(item.annotation))} | "
                           f"{code(default)} | {cell(_comments(lines, item))} |")
        out.append("")
    out += gen_summary_fields()
    return "\n".join(out)


def gen_conventions() -> list[str]:
    """engine.conventions' docstring after its first paragraph: what every number means."""
    import engine.conventions as conventions

    doc = (conventions.__doc__ or "").split("\n\n", 1)
    if len(doc) < 2:
        raise PluginError("engine/conventions.py's docstring lost its conventions")
    return ["## Numbers: what each one means", "",
            "Decided once, in `engine/conventions.py`, and held on every surface (the screens, "
            "`summary`, `compare`, `export`, the events) by `tests/test_one_number.py`.", "",
            doc[1].split("\n\n", 1)[1].strip(), ""]


def gen_summary_fields() -> list[str]:
    """Summary and V1Summary (what `run` and `summary` print), each field with its comment."""
    import engine.analysis.summary as summary

    path = Path(summary.__file__)
    lines = path.read_text().splitlines()
    classes = {n.name: n for n in ast.parse(path.read_text()).body if isinstance(n, ast.ClassDef)}
    out = ["## The summary", "",
           "What `observatory run` prints at the end and `observatory summary` prints for a "
           "recording (`--json`: the same fields), folded from the records "
           "(`engine/analysis/summary.py`).", ""]
    for name, title in (("Summary", "V0 (`Summary`)"), ("V1Summary", "V1 (`V1Summary`)")):
        out += [f"### {title}", "", "| field | type | meaning |", "| --- | --- | --- |"]
        for item in classes[name].body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                out.append(f"| `{item.target.id}` | {code(ast.unparse(item.annotation))} | "
                           f"{cell(_comments(lines, item))} |")
        out.append("")
    return out


# ------------------------------------------------------------------------------- exit statuses
def gen_exit_status() -> str:
    """The module docstring's table of statuses (checked against ExitStatus) and the error
    classes' statuses."""
    import engine.exit_status as es

    doc = es.__doc__ or ""
    rows: dict[str, list[str]] = {}
    current = None
    for line in doc.splitlines():
        m = re.match(r"^ {4}(\d+|128\+N)\s+(?:([A-Z_]+)\s+)?(.*)$", line)
        if m:
            current = m.group(1)
            rows[current] = [m.group(2) or "", m.group(3)]
        elif current and line.startswith(" " * 8) and line.strip():
            rows[current][1] += " " + line.strip()
        elif not line.strip():
            current = None
    for member in es.ExitStatus:
        if member.value != es.ExitStatus.INTERRUPTED and str(member.value) not in rows:
            raise PluginError(f"exit status {member.name} is not described in exit_status.py")
    out = ["| status | name | when |", "| --- | --- | --- |"]
    for status, (name, text) in rows.items():
        out.append(f"| {status} | {f'`{name}`' if name else ''} | {cell(text)} |")
    out += ["", "Every one-line error is an `ObservatoryError`; its class decides the status:", "",
            "| error | status |", "| --- | --- |"]
    for cls, status in es._FOR_ERROR.items():
        out.append(f"| `{cls.__name__}` | {int(status)} (`{status.name}`) |")
    return "\n".join(out)


# ------------------------------------------------------------------------------- one-line errors
def _message(node: ast.expr) -> str | None:
    """The message a raise site builds, with its run-time parts as ‹name› or …."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
            elif isinstance(value, ast.FormattedValue):
                expr = value.value
                simple = isinstance(expr, (ast.Name, ast.Attribute))
                parts.append(f"‹{ast.unparse(expr)}›" if simple else "…")
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _message(node.left), _message(node.right)
        return (left or "…") + (right or "…") if (left or right) else None
    return None


def error_sites() -> Iterator[tuple[str, str, int, str | None]]:
    """(error class, module path, line, message or None) for every ObservatoryError the
    observatory's code constructs."""
    for package in ("engine", "tui"):
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            for node in ast.walk(tree):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                        and node.func.id in ERROR_CLASSES):
                    message = _message(node.args[0]) if node.args else None
                    yield node.func.id, str(path.relative_to(ROOT)), node.lineno, message


ERROR_ADVICE = {
    "ConfigError": "a flag, a config file, a preset or a setting: the message names the flag "
                   "or `FILE: key` and the allowed values; change that and run again.",
    "RecordingError": "a recording or log that is damaged or unreadable: the message names the "
                      "file and line. `--lenient` reads past a damaged block; a cut file loads "
                      "what was sealed.",
    "PeerError": "the network or the service protocol: check the address, the token file and "
                 "that the other side is an `observatory serve` or `exec --serve` of this "
                 "version.",
    "EngineError": "vLLM could not be built or is missing: the message names the release and "
                   "the install command (`observatory versions`).",
    "ObservatoryError": "anything else the observatory reports in one line.",
}


def gen_errors() -> str:
    """Every one-line error the code can raise, grouped by class, with what to do."""
    by_class: dict[str, list[tuple[str, int, str | None]]] = {c: [] for c in ERROR_CLASSES}
    for cls, path, line, message in error_sites():
        by_class[cls].append((path, line, message))
    total = sum(len(v) for v in by_class.values())
    out = [f"{total} places in `engine/` and `tui/` raise a one-line error. Each ends the "
           "command with `observatory: error: MESSAGE` on stderr and exit status 2 (no "
           "traceback). ‹name› is filled in at run time, … is a computed part.", ""]
    for cls in ERROR_CLASSES:
        sites = by_class[cls]
        if not sites:
            continue
        out += [f"### `{cls}` ({len(sites)})", "", f"What to do: {ERROR_ADVICE[cls]}", ""]
        for path, line, message in sorted(sites, key=lambda s: (s[0], s[1])):
            shown = code(message) if message else "*(a message composed at run time)*"
            out.append(f"- {shown}: `{path}:{line}`")
        out.append("")
    return "\n".join(out)


GENERATORS: dict[str, Callable[[], str]] = {
    "cli": gen_cli, "releases": gen_releases, "presets": gen_presets, "settings": gen_settings,
    "policies": gen_policies,
    "records": gen_records, "exit-status": gen_exit_status, "errors": gen_errors,
    "sweep-heatmap": lambda: gen_sweep_heatmap(),
}


# ----------------------------------------------------------------------- the bench figures
FIGURE = re.compile(r"<!-- figure: ([\w-]+) -->")


def bench_all() -> Any:
    """bench/all.py as a module (stdlib only): its FIGURES, and how a result is rendered."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_all", ROOT / "bench" / "all.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def gen_figure(name: str) -> str:
    """A figure of a bench, from its committed result (bench/results/NAME.json, written by
    `python bench/all.py`): the page shows the data, so it cannot go stale beside it."""
    module = bench_all()
    if name not in {figure.name for figure in module.FIGURES}:
        raise PluginError(f"no bench figure {name!r} in bench/all.py's FIGURES")
    try:
        result = module.read_result(name)
    except (OSError, ValueError) as exc:
        raise PluginError(f"figure {name!r}: no readable bench/results/{name}.json ({exc}): "
                          f"run python bench/all.py --only {name}") from None
    return module.render(result)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Replace each marker with its generated Markdown; an unknown one fails the build."""
    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in GENERATORS:
            raise PluginError(f"{page.file.src_uri}: no generator for marker {name!r}")
        text = GENERATORS[name]()
        if "vllm" in sys.modules:
            raise PluginError(f"generating {name!r} imported vLLM: the docs build must not")
        return text

    markdown = FIGURE.sub(lambda m: gen_figure(m.group(1)), markdown)
    try:
        markdown = facts().render(markdown, keep_markers=False)
    except KeyError as exc:
        raise PluginError(f"{page.file.src_uri}: {exc.args[0]}") from None
    return MARKER.sub(replace, markdown)


def facts() -> Any:
    """docs/facts.py as a module: the figures pages quote from the committed data."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("docs_facts", ROOT / "docs" / "facts.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def gen_sweep_heatmap() -> str:
    """The shipped demo sweep's abort heatmap as `observatory sweep-report` prints it at 80
    columns, from its committed rows (sweeps/demo-cpu-blocks/results.jsonl)."""
    from engine.sweep.report import load, render_terminal

    text = render_terminal(load(str(ROOT / "sweeps" / "demo-cpu-blocks")), color=False,
                           width=80)
    return "```text\n" + text[text.index("abort step (x:"):].rstrip() + "\n```"
