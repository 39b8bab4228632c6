"""Which releases `--releases` names: a comma-separated list of versions and ranges
(`0.24.0,0.29.0`, `0.18.0..0.34.0`), read against the release table
(engine/adapters/releases.json). A range takes every release the table resolves in it and
names the ones it refuses (with why) so the table can say what it left out; a release named
alone that the table refuses or does not know is an error, in one line."""

from __future__ import annotations

from dataclasses import dataclass

from engine.adapters.release_table import numbers
from engine.adapters.versions import KNOWN, REFUSED, Release
from engine.errors import ConfigError


@dataclass(frozen=True)
class Selection:
    releases: tuple[Release, ...]  # oldest first, each once
    left_out: tuple[tuple[str, str], ...]  # (version, why) of refused releases a range spanned


def _key(version: str) -> tuple[int, ...]:
    return (numbers(version) + (0, 0, 0, 0))[:4]


def _one(version: str) -> Release:
    found = next((r for r in KNOWN if r.version == version), None)
    if found is not None:
        return found
    if version in REFUSED:
        raise ConfigError(f"--releases: vLLM {version} is refused by the release table: "
                          f"{REFUSED[version]}")
    raise ConfigError(f"--releases: vLLM {version} is not in the release table "
                      f"(known: {KNOWN[0].version} to {KNOWN[-1].version}; `observatory "
                      f"versions` lists them; a new release: python3.11 bench/v1_releases.py "
                      f"{version})")


def select(text: str) -> Selection:
    """The releases `text` names, oldest first; ConfigError for a bad or unknown one."""
    chosen: dict[str, Release] = {}
    left_out: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        if ".." in part:
            low, _, high = part.partition("..")
            if not low or not high:
                raise ConfigError(f"--releases: {part!r}: a range is LOW..HIGH, e.g. "
                                  f"0.18.0..0.34.0")
            lo, hi = _key(low), _key(high)
            if lo > hi:
                raise ConfigError(f"--releases: {part!r}: the range ends before it starts")
            inside = [r for r in KNOWN if lo <= _key(r.version) <= hi]
            if not inside:
                raise ConfigError(f"--releases: no release the table resolves lies in {part}")
            chosen.update((r.version, r) for r in inside)
            left_out.update((v, why) for v, why in REFUSED.items() if lo <= _key(v) <= hi)
        else:
            release = _one(part)
            chosen[release.version] = release
    if not chosen:
        raise ConfigError("--releases: name at least one release, e.g. 0.24.0,0.29.0 or "
                          "0.18.0..0.34.0")
    ordered = tuple(sorted(chosen.values(), key=lambda r: _key(r.version)))
    return Selection(ordered, tuple(sorted(left_out.items(), key=lambda kv: _key(kv[0]))))
