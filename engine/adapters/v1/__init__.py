"""vLLM's V1 engine (0.11+; the supported line is 0.33.0): the real `LLMEngine` and its
in-process `EngineCore`, `Scheduler` and `KVCacheManager`, with a model-free executor on the sim
backend. One module per job: the process environment a sim engine needs (platform.py), the sim
executor (sim_executor.py), building the engine (build.py), the scheduler hooks and policies
(hooks.py, over the private names of the 0.33 API family in family_v033.py), the step record
(step_record.py) and the Session's driver (driver.py)."""
