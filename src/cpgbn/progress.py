"""Progress of long work (sweeps, minibatches, downloads): every progress bar of cpgbn is made
by :func:`progress_bar`, so that one rule decides how progress is shown.

* stderr (or the bar's ``file``) is a terminal: a tqdm bar (``tqdm.auto``), as before;
* it is not (a log file, a pipe, ``nohup``, CI): plain lines, one at most every
  :data:`INTERVAL` seconds, for example::

      fit: sweep 0/200 (0%), started
      fit: sweep 40/200 (20%), 01:12 elapsed, ~04:48 left, docs/s=512, loss=1.42e+04
      fit: sweep 200/200 (100%), 06:01 elapsed, done, docs/s=498, loss=1.38e+04

  a line when the work starts, then at most one per interval (after a step that ends at least
  that long after the previous line), and a final line when the bar closes ("done", or
  "stopped" when the work ended before its total); the bar's postfix (``set_postfix``) ends
  each line, and a download's lines give bytes and the rate (``12.0MB/30.0MB (40%)``);
* progress off (``progress=False``, ``--quiet``): nothing.

The environment variable ``CPGBN_PROGRESS_INTERVAL`` (seconds, a number >= 0) replaces
:data:`INTERVAL`; 0 writes a line after every step (the tests use it).  A value that is not a
number >= 0 is ignored.

tqdm does the bookkeeping (counts, elapsed time, the smoothed rate and time left, the
formatting of numbers and clock times, ``mininterval`` for the time between lines); what tqdm
does not offer is a line mode: its bar rewrites one line with ``\\r`` (a log file gets one
endless line) and, given a stream that is not a terminal, it either writes that anyway or
nothing at all (``disable=None``).  ``LineBar`` adds it, by overriding tqdm's
``display`` (the hook tqdm's documentation names for other front ends) and ``close``.
"""

from __future__ import annotations

import os
import sys

__all__ = ["INTERVAL", "INTERVAL_VARIABLE", "progress_bar", "line_interval"]

#: Seconds between two progress lines when the stream is not a terminal.
INTERVAL = 30.0
#: The environment variable that replaces :data:`INTERVAL` (seconds).
INTERVAL_VARIABLE = "CPGBN_PROGRESS_INTERVAL"


def line_interval() -> float:
    """The seconds between two progress lines: ``$CPGBN_PROGRESS_INTERVAL``, else
    :data:`INTERVAL`."""
    value = os.environ.get(INTERVAL_VARIABLE, "").strip()
    try:
        seconds = float(value)
    except ValueError:
        return INTERVAL
    return seconds if seconds >= 0 and seconds != float("inf") else INTERVAL


def is_terminal(stream) -> bool:
    """Whether ``stream`` is a terminal (False for a closed stream, or one without
    ``isatty``)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def progress_bar(*, total, initial: int = 0, desc: str = "", unit: str = "it",
                 enabled: bool = True, file=None, **tqdm_options):
    """A progress bar (``update(n)``, ``set_postfix``, ``close``, a context manager) of
    ``total`` steps (None: unknown), ``initial`` of them done, labelled ``desc``; written to
    ``file`` (default: ``sys.stderr`` as it is now).

    ``enabled`` False: a disabled tqdm bar (it writes nothing).  Else, when ``file`` is a
    terminal, the tqdm bar ``tqdm.auto.tqdm(..., **tqdm_options)``; otherwise a
    ``LineBar`` (module docstring), which takes the same options but writes lines.
    """
    stream = sys.stderr if file is None else file
    options = dict(total=total, initial=initial, desc=desc, unit=unit, **tqdm_options)
    if file is not None:
        options["file"] = file
    if not enabled:
        from tqdm import tqdm
        return tqdm(disable=True, **options)
    if is_terminal(stream):
        from tqdm.auto import tqdm
        return tqdm(disable=False, **options)
    # a line is no terminal: no width, no cursor moves, a line at most every interval;
    # miniters=1 (not tqdm's adaptive miniters) so that the time alone decides when
    options.update(file=stream, mininterval=line_interval(), miniters=1,
                   dynamic_ncols=False, ncols=None)
    return _line_bar_class()(**options)


_LINE_BAR = None


def _line_bar_class():
    """``LineBar``, defined on first use (importing tqdm costs start-up time)."""
    global _LINE_BAR
    if _LINE_BAR is None:
        from tqdm import tqdm

        class LineBar(tqdm):
            """A tqdm bar that writes a plain line (``"\\n"``-terminated, no ``"\\r"``) each
            time tqdm would redraw it, and a final line when it closes (module docstring)."""

            # tqdm's monitor thread redraws a bar that waits long between updates; a line
            # bar writes at updates only
            monitor_interval = 0

            def line(self, final: bool = False) -> str:
                """The line that describes the bar now (the final one with ``final``)."""
                stats = self.format_dict
                stats["ncols"] = None   # no trimming to a terminal's width
                scaled = bool(stats["unit_scale"])   # bytes: 1.20MB/30.0MB, and a rate
                counts = "{n_fmt}{unit}" if scaled else "{unit} {n_fmt}"
                if self.total:
                    counts += ("/{total_fmt}{unit}" if scaled else "/{total_fmt}") \
                        + " ({percentage:.0f}%)"
                rate = ", {rate_fmt}" if scaled else ""
                if final:
                    stats["rate"] = None   # the average over the whole run, not the recent one
                    done = not self.total or self.n >= self.total
                    tail = ", {elapsed} elapsed, " + ("done" + rate if done else "stopped")
                elif self.n == self.initial:
                    tail = ", started"
                elif self.total:
                    tail = ", {elapsed} elapsed, ~{remaining} left"
                else:
                    tail = ", {elapsed} elapsed" + rate
                stats["bar_format"] = ("{desc}: " if self.desc else "") + counts + tail \
                    + "{postfix}"
                return self.format_meter(**stats)

            def _write_line(self, text: str) -> None:
                self.fp.write(text + "\n")
                getattr(self.fp, "flush", lambda: None)()

            def display(self, msg=None, pos=None):
                if msg is not None:   # a request to clear or replace the bar: not for lines
                    return False
                if self.total and self.n >= self.total:
                    return False   # the end: the final line (close) says it
                self._write_line(self.line())
                return True

            def close(self):
                if not getattr(self, "disable", True) and hasattr(self, "sp"):
                    with self._lock:
                        self._write_line(self.line(final=True))
                self.leave = False   # tqdm's close would otherwise write the bar once more
                super().close()

        LineBar.__module__ = __name__
        _LINE_BAR = LineBar
    return _LINE_BAR
