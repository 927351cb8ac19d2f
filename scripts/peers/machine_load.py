"""How busy the rest of this machine is, for the peer benchmarks: a timing
is only meaningful on an otherwise idle machine, so each script records the
load beside it and can wait for a quiet moment first."""

import os
import time


def busy_seconds():
    """CPU seconds spent busy by the whole machine (all processes), from
    /proc/stat; with our own CPU time it tells how much else ran meanwhile
    (the timings are only meaningful on an otherwise idle machine)."""
    try:
        with open("/proc/stat") as fh:
            v = [int(s) for s in fh.readline().split()[1:]]
        return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return float("nan")



def wait_idle(max_wait, probe=3.0, threshold=0.15):
    """Waits (at most max_wait seconds) until the rest of the machine keeps
    less than `threshold` cores busy over `probe` seconds; returns that load."""
    t_end = time.perf_counter() + max_wait
    while True:
        b0, c0 = busy_seconds(), time.process_time()
        time.sleep(probe)
        load = max(0.0, (busy_seconds() - b0 - (time.process_time() - c0)) / probe)
        if load < threshold or time.perf_counter() >= t_end:
            return load
