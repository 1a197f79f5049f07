"""The ``callid`` console script: Ctrl-C is taken as "interrupted" from its first moment, then the
command line (:mod:`callid.cli`, whose imports take a while) runs."""

from __future__ import annotations

import signal
import sys

from callid_core.atomic import Interrupt, on_interrupt


def main() -> None:
    signal.signal(signal.SIGINT, on_interrupt)
    try:
        from callid.cli import main as command_line

        command_line()
    except Interrupt:  # (before the command line took over, or after it let go)
        print("callid: interrupted", file=sys.stderr)
        sys.exit(130)
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # (done: a Ctrl-C now changes nothing)
