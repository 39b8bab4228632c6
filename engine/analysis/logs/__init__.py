"""Import real vLLM V0 logs: find the records in a messy log, read their fields by key, and turn
them into a reference recording (`observatory import-log`).

clean.py normalizes text into logical lines (ANSI, `\\r`, prefixes, hard wraps, `$` cuts);
stats.py finds the stats records; events.py the other records (preemptions, config, blocks,
tqdm, the abort, V1 logs); timeline.py puts them on one time axis; importer.py writes the
recording.
"""
