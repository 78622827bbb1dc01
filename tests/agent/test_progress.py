"""Progress: a tqdm bar on a terminal, a bounded number of plain lines off it."""

from __future__ import annotations

import io
import os

from hypothesis import given
from hypothesis import strategies as st

from rods_agent.console.progress import Progress, is_terminal, write_line


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_off_a_terminal_a_line_per_step_of_a_short_run_with_its_fields():
    out = io.StringIO()
    p = Progress(6, "train rods", "step", stream=out)
    assert p.bar is None
    for i in range(6):
        p.update(reward=f"{i / 10:.3f}", pool=8)
    p.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 6
    assert lines[0].startswith("train rods: 1/6 steps, reward 0.000, pool 8 (")
    assert lines[-1].startswith("train rods: 6/6 steps, reward 0.500, pool 8 (")


@given(total=st.integers(1, 2000), lines=st.integers(1, 50), initial=st.integers(0, 100))
def test_off_a_terminal_at_most_lines_plus_one_and_always_the_end(total, lines, initial):
    initial = min(initial, total - 1)
    out = io.StringIO()
    p = Progress(total, "warm start", "step", initial=initial, lines=lines, stream=out)
    for _ in range(total - initial):
        p.update()
    written = out.getvalue().splitlines()
    assert 1 <= len(written) <= lines + 1
    assert written[-1].startswith(f"warm start: {total}/{total} steps (")


def test_on_a_terminal_a_bar_and_no_lines():
    out = Terminal()
    p = Progress(3, "train rods", "step", initial=1, stream=out)
    assert p.bar is not None and p.bar.n == 1
    p.update(loss="0.100")
    assert p.bar.n == 2 and p.bar.postfix == "loss=0.100"
    p.close()
    assert "train rods: 2/3 steps" not in out.getvalue()  # tqdm's own rendering instead


def _pty(columns: int):
    import fcntl
    import struct
    import termios

    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    return master, os.fdopen(slave, "w")


def test_a_terminal_of_0_columns_is_not_a_terminal():
    for columns, expected in ((0, False), (80, True)):
        master, stream = _pty(columns)
        try:
            assert stream.isatty()
            assert is_terminal(stream) is expected
            p = Progress(4, "train rods", "step", stream=stream)
            assert (p.bar is not None) is expected  # lines instead of a hidden bar
            p.close()
        finally:
            stream.close()
            os.close(master)


def test_log_lines_go_above_a_live_bar_not_through_it():
    out = Terminal()
    p = Progress(3, "train rods", "step", stream=out)
    p.update(reward="0.100")
    write_line("rods train: step 0 update: score 0.11 s, step 0.52 s", out)
    p.close()
    lines = out.getvalue().replace("\r", "\n").splitlines()
    assert "rods train: step 0 update: score 0.11 s, step 0.52 s" in lines
