"""The record stream of one run: its typed records, the recorder that writes it to disk, the
reader that loads or follows it, and the transport that carries it between processes."""
