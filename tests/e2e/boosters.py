#!/usr/bin/env python3
"""Issue 27 on host boosters: the co-activation profile, the expert order and split placement the
compiler takes from it, and the rocket's boosters in the plan (launch, front and handshake). In order:
  (a) a tiny fuel forged with a biased router (--router-groups: every token of every MoE layer goes to
      exactly one of four groups of four experts) is profiled over tests/e2e/boosters_corpus.jsonl:
      group members have equal frequencies, pairs inside a group co-activate as often as the group is
      chosen, pairs across groups never; the corpus' bad lines are refused naming the line;
  (b) built with that profile, each layer's blob order is the groups, most chosen first, members by
      id (compiler/placement.h's rule); built split over 2 boosters, every chosen group sits on one
      booster, each booster holds 8 experts within the load bound; the reordered engine and the split
      one decode the identity engine's tokens exactly; the standard tiny fuel split over 4 boosters
      without a profile decodes the one-booster engine's tokens and passes HF parity;
  (c) the standard tiny fuel built with the biased fuel's profile (another fuel of its shape): the
      build says so and stays correct (its HF parity and its greedy tokens are the identity engine's);
      a profile of another shape (8 layers) is refused;
  (d) a default build (and one with --boosters 1 --arrangement replicated) writes the plan builds
      wrote before boosters existed, byte for byte (tests/fixtures/plans/tiny_host_bf16.json);
  (e) the split engine over 4 boosters serves concurrent streams the one-booster engine's greedy text
      and /metrics shows its exchange (all_to_all time, each link's bytes in whole rows); a split plan
      refuses to be fronted; a plan of 2 replicated boosters is fronted by 2 replicas by default (handshakes admitted,
      a request served, drain exit 0) and refuses --replicas 3; the front refuses replicas whose
      handshake differs from its plan (max_context), naming the field and both values; GET /handshake
      reports the plan's identity and the fuel fingerprint the profile recorded.

    boosters.py ROCKET E2E_WORK TESTS_DIR
"""
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import verdicts
from verdicts import bad, check, free_port, ok

rocket, e2e, tests = sys.argv[1:4]
work = os.path.join(e2e, "boosters")
tiny_fuel = os.path.join(e2e, "fuels", "tiny-bf16")
tiny_engine = os.path.join(e2e, "engines", "tiny-bf16")
golden = os.path.join(tests, "golden", "tiny_bf16.json")
tolerance = open(os.path.join(tests, "golden", "tiny.tolerance")).read().strip()
corpus = os.path.join(tests, "e2e", "boosters_corpus.jsonl")
GROUPS = [[1, 4, 9, 12], [2, 6, 10, 15], [0, 3, 5, 7], [8, 11, 13, 14]]


def at(*parts):
    return os.path.join(work, *parts)


def run(*args, timeout=900):
    return subprocess.run([rocket, *args], capture_output=True, text=True, timeout=timeout)


def must(r, what):
    if r.returncode != 0:
        print(r.stdout[-3000:], r.stderr[-3000:])
        sys.exit(f"FAIL {what}: exit {r.returncode}")
    return r


def build(name, fuel, *flags):
    return name, run("build", fuel, "--booster", "host", "--out", at(name), "--force", *flags)


def build_all(*jobs):
    """Engine builds compile one g++ each: two at a time on CI's two cores."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        for name, r in pool.map(lambda j: build(*j), jobs):
            must(r, f"build {name}")
            yield name, r


def plan_of(name):
    return json.load(open(at(name, "plan.json")))


def expect_refusal(what, pattern, r):
    check(r.returncode not in (0, None) and pattern in r.stderr, f"{what}: refused naming it", (r.returncode, r.stderr))


def generate(engine, prompt):
    r = must(run("generate", engine, "--prompt", prompt, "--max-tokens", "24"), f"generate on {engine}")
    return r.stdout


PROMPTS = ["The rocket lifted off", "Mixture of experts routes each token", "1 2 3 4 5"]


def get(port, path, timeout=10):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request("GET", path)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def post(port, path, body, timeout=120):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def wait_health(port, proc, seconds=90):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            return None
        try:
            status, data = get(port, "/health", timeout=2)
            if status == 200:
                return json.loads(data)
        except (OSError, ValueError):
            pass
        time.sleep(0.2)
    return None


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
    return proc.wait()


os.makedirs(work, exist_ok=True)
groups_arg = ";".join(",".join(str(e) for e in g) for g in GROUPS)
must(run("forge", "--fuel", "tiny", "--format", "bf16", "--seed", "3", "--router-groups", groups_arg, "--out",
         at("fuels", "biased"), "--force"), "forge the biased fuel")
must(run("forge", "--fuel", "tiny", "--format", "bf16", "--seed", "1", "--out", at("fuels", "config"), "--config-only",
         "--force"), "forge a config-only tiny")
must(run("forge", "--fuel", "tiny", "--format", "bf16", "--seed", "1", "--layers", "8", "--out", at("fuels", "deep"),
         "--config-only", "--force"), "forge a config-only 8-layer tiny")
expect_refusal("forge: an odd number of router groups", "come in pairs",
               run("forge", "--fuel", "tiny", "--router-groups", "0,1,2,3", "--out", at("fuels", "odd"), "--force"))
expect_refusal("forge: a router group larger than top_k", "1 to top_k = 4",
               run("forge", "--fuel", "tiny", "--router-groups", "0,1,2,3,4;5,6", "--out", at("fuels", "big"), "--force"))

list(build_all(("biased", at("fuels", "biased")),
               ("default", at("fuels", "config"), "--no-weights"),
               ("default-explicit", at("fuels", "config"), "--no-weights", "--boosters", "1", "--arrangement", "replicated"),
               ("replicated2", tiny_fuel, "--boosters", "2"),
               ("context1k", tiny_fuel, "--max-context", "1024")))

# ---- (a) the profile of a biased router ----
profile = at("biased.coactivation.json")
r = must(run("profile", at("biased"), "--corpus", corpus, "--out", profile, "--max-tokens", "4"), "profile")
p = json.load(open(profile))
check(p["rocket_coactivation_version"] == 1 and p["fuel"]["experts"] == 16 and p["fuel"]["layers"] == 4 and
      p["fuel"]["top_k"] == 4 and p["corpus"]["entries"] == 11, "the profile names its fuel's shape and corpus", p["fuel"])
tokens = p["corpus"]["tokens"]


def pair(layer, a, b):
    a, b = min(a, b), max(a, b)
    return layer["pairs"][a][b - a - 1]


group_freq = []  # [layer][group]
for layer in p["layers"]:
    f = layer["frequency"]
    check(layer["tokens"] == tokens and sum(f) == 4 * tokens, f"layer {layer['layer']}: {tokens} tokens, 4 experts each")
    g_freq = [f[g[0]] for g in GROUPS]
    group_freq.append(g_freq)
    check(all(f[e] == f[g[0]] for g in GROUPS for e in g) and sum(g_freq) == tokens,
          f"layer {layer['layer']}: every token chose exactly one group, all of it: {g_freq}", f)
    check(all(pair(layer, a, b) == f[g[0]] for g in GROUPS for a in g for b in g if a < b),
          f"layer {layer['layer']}: members of a group co-activate as often as the group is chosen")
    check(all(pair(layer, a, b) == 0 for i, g in enumerate(GROUPS) for h in GROUPS[i + 1:] for a in g for b in h),
          f"layer {layer['layer']}: experts of different groups never co-activate")
    check(sum(1 for x in g_freq if x > 0) >= 3, f"layer {layer['layer']}: the corpus reaches at least 3 groups", g_freq)

with open(at("bad_corpus.jsonl"), "w") as f:
    f.write("plain text is fine\n{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"prompt\": \"both\"}\n")
expect_refusal("profile: an entry with both messages and prompt", "bad_corpus.jsonl:2",
               run("profile", at("biased"), "--corpus", at("bad_corpus.jsonl"), "--out", at("bad.json")))
with open(at("bad_corpus.jsonl"), "w") as f:
    f.write("\n\n{\"messages\": [}\n")
expect_refusal("profile: malformed JSON", "bad_corpus.jsonl:3",
               run("profile", at("biased"), "--corpus", at("bad_corpus.jsonl"), "--out", at("bad.json")))

# ---- (b) order and placement from it; the reordered engine decodes the same tokens ----
# The documented rule on this profile: the most chosen group first, its members by id (they tie in
# everything); then, nothing co-activating with the last one, the most chosen group left; groups no
# token chose end it, their experts by id.
def expected_order(g_freq):
    chosen = sorted((i for i in range(4) if g_freq[i] > 0), key=lambda i: (-g_freq[i], min(GROUPS[i])))
    order = [e for i in chosen for e in sorted(GROUPS[i])]
    return order + sorted(e for i in range(4) if g_freq[i] == 0 for e in GROUPS[i])


built = dict(build_all(("ordered", at("fuels", "biased"), "--coactivation", profile),
                       ("split", at("fuels", "biased"), "--boosters", "2", "--arrangement", "split", "--coactivation", profile),
                       ("other", tiny_fuel, "--coactivation", profile, "--golden", golden),
                       ("split4", tiny_fuel, "--boosters", "4", "--arrangement", "split")))
ordered = plan_of("ordered")
for l, units in enumerate(ordered["expert_order"]["units"]):
    order = sorted(range(16), key=lambda e: units[e])
    check(order == expected_order(group_freq[l]), f"layer {l}: the blob order is the groups by use, {order}",
          expected_order(group_freq[l]))
check(ordered["expert_order"]["source"] == os.path.abspath(profile), "the plan names the profile it ordered from")
check("boosters" not in ordered, "one booster: no boosters entry")

split = plan_of("split")
b = split["boosters"]
check(b["count"] == 2 and b["arrangement"] == "split" and len(b["placement"]) == 4, "split over 2 boosters", b.get("count"))
for l, on in enumerate(b["placement"]):
    sets = [set(x) for x in on]
    intact = all(any(set(g) <= s for s in sets) for i, g in enumerate(GROUPS) if group_freq[l][i] > 0)
    load = [sum(group_freq[l][i] for i, g in enumerate(GROUPS) for e in g if e in s) for s in sets]
    check(all(len(s) == 8 for s in sets) and intact and max(load) <= 1.1 * sum(load) / 2,
          f"layer {l}: each chosen group on one booster, 8 experts each, loads {load} within the bound", on)
    units = split["expert_order"]["units"][l]
    check([e for x in on for e in x] == sorted(range(16), key=lambda e: units[e]),
          f"layer {l}: booster 0's experts are units 0..7, booster 1's 8..15")
check(b["exchange"]["decode_rows"] == 32 * 4 and b["exchange"]["row_bytes"] == 128 * 4 and
      0 < b["residency"] < split["arena_bytes"], "the split plan records the exchange and one booster's residency", b["exchange"])
inspect = run("inspect", at("split")).stdout
check("2 x host, split" in inspect and "each holds 8 of 16 experts" in inspect, "inspect shows the arrangement",
      inspect[:800])

one_booster = {}
for prompt in PROMPTS:
    want = generate(at("biased"), prompt)
    check(generate(at("ordered"), prompt) == want, f"the reordered blob decodes the identity order's tokens: {prompt!r}")
    check(generate(at("split"), prompt) == want, f"the split engine over 2 boosters decodes them too: {prompt!r}")
    one_booster[prompt] = generate(tiny_engine, prompt)
    check(generate(at("split4"), prompt) == one_booster[prompt],
          f"split over 4 boosters without a profile decodes the one-booster engine's tokens: {prompt!r}")
r = subprocess.run([at("split4", "bin", "rocket-engine"), "parity", "--golden", golden, "--tolerance", tolerance],
                   capture_output=True, text=True, timeout=900)
check(r.returncode == 0, "the split engine over 4 boosters passes HF parity", r.stdout[-600:] + r.stderr[-600:])

# ---- (c) a profile of another fuel of the shape; of another shape; h200 ----
note = built["other"].stderr
check("recorded from another fuel of this shape" in note and "only loses locality" in note,
      "the build says the profile is another fuel's", note[-600:])
this_fuel = re.search(r"\(this fuel: ([0-9a-f]{16})\)", note)
for prompt in PROMPTS:
    check(generate(at("other"), prompt) == generate(tiny_engine, prompt),
          f"another fuel's order decodes this fuel's tokens: {prompt!r}")
r = subprocess.run([at("other", "bin", "rocket-engine"), "parity", "--golden", golden, "--tolerance", tolerance],
                   capture_output=True, text=True, timeout=900)
check(r.returncode == 0, "the engine in another fuel's order passes HF parity", r.stdout[-600:] + r.stderr[-600:])
expect_refusal("a profile of another shape", "another fuel shape",
               run("build", at("fuels", "deep"), "--booster", "host", "--out", at("deep"), "--no-weights",
                   "--coactivation", profile))
check(not os.path.exists(at("deep")), "the refused build left nothing behind")
expect_refusal("split over a count that does not divide the experts", "do not divide evenly",
               run("build", at("fuels", "config"), "--booster", "host", "--out", at("split3"), "--no-weights",
                   "--boosters", "3", "--arrangement", "split"))
expect_refusal("split over one booster", "N >= 2",
               run("build", at("fuels", "config"), "--booster", "host", "--out", at("split1"), "--no-weights",
                   "--arrangement", "split"))

# ---- (d) the default plan is the plan before boosters ----
fixture = open(os.path.join(tests, "fixtures", "plans", "tiny_host_bf16.json")).read()
for name in ("default", "default-explicit"):
    text = open(at(name, "plan.json")).read().replace(json.dumps(os.path.abspath(at("fuels", "config"))), '"/fuels/tiny"')
    check(text == fixture, f"{name}: plan.json byte for byte the plan before boosters")

# ---- (e) launch, generate and front of the arrangements ----
# The split engine serves: concurrent streams (their rows owned by both boosters) get the one-booster
# engine's greedy text, and /metrics shows the exchange: all_to_all time and each link's bytes.
port = free_port()
log = open(at("split.log"), "w")
engine = subprocess.Popen([rocket, "launch", at("split4"), "--port", str(port), "--step-sample", "1"], stdout=log,
                          stderr=subprocess.STDOUT)
try:
    check(wait_health(port, engine) is not None, "the split engine launches (static fire included)")
    body = lambda p: {"model": "split4", "prompt": p, "max_tokens": 24, "temperature": 0}
    with ThreadPoolExecutor(max_workers=len(PROMPTS)) as pool:
        answers = list(pool.map(lambda p: post(port, "/v1/completions", body(p)), PROMPTS))
    texts = [json.loads(d)["choices"][0]["text"] if s == 200 else None for s, d in answers]
    # `rocket generate` prints the prompt, its completion and a newline.
    check([p + (t or "") + "\n" for p, t in zip(PROMPTS, texts)] == [one_booster[p] for p in PROMPTS],
          "concurrent streams on the split engine get the one-booster engine's greedy text", (texts, one_booster))
    status, data = get(port, "/metrics")
    text = data.decode()
    def sample(name):
        m = re.search("^" + re.escape(name) + r" ([0-9.e+-]+)$", text, re.M)
        return float(m.group(1)) if m else None
    links = [(f, t) for f in range(4) for t in range(4) if f != t]
    carried = [sample(f'rocket_exchange_link_step_bytes{{from="{f}",to="{t}"}}') for f, t in links]
    check((sample('rocket_step_seconds_count{kind="all_to_all"}') or 0) >= 1 and
          (sample('rocket_step_seconds_sum{kind="all_to_all"}') or 0) > 0, "/metrics: sampled steps measure all_to_all")
    check(all(c is not None for c in carried) and sum(carried) > 0 and
          all(c % (128 * 4) == 0 for c in carried), "/metrics: every link's bytes, whole 512-byte rows", carried)
    check((sample("rocket_exchange_bytes_per_step_count") or 0) >= 1, "/metrics: bytes exchanged per step")
finally:
    check(stop(engine) == 0, "the split engine drains on SIGTERM and exits 0")
    log.close()
expect_refusal("fronting a split plan", "not replicas for a front", run("front", at("split"), "--port", str(free_port())))
expect_refusal("fronting 3 replicas of a 2-booster plan", "a rocket of 2 replicated boosters; fronting 3 replicas",
               run("front", at("replicated2"), "--replicas", "3", "--port", str(free_port())))
check(plan_of("replicated2")["boosters"] == {"count": 2, "arrangement": "replicated"}, "a 2-booster plan records them")

port = free_port()
log = open(at("front.log"), "w")
front = subprocess.Popen([rocket, "front", at("replicated2"), "--port", str(port), "--health-interval", "0.2"],
                         stdout=log, stderr=subprocess.STDOUT)
try:
    health = wait_health(port, front)
    check(health is not None and health["replicas_up"] == 2, "a 2-booster plan is fronted by 2 replicas by default", health)
    if health:
        status, data = post(port, "/v1/completions", {"model": "replicated2", "prompt": "The rocket", "max_tokens": 4})
        check(status == 200 and json.loads(data)["choices"][0]["text"], "the front serves a request", data[:300])
        replica = int(health["replicas"][0]["url"].rsplit(":", 1)[1])
        status, data = get(replica, "/handshake")
        h = json.loads(data) if status == 200 else {}
        plan = plan_of("replicated2")
        check(h.get("chemistry") == plan["fingerprint"] and h.get("boosters") == 2 and h.get("booster") == "host" and
              h.get("alignment") == 65536 and h.get("kv_page_tokens") == plan["kv_cache"]["page_tokens"] and
              h.get("device_count") == 1 and h.get("nccl_version") == "none" and len(h.get("plan_fingerprint", "")) == 16,
              "GET /handshake reports the plan's identity and constants and the booster", h)
finally:
    check(stop(front) == 0, "the front drains on SIGTERM and exits 0")
    log.close()

# Replicas launched from two plans, fronted by one of them.
procs = []
try:
    ports = []
    for name in (tiny_engine, at("context1k")):
        ports.append(free_port())
        procs.append(subprocess.Popen([rocket, "launch", name, "--port", str(ports[-1])], stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL))
    for port_, proc in zip(ports, procs):
        check(wait_health(port_, proc) is not None, f"replica on {port_} launched")
    status, data = get(ports[0], "/handshake")
    check(status == 200 and this_fuel and json.loads(data)["fuel_fingerprint"] == this_fuel.group(1),
          "the replica's fuel fingerprint, read from its blob, is the one the compiler read from the fuel", data[:200])
    urls = [a for port_ in ports for a in ("--replica", f"http://127.0.0.1:{port_}")]
    r = run("front", tiny_engine, *urls, "--port", str(free_port()), "--health-interval", "0.1", timeout=120)
    check(r.returncode == 1 and "max_context: 1024 on replica 1, 2048 in the plan of" in r.stderr and
          "the front does not launch" in r.stderr,
          "a front refuses a replica whose plan constants differ, naming the field and both values", r.stderr[-800:])
    r = run("front", at("context1k"), "--replica", f"http://127.0.0.1:{ports[0]}", "--port", str(free_port()),
            "--health-interval", "0.1", timeout=120)
    check(r.returncode == 1 and "max_context: 2048 on replica 0, 1024 in the plan of" in r.stderr,
          "... and one whose plan is not the front's", r.stderr[-800:])
finally:
    for proc in procs:
        stop(proc)

print(f"boosters: {verdicts.failures} failure(s)")
sys.exit(1 if verdicts.failures else 0)
