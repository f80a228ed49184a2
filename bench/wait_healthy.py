#!/usr/bin/env python3
"""Waits until the server on 127.0.0.1:PORT answers GET /health with 200 (its countdown reached
launch); exits 1 if process PID ends first (a countdown that fails ends it).

    python3 bench/wait_healthy.py PORT PID
"""
import http.client
import os
import sys
import time

port, pid = int(sys.argv[1]), int(sys.argv[2])
while True:
    try:
        os.kill(pid, 0)
    except OSError:
        sys.exit("the server exited during its countdown")
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        c.request("GET", "/health")
        if c.getresponse().status == 200:
            break
    except OSError:
        pass
    time.sleep(0.5)
