"""`observatory sweep`: run a grid of RunSpecs on Ray, one headless session per cell, and report
where each policy aborts. Nothing here imports Ray or vLLM at module level: `observatory --help`
and `sweep-report` stay fast."""
