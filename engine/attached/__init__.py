"""Watching engines that someone else's program builds and drives: `observatory exec`,
`engine.attach`, `engine.ObservedScheduler` (engine.attached.api). vLLM's names stay in
engine/adapters/<kind>/attach.py."""
