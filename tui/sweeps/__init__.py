"""Browsing a sweep's cells and replaying one."""
