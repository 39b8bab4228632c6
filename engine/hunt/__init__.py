"""`observatory hunt`: search the installed release's real scheduler for bugs.

One small module per job: `generate` draws a random workload and engine settings from a seed
(`case` holds them: RunSpec fields and the Mooncake-style trace rows the run replays), `runner`
runs one on the sim with every detector (`detectors`, and the KV audit in engine/adapters/),
`shrink` makes a hit smaller while the same detector still fires, `bundle` writes the repro,
`pool` spreads workloads over Ray workers that keep vLLM imported (or runs them here), and
`report` prints the summary. The generator never reads engine/spec.py's PRESETS: what it finds,
it finds from its own draws.
"""
