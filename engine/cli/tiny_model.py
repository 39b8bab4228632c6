"""`observatory tiny-model DIR`: write a tiny model directory (config, a locally trained
tokenizer, optionally random weights) with nothing downloaded, for `vllm serve DIR` on the sim
executor and for tests that drive vLLM's real servers with real clients (engine/tiny_model.py)."""

from __future__ import annotations

import argparse
import sys

from engine.cli.base import CLISubcommand
from engine.exit_status import ExitStatus


class TinyModel(CLISubcommand):
    name = "tiny-model"
    help = "write a tiny model directory (config, tokenizer, optional random weights), offline"
    description = ("Write a tiny model directory with nothing downloaded: a 2-layer config, a "
                   "byte-level BPE tokenizer trained here (with a chat template) and, with "
                   "--weights, random fp16 weights. `vllm serve DIR --distributed-executor-"
                   "backend engine.SimExecutor` then serves it on a CPU-only machine.")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        from engine.tiny_model import ARCHS

        parser.add_argument("dir", metavar="DIR", help="a new (or empty) directory to write")
        parser.add_argument("--arch", choices=ARCHS, default="llama",
                            help="the model architecture (default: llama)")
        parser.add_argument("--weights", action="store_true",
                            help="also write random fp16 weights (model.safetensors; needs "
                                 "torch and transformers), for a real forward pass")

    def cmd(self, args: argparse.Namespace) -> int:
        from engine.tiny_model import write_tiny_model

        model = write_tiny_model(args.dir, arch=args.arch, weights=args.weights)
        sys.stdout.write(model.describe() + "\n")
        return ExitStatus.OK
