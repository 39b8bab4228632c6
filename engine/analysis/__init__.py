"""What is computed from a record stream: summaries, comparisons, exports and verification."""
