"""Replay of one recording, and the A/B replay of two under one cursor."""
