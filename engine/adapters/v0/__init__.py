"""vLLM's V0 engine (0.5.0.post1 to 0.10.2): building an `LLMEngine`, its sim executor, the
scheduler hooks and reading a step's outcome. One `family_*.py` per V0 API family, picked by
engine.adapters.versions."""
