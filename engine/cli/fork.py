"""`observatory fork REC --at STEP --policy P`: re-run a recording on the sim with the fix
switched on before STEP, and say whether it saves the run (engine.analysis.fork). Exit 0 if the
fork does not abort, 3 if vLLM still aborts (as `run`), 2 for bad input."""

from __future__ import annotations

import argparse
import sys

from engine.cli.base import CLISubcommand
from engine.exit_status import ExitStatus, for_run_end
from engine.options import bounded
from engine.safe_text import safe
from engine.spec import MAX_STEP


class Fork(CLISubcommand):
    name = "fork"
    help = "re-run a recording with a policy switched on at a step: would it have saved the run?"
    description = ("Re-run a recording on the sim (its own spec, or for a program's own engine "
                   "its recorded requests and vLLM's settings), equal to it up to STEP, and "
                   "switch to POLICY before STEP runs. Writes the fork as a new recording and "
                   "says whether it aborts, and where its decisions first differ from the "
                   "recording's. Exit 0 if the fork does not abort, 3 if vLLM still aborts.")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("path", metavar="REC", help="a recording")
        parser.add_argument("--at", required=True, type=bounded(int, 0, MAX_STEP, "--at"),
                            metavar="STEP", help="the first step the policy governs")
        parser.add_argument("--policy", required=True, metavar="POLICY",
                            help="the policy from STEP on (off, strict, reserve... on V0; "
                                 "whole-context, skip-and-continue... on V1)")
        parser.add_argument("--max-steps", type=bounded(int, 1, MAX_STEP, "--max-steps"),
                            metavar="N", help="stop the fork after N steps (default: twice the "
                                              "recording's, at least 200 past STEP)")
        parser.add_argument("-o", "--output", metavar="OUT",
                            help="the fork's recording (default: beside REC, "
                                 "REC-fork<STEP>-<POLICY>.jsonl.zst)")

    def cmd(self, args: argparse.Namespace) -> int:
        from engine.analysis.fork import fork_path, plan_fork, run_fork, verdict
        from engine.stream.reader import load

        recording = load(args.path)
        plan = plan_fork(recording, args.at, args.policy, args.max_steps)  # before vLLM loads
        out = args.output or str(fork_path(args.path, plan.at, plan.policy))
        result = run_fork(plan, out, progress=sys.stderr)
        for line in verdict(result):
            sys.stdout.write(safe(line) + "\n")
        sys.stdout.write(f"wrote {out}: `observatory compare {args.path} {out}` and "
                         f"`observatory replay {args.path} {out}` show both\n")
        finished = result.check.finished
        return for_run_end(finished.reason) if finished is not None else ExitStatus.OK
