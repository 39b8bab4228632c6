"""Import real vLLM logs, V0 and V1: find the records in a messy log, read their fields by key,
and turn them into a reference recording (`observatory import-log`).

clean.py normalizes text into logical lines (ANSI, `\\r`, prefixes, hard wraps, `$` cuts);
stats.py finds the stats records (V0's and V1's); events.py the other records (preemptions,
config, blocks, tqdm, the abort); timeline.py puts them on one time axis; importer.py writes
the recording; v1windows.py computes a V1 run's windows as V1's logger does.
"""
