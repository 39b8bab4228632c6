"""`observatory live` (also a bare `observatory`): the live monitor, on an engine it starts or
on an `observatory serve` it attaches to (--connect)."""

from __future__ import annotations

import argparse

from engine.cli.run_flags import add_pace_flag, add_run_flags, spec_from_args
from engine.errors import ConfigError
from engine.host.attention import HOLD_S
from engine.kinds import kind_of
from engine.options import bounded
from tui.cli.base import TUISubcommand, add_reference_flags, need_terminal

DEFAULT_WINDOW = 2000
MAX_WINDOW = 1_000_000  # steps of plot history kept in memory per series
V1_SIM_PACE = 300  # steps/s: v1-thrash's 9,486 steps run in 1.5 s unpaced, in 33 s at this pace
SIM_PACE = {"v0": 0, "v1": V1_SIM_PACE}
"""Each kind's default pace on the sim (0: as fast as it goes; a V0 sim run lasts long enough)."""


class Live(TUISubcommand):
    name = "live"
    help = "open the live monitor (the default command)"
    fast_exit = True

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_run_flags(parser)
        add_pace_flag(parser, f"{V1_SIM_PACE} on the V1 engine's sim, whose runs are over "
                              "in a second or two; else 0: as fast as it goes")
        parser.add_argument("--hold", type=bounded(float, 0, 3600, "--hold"), default=HOLD_S,
                            metavar="SECONDS",
                            help="on the sim, pause this long at the first sign of trouble "
                                 "(the first swapped group on V0; the first preemption, a "
                                 "stall or an under-filled step on V1) while the policy is "
                                 "off, so that f is in time; any key that acts on the engine "
                                 "goes on at once (0: never hold; decisions are unchanged; "
                                 f"default {HOLD_S:g})")
        parser.add_argument("--window", type=bounded(int, 10, MAX_WINDOW, "--window"),
                            default=DEFAULT_WINDOW,
                            help=f"steps shown in the live plots (default {DEFAULT_WINDOW})")
        add_reference_flags(parser)
        attach = parser.add_argument_group("attach to a running `observatory serve`")
        attach.add_argument("--connect", metavar="HOST:PORT",
                            help="watch and steer a server's run instead of starting an engine")
        attach.add_argument("--token-file", metavar="FILE",
                            help="file holding the server's token (default: "
                                 "$OBSERVATORY_TOKEN)")
        attach.add_argument("--engine", metavar="HOST/PID/INDEX",
                            help="behind `observatory exec --serve`: the engine to watch "
                                 "(default the newest; `observatory engines --connect` lists "
                                 "them)")

    def cmd(self, args: argparse.Namespace) -> int:
        from tui.launch import live

        need_terminal()
        overlay = {"reference": args.reference, "reference_offset": args.reference_offset,
                   "reference_engine": args.reference_engine}
        if args.connect:
            if args.pace:
                raise ConfigError("--pace sets the engine's speed, which runs in the server: "
                                  "give it to `observatory serve`, not to live --connect")
            target = (args.connect, read_token(args)) + ((args.engine,) if args.engine else ())
            return live(None, window=args.window, connect=target, **overlay)
        spec = spec_from_args(args)
        record = None if args.no_record else (args.record or "auto")
        pace = default_pace(spec) if args.pace is None else args.pace
        # live() refuses --record - itself
        return live(spec, record, window=args.window, pace=pace or None,
                    hold_s=args.hold or None, **overlay)


def default_pace(spec) -> float:
    """The pace when --pace is not given: V1_SIM_PACE for the V1 engine on the sim (so that
    there is time to watch the thrash and switch the fix), else as fast as it goes (a V0 sim run
    lasts long enough to follow, and a GPU runs at its own speed)."""
    from engine.adapters.versions import installed_version, release_for

    release = release_for(installed_version())
    kind = kind_of(release.engine if release is not None else None).name
    return float(SIM_PACE[kind]) if spec.backend == "sim" else 0.0


def read_token(args: argparse.Namespace) -> str:
    """The shared secret for --connect: --token-file, else $OBSERVATORY_TOKEN."""
    from engine.stream.client import client_token

    token = client_token(args.token_file)
    if not token:
        raise ConfigError("--connect needs the server's token: --token-file FILE (serve "
                          "prints the token, or writes it with its own --token-file) or "
                          "$OBSERVATORY_TOKEN")
    return token
