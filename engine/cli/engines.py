"""`observatory engines --connect HOST:PORT`: the engines behind an `observatory exec --serve`
hub, one line each (the name `live --connect --engine` takes, its engine kind and pid)."""

from __future__ import annotations

import argparse

from engine.cli.base import CLISubcommand


class Engines(CLISubcommand):
    name = "engines"
    help = "list the engines an `observatory exec --serve` hub can show"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--connect", metavar="HOST:PORT", required=True,
                            help="the hub's address (exec printed it)")
        parser.add_argument("--token-file", metavar="FILE",
                            help="file holding the token (default: $OBSERVATORY_TOKEN)")

    def cmd(self, args: argparse.Namespace) -> int:
        from engine.stream.client import client_token, list_engines

        engines = list_engines(args.connect, client_token(args.token_file))
        if not engines:
            print("no engine yet: the command has not built one")
        for info in engines:
            print(f"{info.name}  {info.engine or '?'}  pid {info.pid}")
        return 0
