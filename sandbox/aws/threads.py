"""moto's Step Functions interpreter keeps every thread it starts (one per state evaluated, branch, map
iteration and program) in a module list, TMP_THREADS (LocalStack's, for its shutdown), and never takes
one out. An ended thread that is still referenced keeps its stack mapped: 8 MiB of address space and
what it touched of memory. A 54-day fleet run starts some 30,000 and reached the kernel's limit of
65,530 memory maps ("can't start new thread") with about 6 GB held; so the drill lets ended ones go."""

from __future__ import annotations

from moto.stepfunctions.parser.utils import TMP_THREADS

# Below this many the list is left alone: a drill's own few threads cost nothing, and a look is O(n).
KEPT_WITHOUT_A_LOOK = 256


def release_ended_threads() -> int:
    """Take the interpreter's threads that have run and ended out of its list, joined (at once: they
    ended), and say how many. One not yet started, or still running, stays."""
    if len(TMP_THREADS) < KEPT_WITHOUT_A_LOOK:
        return 0
    # (`_started` is set once the thread runs: before that is_alive() is False too, for a thread
    # that has not begun. Private to threading, and stable since Python 3.0.)
    ended = [thread for thread in list(TMP_THREADS) if thread._started.is_set() and not thread.is_alive()]
    for thread in ended:
        thread.join()
        TMP_THREADS.remove(thread)  # (removed one by one: the interpreter appends from other threads meanwhile)
    return len(ended)
