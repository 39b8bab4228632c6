"""`observatory releases`: one workload through the real scheduler of many vLLM releases.

- `select`: which releases a `--releases` list or range names, from the release table;
- `venvs`: one uv venv per release, built once into a cache directory outside the clone and
  keyed like .ci/venv (what decides its contents), reused after;
- `runs`: one release's headless `observatory run` in its venv (a subprocess), as a Ray task
  or in this process;
- `table`: the runs side by side, and where each release's decisions first part from the
  previous one's (engine.analysis.divergence), in 80 columns.
"""
