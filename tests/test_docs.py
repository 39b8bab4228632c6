"""The front door and the documentation site stay true to the code.

README.md is the front door: at most 250 lines, the install and test commands on its first
screen, every relative link resolving, every supported release in its table. The site
(mkdocs.yml, docs/) is built with `mkdocs build --strict`, as CI builds it, into a temporary
directory; its reference pages are generated from the code (docs/hooks/reference.py), and these
tests read the built HTML against what the code says independently: the subcommands and flags
`observatory --help` and each `observatory CMD --help` print, every record field msgspec
knows, every exit status, preset and policy.

The build tests skip where MkDocs is not installed (the vLLM venvs); CI runs them in the docs
venv (`bash .ci/venv docs`).
"""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def readme_lines() -> list[str]:
    return README.read_text().splitlines()


def slug(heading: str) -> str:
    """GitHub's anchor for a heading (lowercase, punctuation dropped, spaces to dashes)."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_readme_is_a_short_front_door():
    lines = readme_lines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines: move detail into docs/"
    first_screen = "\n".join(lines[:40])
    assert "pip install -e '.[vllm050,test]'" in first_screen  # the install command
    assert re.search(r"^pytest\b", first_screen, re.M)  # the test command


def test_readme_links_resolve():
    text = README.read_text()
    anchors = {slug(line.lstrip("#")) for line in text.splitlines() if line.startswith("#")}
    checked = 0
    for target in LINK.findall(text):
        if re.match(r"^[a-z]+:", target):
            continue  # https:, mailto:
        path, _, anchor = target.partition("#")
        if not path:
            assert anchor in anchors, f"README.md links to #{anchor}, which no heading makes"
        else:
            assert (ROOT / path).exists(), f"README.md links to {path}, which does not exist"
        checked += 1
    assert checked >= 10  # the docs links are there


def test_readme_lists_every_supported_release():
    from engine.adapters.versions import SUPPORTED

    rows = [line for line in readme_lines() if line.startswith("| ")]
    for release in SUPPORTED:
        row = next((r for r in rows if r.startswith(f"| {release.version} ")), None)
        assert row is not None, f"README.md's release table has no row for {release.version}"
        assert f"'.[{release.extra},test]'" in row
        assert f"| {release.engine.upper()} |" in row


# ------------------------------------------------------------------------------- the built site
@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("mkdocs", reason="MkDocs is not installed (the docs extra)")
    pytest.importorskip("material", reason="mkdocs-material is not installed (the docs extra)")
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stderr[-4000:]}"
    return out


def page_text(site: Path, page: str) -> str:
    """A built page's text, tags stripped and entities decoded."""
    raw = (site / page / "index.html").read_text()
    return html.unescape(re.sub(r"<[^>]+>", "", raw))


def help_subcommands(top_help: str) -> list[str]:
    """The subcommands `observatory --help` lists (argparse's indented choices)."""
    return re.findall(r"^    ([a-z][a-z-]+)(?:\s|$)", top_help, re.M)


def help_flags(sub_help: str) -> set[str]:
    """Every option string in one `observatory CMD --help`'s listing (its invocation column)."""
    flags = set()
    for line in sub_help.splitlines():
        m = re.match(r"^  (-[^ ].*?)(?:\s{2,}|$)", line)
        if m:
            for invocation in m.group(1).split(", "):
                flags.add(invocation.split()[0])
    return flags


def documented_flags(site: Path, names: list[str]) -> dict[str, set[str]]:
    """Per subcommand, the option strings in the first cell of its section's argument tables
    (not merely somewhere in its usage line or a help text)."""
    raw = (site / "reference" / "cli" / "index.html").read_text()
    marks = sorted((raw.index(f'<h2 id="observatory-{name}"'), name) for name in names)
    found: dict[str, set[str]] = {}
    for k, (start, name) in enumerate(marks):
        part = raw[start:(marks[k + 1][0] if k + 1 < len(marks) else len(raw))]
        found[name] = set()
        for first_cell in re.findall(r"<tr>\s*<td><code>(.*?)</code></td>", part):
            for invocation in html.unescape(first_cell).split(", "):
                if invocation.startswith("-"):
                    found[name].add(invocation.split()[0])
    return found


def test_cli_reference_lists_every_subcommand_and_flag(site: Path):
    from engine.cli.registry import build_parser
    from tui.cli.registry import SUBCOMMANDS

    parser, sub = build_parser(SUBCOMMANDS)
    names = help_subcommands(parser.format_help())  # what `observatory --help` prints
    assert set(names) == {s.name for s in SUBCOMMANDS}
    documented = documented_flags(site, names)
    total = 0
    for name in names:
        flags = help_flags(sub.choices[name].format_help())  # `observatory NAME --help`
        assert "--help" in flags
        assert documented[name] == flags, (
            f"the CLI reference's {name} section: missing {sorted(flags - documented[name])}, "
            f"not in --help {sorted(documented[name] - flags)}")
        total += len(flags)
    assert total > 100  # the run flags alone are dozens


def test_record_reference_lists_every_field(site: Path):
    import msgspec

    from engine.stream import records

    text = page_text(site, "reference/records")
    body = text.index("Schema version")  # past the table of contents
    for cls in (records.Header, records.StepRecord, records.V1StepRecord, records.Check,
                records.Index, records.RunFinished, records.EngineAborted):
        start = text.index(f'{cls.__name__}: "kind"', body)
        end = text.find("¶", text.index("¶", start) + 1)  # the next heading's permalink
        part = text[start:end]
        for field in msgspec.structs.fields(cls):
            assert field.name in part, f"records page lacks {cls.__name__}.{field.name}"


def test_reference_lists_presets_policies_and_exit_statuses(site: Path):
    from engine.exit_status import ExitStatus
    from engine.policy import POLICY_NAMES
    from engine.spec import PRESETS

    presets = page_text(site, "reference/presets")
    for name in (*PRESETS, *POLICY_NAMES):
        assert name in presets
    statuses = page_text(site, "reference/exit-status")
    for status in ExitStatus:
        if status is not ExitStatus.INTERRUPTED:
            assert f"{int(status)}{status.name}" in re.sub(r"\s", "", statuses)
    assert "128+N" in statuses


def test_troubleshooting_lists_the_one_line_errors(site: Path):
    text = page_text(site, "troubleshooting")
    count = int(re.search(r"(\d+) places in engine/ and tui/ raise", text).group(1))
    raised = 0
    for path in [*(ROOT / "engine").rglob("*.py"), *(ROOT / "tui").rglob("*.py")]:
        raised += len(re.findall(r"\b(?:Config|Recording|Peer|Engine)Error\(", path.read_text()))
    assert count >= 150 and abs(count - raised) <= raised // 10  # the AST's count, near grep's
    # a message with its fix, as the code writes it
    assert "the gpu backend needs a CUDA device and none was found: use --backend sim" in text
