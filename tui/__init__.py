"""The observatory's Textual UI: the live monitor, replay and compare screens.

Everything here renders from `tui.run_view.RunView`; the engine is reached only through
`engine.session.Session` and recordings only through `engine.stream.reader`.
"""
