"""What a person at a terminal types and sees, for every command and library loop.

:mod:`~rods_agent.console.options` derives command-line options from dataclass fields (the
engines and the commands declare their settings once); :mod:`~rods_agent.console.progress`
reports long loops: a bar on a terminal, plain lines off it, a snapshot file for a parent
process (``rods experiment``).
"""
