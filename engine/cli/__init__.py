"""The `observatory` command line, headless half: one module per subcommand, each a
`CLISubcommand` (engine/cli/base.py; model: vLLM's `vllm/entrypoints/cli/`), registered once in
engine/cli/registry.py. tui/cli/ adds the subcommands that open the Textual app and is the
console script; imports run tui.cli -> engine.cli -> the rest of engine, never back.

- base.py: CLISubcommand, the one-line parser, exit statuses, flags several commands share.
- run_flags.py: the RunSpec flags (generated from engine/spec.py) and the spec they ask for.
- run.py, serve.py (with hosting.py), summary.py, compare.py, export.py, verify.py,
  import_log.py, fit.py, sweep.py, sweep_report.py, versions.py: one subcommand each.
"""

from engine.cli.registry import build_parser, dispatch, main
from engine.cli.run_flags import add_run_flags, spec_from_args

__all__ = ["add_run_flags", "build_parser", "dispatch", "main", "spec_from_args"]
