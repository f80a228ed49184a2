#!/usr/bin/env python3
"""Waits until the server on 127.0.0.1:PORT answers GET /health with 200 (its countdown reached
launch); exits 1 if process PID ends first (a countdown that fails ends it).

    python3 bench/wait_healthy.py PORT PID

As a module: wait_healthy(port, alive) with `alive()` telling whether the server still runs.
"""
import http.client
import os
import sys
import time


def wait_healthy(port, alive):
    """True once /health answers 200; False when `alive()` turns false first."""
    while alive():
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                return True
        except OSError:
            pass
        time.sleep(0.5)
    return False


def pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False


if __name__ == "__main__":
    port, pid = int(sys.argv[1]), int(sys.argv[2])
    if not wait_healthy(port, lambda: pid_alive(pid)):
        sys.exit("the server exited during its countdown")
