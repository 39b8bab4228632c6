"""The live monitor: the run screen following an engine process, and its control keys."""
