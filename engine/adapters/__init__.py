"""Everything that touches vLLM: building an engine, the sim executor, the scheduler hooks and
reading a step's outcome. Nothing outside this package knows vLLM's private names
(tests/test_architecture.py checks it)."""
