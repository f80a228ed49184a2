#!/usr/bin/env python3
"""The replicated arrangement on host boosters: `rocket front ENGINE --replicas 2` spawns two tiny host
engines and routes over them. Checks, in order:
  refusals of `rocket front`'s command line, and a front whose one replica is unreachable
      (/health 503 "down", requests 503 no_replica, SIGTERM exit 0);
  (a) cache affinity: requests sharing a long system prompt with an earlier one land on its replica
      (the front's affinity counter), and the third resumes there from the branch point the second
      captured (usage cached_tokens > 0); the replicas' prefix reports say so directly, and need the
      api key (forwarded to every replica as a launch flag), whose 401 the front passes through;
  (b) unrelated concurrent streamed requests spread over both replicas, each stream relayed whole;
      a client that hangs up (mid-stream, or waiting for a whole answer) cancels the generation on its
      replica;
  /metrics carries each replica's series labelled, the summed counters, and the front's own;
  (c) SIGKILL of the replica running a request: the request is retried on the other and succeeds,
      /health shows the dead one down, later requests still succeed;
  (d) SIGTERM on the front with a stream in flight: the stream finishes, new requests get 503, the
      front and its replicas exit, the front with 0.

    replicated.py ROCKET ENGINE_DIR WORK
"""
import http.client
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time

import verdicts
from verdicts import bad, check, free_port, ok

rocket, engine, work = sys.argv[1:4]
model = os.path.basename(engine.rstrip("/"))


KEY = "replicated-test-key"
AUTH = {"Content-Type": "application/json", "Authorization": "Bearer " + KEY}


def request(port, method, path, body=None, timeout=120, headers=AUTH):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def get_json(port, path):
    status, data = request(port, "GET", path)
    return status, json.loads(data)


def chat(system, user, max_tokens, stream=False, seed=1):
    msgs = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": user}]
    return {"model": model, "messages": msgs, "max_tokens": max_tokens, "temperature": 1.0, "seed": seed,
            "stream": stream}


def front_counter(port, name, replica):
    _, text = request(port, "GET", "/metrics")
    key = f'{name}{{replica="{replica}"}} '
    for line in text.decode().splitlines():
        if line.startswith(key):
            return float(line[len(key):])
    return None


def stats(port):
    return get_json(port, "/stats")[1]["replicas"]


rng = random.Random(11)
words = "replica front route cache prefix page token shared system rule booster engine".split()


def text(n):
    return " ".join(rng.choice(words) for _ in range(n))


# ---- refusals on the command line (no engine starts: `rocket` checks the flags before it hands over) ----
for args, why in [([], "no replica set"), (["--replicas", "2", "--replica", "http://127.0.0.1:1"], "both replica sets"),
                  (["--replicas", "2", "--bogus-flag"], "a flag neither the front's nor launch's"),
                  (["--replica", "http://127.0.0.1:1", "--queue", "4"], "launch flags without spawned replicas"),
                  (["--replicas", "0"], "zero replicas")]:
    r = subprocess.run([rocket, "front", engine] + args, capture_output=True, text=True, timeout=30)
    check(r.returncode == 2 and r.stderr.strip(), f"rocket front refuses {why}: exit 2", (r.returncode, r.stderr))

# ---- a front none of whose replicas is up: /health 503 "down", requests 503 no_replica ----
dead = free_port()
port = free_port()
lone = subprocess.Popen([rocket, "front", engine, "--replica", f"http://127.0.0.1:{dead}", "--port", str(port),
                         "--startup-timeout", "1", "--health-interval", "0.1"], stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL)
try:
    deadline = time.time() + 20
    h = None
    while time.time() < deadline:
        try:
            st, h = get_json(port, "/health")
            if h["status"] == "down":
                break
        except (OSError, ValueError):
            pass
        time.sleep(0.1)
    check(h and st == 503 and h["status"] == "down" and h["replicas"][0]["status"] == "unreachable",
          "a front with its only replica unreachable: /health 503 down", h)
    st, data = request(port, "POST", "/v1/completions", {"model": model, "prompt": "x", "max_tokens": 2})
    e = json.loads(data).get("error", {})
    check(st == 503 and e.get("code") == "no_replica" and e.get("type") == "server_error",
          "a request with no replica in rotation: 503 no_replica in OpenAI's shape", (st, data[:200]))
    lone.send_signal(signal.SIGTERM)
    check(lone.wait(timeout=20) == 0, "that front drains on SIGTERM and exits 0")
finally:
    if lone.poll() is None:
        lone.kill()
        lone.wait()

port = free_port()
with open(os.path.join(work, "keys"), "w") as f:
    f.write(f"# the replicas' key, forwarded to every replica as a launch flag\n{KEY}\n")
log = open(os.path.join(work, "front.log"), "w")
front = subprocess.Popen([rocket, "front", engine, "--replicas", "2", "--port", str(port), "--health-interval", "0.2",
                          "--drain-timeout", "120", "--queue", "16", "--api-key-file", os.path.join(work, "keys")],
                         stdout=log, stderr=subprocess.STDOUT)


def dump_log():
    if not log.closed:
        log.flush()
    print(open(os.path.join(work, "front.log")).read()[-4000:])


try:
    deadline = time.time() + 90
    health = None
    while time.time() < deadline:
        if front.poll() is not None:
            dump_log()
            sys.exit(f"FAIL the front exited {front.returncode} during startup")
        try:
            status, health = get_json(port, "/health")
            if status == 200 and health["replicas_up"] == 2:
                break
        except (OSError, ValueError):
            pass
        time.sleep(0.2)
    else:
        dump_log()
        sys.exit(f"FAIL the front never had both replicas up: {health}")
    pids = [r["pid"] for r in health["replicas"]]
    ports = [int(r["url"].rsplit(":", 1)[1]) for r in health["replicas"]]
    check(len(set(pids)) == 2 and len(set(ports)) == 2, "front spawned two replica processes on their own ports",
          health)

    # ---- (a) cache affinity ----
    system = f"Affinity test {rng.getrandbits(64):x}. " + text(900)
    routed0 = [front_counter(port, "rocket_front_routed_total", i) for i in (0, 1)]
    cached = []
    for n in range(3):
        status, data = request(port, "POST", "/v1/chat/completions", chat(system, f"Question {n}: " + text(400), 2))
        if not check(status == 200, f"affinity request {n}: 200", data[:300]):
            break
        cached.append(json.loads(data)["usage"]["prompt_tokens_details"]["cached_tokens"])
    routed = [front_counter(port, "rocket_front_routed_total", i) - routed0[i] for i in (0, 1)]
    home = 0 if routed[0] >= routed[1] else 1
    affinity = front_counter(port, "rocket_front_affinity_total", home)
    check(routed[home] == 3 and routed[1 - home] == 0, "three requests sharing a system prompt ran on one replica",
          f"routed {routed}")
    check(affinity == 2, "the second and third were routed for the cached prefix", f"affinity {affinity}")
    check(len(cached) == 3 and cached[0] == 0 and cached[2] > 0,
          "the third resumed from the branch point the second captured there", f"cached tokens {cached}")

    # The replicas' own reports, as the front reads them: the key is required, the home replica holds
    # the system prompt, the other nothing.
    probe = chat(system, "Question 9: " + text(50), 2)
    st, data = request(ports[home], "POST", "/prefix/v1/chat/completions", probe,
                       headers={"Content-Type": "application/json"})
    check(st == 401 and json.loads(data)["error"]["code"] == "invalid_api_key", "prefix report without the key: 401",
          (st, data[:200]))
    reports = [json.loads(request(p, "POST", "/prefix/v1/chat/completions", probe)[1]) for p in ports]
    check(reports[home]["cached_tokens"] >= 256 and reports[home]["resumable_tokens"] > 0 and
          reports[1 - home]["cached_tokens"] == 0 and reports[home]["prompt_tokens"] == reports[1 - home]["prompt_tokens"],
          "prefix reports: the home replica holds the system prompt, the other nothing", reports)
    st, data = request(port, "POST", "/v1/chat/completions", probe, headers={"Content-Type": "application/json"})
    check(st == 401, "a request without the key: the replica's 401 passed through the front", (st, data[:200]))
    # /v1/responses is routed the same way: its instructions are the system prompt the home replica holds.
    before_home = front_counter(port, "rocket_front_routed_total", home)
    st, data = request(port, "POST", "/v1/responses", {"model": model, "instructions": system,
                                                       "input": "Question 10: " + text(50), "max_output_tokens": 2})
    check(st == 200 and json.loads(data)["usage"]["input_tokens_details"]["cached_tokens"] >= 256 and
          front_counter(port, "rocket_front_routed_total", home) == before_home + 1,
          "a /v1/responses request went to the replica holding its instructions' prefix", (st, data[:300]))

    # ---- (b) unrelated requests spread by load; streams relayed whole ----
    before = [front_counter(port, "rocket_front_routed_total", i) for i in (0, 1)]
    outs = [None] * 4

    def stream(i):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        c.request("POST", "/v1/chat/completions", body=json.dumps(chat(None, f"Unrelated {i} {text(30)}", 48, True, i)),
                  headers=AUTH)
        r = c.getresponse()
        outs[i] = (r.status, r.getheader("Content-Type"), r.read().decode())

    threads = [threading.Thread(target=stream, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    spread = [front_counter(port, "rocket_front_routed_total", i) - before[i] for i in (0, 1)]
    check(spread[0] >= 1 and spread[1] >= 1 and sum(spread) == 4, "four unrelated requests spread over both replicas",
          f"routed {spread}")
    good = 0
    for st, ctype, body in outs:
        lines = [l for l in body.split("\n") if l.startswith("data: ")]
        chunks = [json.loads(l[6:]) for l in lines if l != "data: [DONE]"]
        if (st == 200 and ctype.startswith("text/event-stream") and lines and lines[-1] == "data: [DONE]" and
                chunks[-1]["choices"][0]["finish_reason"] in ("stop", "length")):
            good += 1
    check(good == 4, "every stream relayed through the front to its [DONE]", [o[:2] for o in outs])

    # A client that hangs up, mid-stream or while a whole answer is generated: its replica cancels the
    # generation.
    def hang_up(stream, label):
        cancelled0 = sum(r["stats"]["cancelled"] for r in stats(port))
        s = socket.create_connection(("127.0.0.1", port))
        body = json.dumps(chat(None, "Hang up " + text(20), 1800, stream, 5)).encode()
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Authorization: Bearer " + KEY.encode() + b"\r\n"
                  b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        if stream:
            got = b""
            while b'"content"' not in got:
                more = s.recv(4096)
                if not more:
                    break
                got += more
        else:
            deadline = time.time() + 20
            while time.time() < deadline and not any(r["stats"]["active"] for r in stats(port)):
                time.sleep(0.02)
        s.close()
        deadline = time.time() + 10
        while time.time() < deadline and sum(r["stats"]["cancelled"] for r in stats(port)) == cancelled0:
            time.sleep(0.1)
        check(sum(r["stats"]["cancelled"] for r in stats(port)) == cancelled0 + 1,
              f"a client hanging up {label} cancels the request on its replica")

    hang_up(True, "mid-stream")
    hang_up(False, "on a non-streamed request")

    # ---- /metrics ----
    _, m = request(port, "GET", "/metrics")
    m = m.decode()
    lines = m.splitlines()
    per = [l for l in lines if l.startswith("rocket_") and 'replica="0"' in l]
    types = [l for l in lines if l.startswith("# TYPE ")]
    check(len(per) > 5 and any('replica="1"' in l for l in lines), "/metrics: each replica's series labelled")
    check(len(types) == len(set(types)), "/metrics: one TYPE line per family")
    counters = {l.split()[2] for l in types if l.split()[3] == "counter" and not l.split()[2].startswith("rocket_front")}

    def total(name, replica=None):
        # The sample lines of a family: labelled by replica, or the summed ones (no replica label).
        s = 0.0
        for l in lines:
            if not l.startswith(name + "{") and not l.startswith(name + " "):
                continue
            has = 'replica="' in l
            if (replica is None and not has) or (replica is not None and f'replica="{replica}"' in l):
                s += float(l.rsplit(" ", 1)[1])
        return s

    sums_match = [c for c in counters if abs(total(c) - total(c, 0) - total(c, 1)) < 1e-6]
    check(counters and len(sums_match) == len(counters) and any(total(c) > 0 for c in counters),
          "/metrics: every counter summed over the replicas", sorted(set(counters) - set(sums_match)))
    check("rocket_front_failovers_total" in m and "rocket_front_replica_up" in m, "/metrics: the front's own series")
    lint = subprocess.run(["promtool", "check", "metrics"], input=m, capture_output=True, text=True)
    check(lint.returncode == 0, "/metrics: promtool check metrics passes", lint.stdout[-600:] + lint.stderr[-600:])

    # ---- (c) failover: SIGKILL of the replica running a request ----
    victim = home
    survivor = 1 - victim
    result = {}

    def long_whole():
        result["r"] = request(port, "POST", "/v1/chat/completions", chat(system, "Long " + text(50), 400), timeout=120)

    t = threading.Thread(target=long_whole)
    t.start()
    deadline = time.time() + 20
    while time.time() < deadline:
        st, rs = get_json(ports[victim], "/stats")
        if rs.get("active", 0) > 0:
            break
        time.sleep(0.02)
    os.kill(pids[victim], signal.SIGKILL)
    t.join()
    st, data = result["r"]
    check(st == 200 and json.loads(data)["choices"][0]["message"]["content"] is not None,
          "a request whose replica was killed under it was retried on the other and answered", (st, data[:300]))
    check(front_counter(port, "rocket_front_failovers_total", victim) == 1, "the front counted the failover")
    # The front sees the death at its next health probe (--health-interval 0.2): wait for /health to say
    # so rather than for a time (the deadline only bounds a front that never notices).
    deadline = time.time() + 20
    while True:
        status, h = get_json(port, "/health")
        if h["replicas_up"] == 1 or time.time() > deadline:
            break
        time.sleep(0.05)
    rep = h["replicas"]
    check(status == 200 and h["replicas_up"] == 1 and not rep[victim]["healthy"] and "signal 9" in rep[victim]["status"]
          and rep[survivor]["status"] == "ok", "/health: ok with the killed replica shown down", h)
    codes = [request(port, "POST", "/v1/completions", {"model": model, "prompt": f"After {i} " + text(10),
                                                       "max_tokens": 4})[0] for i in range(4)]
    check(codes == [200] * 4, "requests after the kill all succeed on the survivor", codes)

    # ---- (d) drain ----
    out = {}

    # ignore_eos: the stream is exactly 400 tokens, still running when the front logs its drain.
    def drain_stream():
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        c.request("POST", "/v1/chat/completions",
                  body=json.dumps(chat(None, "Drain " + text(10), 400, True, 9) | {"ignore_eos": True}), headers=AUTH)
        r = c.getresponse()
        out["first"] = r.readline()
        out["rest"] = (out["first"] + r.read()).decode()

    t = threading.Thread(target=drain_stream)
    t.start()
    deadline = time.time() + 20
    while "first" not in out and time.time() < deadline:
        time.sleep(0.02)
    t0 = time.time()
    front.send_signal(signal.SIGTERM)
    # Routing stops before the front logs its drain: from that line on a new request is refused.
    deadline = time.time() + 20
    while "[front] draining" not in open(os.path.join(work, "front.log")).read() and time.time() < deadline:
        time.sleep(0.02)
    check("rest" not in out, "the stream was still in flight when the front began its drain")
    try:
        st, data = request(port, "POST", "/v1/completions", {"model": model, "prompt": "late", "max_tokens": 2})
        check(st == 503 and json.loads(data)["error"]["code"] == "shutting_down", "a new request while draining: 503",
              (st, data[:200]))
    except OSError as e:
        bad(f"a new request while draining: {e}")
    t.join()
    lines = [l for l in out.get("rest", "").split("\n") if l.startswith("data: ")]
    check(lines and lines[-1] == "data: [DONE]" and "finish_reason\":\"" in lines[-2],
          "the stream in flight at SIGTERM finished", out.get("rest", "")[-300:])
    try:
        rc = front.wait(timeout=30)
    except subprocess.TimeoutExpired:
        rc = "timeout"
    check(rc == 0, f"SIGTERM: the front exited 0 after {time.time() - t0:.1f} s", rc)
    alive = []
    for p in pids:
        try:
            os.kill(p, 0)
            alive.append(p)
        except OSError:
            pass
    check(not alive, "no replica outlives the front", alive)
finally:
    if front.poll() is None:
        front.kill()
        front.wait()
    log.close()

if verdicts.failures:
    dump_log()
print(f"replicated: {verdicts.failures} failure(s)")
sys.exit(1 if verdicts.failures else 0)
