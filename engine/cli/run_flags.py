"""The run flags: one per RunSpec field, generated from the field's declaration
(engine/options.py, engine/spec.py), plus --config and the recording flags; and the RunSpec a
command line asks for. Shared by `run`, `serve`, `sweep`, `fit` and the TUI's `live`.
"""

from __future__ import annotations

import argparse

from engine import options
from engine.errors import ConfigError
from engine.kinds import kind_of
from engine.spec import ANY_ENGINE_PRESETS, RunSpec, preset_engine, resolve_spec


def add_run_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per RunSpec field, --config and the recording flags. Defaults are None ("not
    given") so presets and config files can supply their own."""
    g = parser.add_argument_group("workload and engine (RunSpec fields; engine/spec.py)")
    g.add_argument("--config", metavar="FILE", help="TOML file of RunSpec fields; flags win")
    options.add_flags(RunSpec, g)
    r = parser.add_argument_group("recording")
    r.add_argument("--record", metavar="PATH",
                   help="record to PATH ('-' = stdout); default runs/<time>-<preset>-"
                        "<policy>.jsonl.zst")
    r.add_argument("--no-record", action="store_true", help="do not record")


def add_pace_flag(parser: argparse.ArgumentParser, default: str = "0"
                  ) -> None:
    """--pace: steps per second for a run a person watches (`live`, `serve`). Wall clock only
    (engine.session's `pace`), so not a RunSpec field: recordings and `verify` never see it.
    The value is None when the flag is not given, so a command can pick its own default."""
    parser.add_argument("--pace", type=options.bounded(float, 0, None, "--pace"), default=None,
                        metavar="STEPS_PER_S",
                        help="hold the engine to this many steps per second so that a sim run "
                             "can be followed and steered (0: as fast as it goes); decisions "
                             f"are unchanged (default {default})")


def default_preset() -> str:
    """seed-5578, or on vLLM's V1 engine (which has no swap space) v1-thrash."""
    from engine.adapters.versions import installed_version, release_for

    release = release_for(installed_version())
    return kind_of(release.engine if release is not None else None).default_preset


def require_preset_engine(spec: RunSpec) -> None:
    """Refuse, in one line naming the install command, a preset made for the other engine kind
    than the installed vLLM runs (a V1 preset on 0.5.0.post1 ran on V0 without a word)."""
    from engine.adapters.versions import SUPPORTED, installed_version, release_for

    if spec.preset in ANY_ENGINE_PRESETS:
        return
    release = release_for(installed_version())
    wanted = preset_engine(spec.preset)
    if release is None or release.engine == wanted:
        return
    other = next(r for r in SUPPORTED if r.extra == kind_of(wanted).reference_extra)
    raise ConfigError(f"preset {spec.preset} is made for vLLM's {wanted.upper()} engine, and "
                      f"this environment's vLLM {release.version} runs {release.engine.upper()}:"
                      f" install a {wanted.upper()} release in another environment, e.g. "
                      f"`{other.install}` (`observatory versions` lists them), or use a "
                      f"{release.engine.upper()} preset")


def spec_from_args(args: argparse.Namespace) -> RunSpec:
    """Preset, then config file, then flags. Raises ConfigError (one line) on bad input."""
    given = options.values_from_args(RunSpec, args)
    if "num_cpu_blocks" in given and "swap_space_gib" in given:
        raise ConfigError("give --num-cpu-blocks or --swap-space, not both")
    layers = [(args.config, options.load_config(RunSpec, args.config))] if args.config else []
    # the default preset depends on the engine kind (a layer's `preset` overrides it)
    spec = resolve_spec([("default", {"preset": default_preset()}), *layers,
                         ("flags", given)]).validated()
    require_preset_engine(spec)
    from engine.traces import source

    source.check(spec)  # a missing, unreadable or unrecognised trace fails here, before vLLM
    return spec  # loads; the run resolves it once (path, format, sha256: engine.session)


def record_target(args: argparse.Namespace, spec: RunSpec) -> str | None:
    """Where --record/--no-record say to record: a path, '-' (stdout), or None."""
    if args.no_record:
        return None
    if args.record:
        return args.record
    from engine.stream.recorder import default_recording_path

    return str(default_recording_path(spec))
