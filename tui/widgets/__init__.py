"""Widgets every screen shares: status, banner, plots, tables, footer, dialogs."""
