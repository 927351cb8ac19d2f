"""How busy the rest of this machine is, for the peer benchmarks: a timing
is only meaningful on an otherwise idle machine, so each script records the
load beside it and can wait for a quiet moment first."""

import os
import resource
import subprocess
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


def run_timed(cmd, env, wait=0.0, retries=0):
    """Runs `cmd` (after waiting up to `wait` seconds for an idle machine;
    again, at most `retries` times, when other processes were busy during
    it); returns its completed process and the cores other processes used
    meanwhile."""
    retries = retries if wait > 0 else 0
    while True:
        if wait > 0:
            print(f"machine load before the run: {wait_idle(wait):.2f} cores", flush=True)
        b0, w0 = busy_seconds(), time.perf_counter()
        c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        res = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
        c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        ours = (c1.ru_utime - c0.ru_utime) + (c1.ru_stime - c0.ru_stime)
        others = max(0.0, (busy_seconds() - b0 - ours) / (time.perf_counter() - w0))
        if others < 0.1 or retries <= 0:
            return res, others
        retries -= 1
        print(f"other processes used {others:.2f} cores during the run: again", flush=True)
