// Telemetry end to end on the tiny bf16 host engine, with the real parts: Debian's Prometheus scrapes
// the server on loopback while distinct requests run and is queried over its HTTP API; promtool checks
// a scrape; the series count stays the same over many distinct requests (bounded cardinality); and the
// OTLP/HTTP JSON spans reach a receiver here, which rebuilds every span as the OpenTelemetry JS SDK
// would and checks that the SDK's own JSON serializer (@opentelemetry/otlp-transformer) writes it
// exactly as Rocket did (ids, timestamps, attribute value shapes), then checks the GenAI attributes
// and that a client's traceparent is continued.
//   node telemetry.mjs ROCKET WORK
import { spawn, execFileSync } from "node:child_process";
import { createServer } from "node:http";
import { mkdirSync, rmSync, writeFileSync, openSync } from "node:fs";
import { isDeepStrictEqual } from "node:util";
import { JsonTraceSerializer } from "@opentelemetry/otlp-transformer";
import { resourceFromAttributes } from "@opentelemetry/resources";

const [rocket, workRoot] = process.argv.slice(2);
const work = `${workRoot}/telemetry`;
const engine = `${workRoot}/engines/tiny-bf16`;
const model = "tiny-bf16";
rmSync(work, { recursive: true, force: true });
mkdirSync(work, { recursive: true });

let failures = 0;
const ok = (m) => console.log(`ok   ${m}`);
const bad = (m) => (console.log(`FAIL ${m}`), ++failures);
const check = (cond, m) => (cond ? ok(m) : bad(m));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const children = [];
process.on("exit", () => children.forEach((c) => c.kill()));

const freePort = () =>
  new Promise((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const p = s.address().port;
      s.close(() => resolve(p));
    });
  });

// ---- the OTLP receiver ----
const received = []; // every span, with its resource and scope
const receiver = createServer((req, res) => {
  let body = "";
  req.on("data", (c) => (body += c));
  req.on("end", () => {
    if (req.method !== "POST" || req.url !== "/v1/traces" || !req.headers["content-type"]?.startsWith("application/json")) {
      bad(`receiver: ${req.method} ${req.url} (${req.headers["content-type"]})`);
      res.writeHead(404).end();
      return;
    }
    for (const rs of JSON.parse(body).resourceSpans)
      for (const ss of rs.scopeSpans) for (const span of ss.spans) received.push({ resource: rs.resource, scope: ss.scope, span });
    res.writeHead(200, { "Content-Type": "application/json" }).end("{}");
  });
});
const otlpPort = await freePort();
await new Promise((r) => receiver.listen(otlpPort, "127.0.0.1", r));

// ---- the server ----
const port = await freePort();
const base = `http://127.0.0.1:${port}`;
const log = openSync(`${work}/server.log`, "w");
const server = spawn(rocket, ["serve", engine, "--host", "127.0.0.1", "--port", String(port), "--step-sample", "2",
                              "--otlp-traces-endpoint", `http://127.0.0.1:${otlpPort}`], { stdio: ["ignore", log, log] });
children.push(server);
for (let i = 0; ; ++i) {
  const h = await fetch(`${base}/health`).then((r) => r.status, () => 0);
  if (h === 200) break;
  if (i > 600 || server.exitCode !== null) throw new Error(`the server did not launch; see ${work}/server.log`);
  await sleep(100);
}

const scrape = async () => {
  const r = await fetch(`${base}/metrics`);
  return { type: r.headers.get("content-type"), text: await r.text() };
};
const seriesOf = (text) => new Set(text.split("\n").filter((l) => l && !l.startsWith("#")).map((l) => l.slice(0, l.lastIndexOf(" "))));
const sample = (text, name) => {
  const line = text.split("\n").find((l) => l.startsWith(name + " "));
  return line === undefined ? undefined : Number(line.slice(name.length + 1));
};

const first = await scrape();
check(first.type === "text/plain; version=0.0.4; charset=utf-8", `scrape content type: ${first.type}`);
const seriesBefore = seriesOf(first.text);

// ---- Prometheus scraping it ----
const promPort = await freePort();
writeFileSync(`${work}/prometheus.yml`, `global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: rocket
    static_configs:
      - targets: ["127.0.0.1:${port}"]
`);
const prom = spawn("prometheus", [`--config.file=${work}/prometheus.yml`, `--storage.tsdb.path=${work}/tsdb`,
                                  `--web.listen-address=127.0.0.1:${promPort}`], { stdio: ["ignore", "ignore", openSync(`${work}/prometheus.log`, "w")] });
children.push(prom);
const promApi = `http://127.0.0.1:${promPort}/api/v1`;
for (let i = 0; ; ++i) {
  if ((await fetch(`http://127.0.0.1:${promPort}/-/ready`).then((r) => r.status, () => 0)) === 200) break;
  if (i > 300 || prom.exitCode !== null) throw new Error(`prometheus did not start; see ${work}/prometheus.log`);
  await sleep(100);
}

// ---- distinct requests, some streamed, while Prometheus scrapes ----
const post = (path, body, headers = {}) =>
  fetch(`${base}${path}`, { method: "POST", headers: { "Content-Type": "application/json", ...headers }, body: JSON.stringify(body) });
const words = ["rocket", "booster", "fuel", "plan", "engine", "bucket", "piece", "chemistry", "launch", "orbit"];
const distinct = (i) => `request ${i}: ${words[i % 10]} ${words[(i * 7) % 10]} ${i * 7919} ${words[(i * 3) % 10]}`;
const N = 48;
let answered = 0;
for (let wave = 0; wave < N / 8; ++wave) {
  const batch = [];
  for (let j = 0; j < 8; ++j) {
    const i = wave * 8 + j;
    const body = i % 2
      ? { model, prompt: distinct(i), max_tokens: 3 + (i % 5), temperature: 0.7, seed: i, stream: i % 4 === 1 }
      : { model, messages: [{ role: "user", content: distinct(i) }], max_tokens: 3 + (i % 5), temperature: 0, stream: i % 4 === 2 };
    batch.push(post(i % 2 ? "/v1/completions" : "/v1/chat/completions", body).then(async (r) => (await r.text(), r.status === 200 && ++answered)));
  }
  await Promise.all(batch);
}
check(answered === N, `${answered}/${N} distinct requests answered`);

// A client's trace, continued.
const clientTrace = [...crypto.getRandomValues(new Uint8Array(16))].map((b) => b.toString(16).padStart(2, "0")).join("");
const clientSpan = [...crypto.getRandomValues(new Uint8Array(8))].map((b) => b.toString(16).padStart(2, "0")).join("");
const traced = await post("/v1/chat/completions", { model, messages: [{ role: "user", content: "continue my trace" }], max_tokens: 4 },
                          { traceparent: `00-${clientTrace}-${clientSpan}-01` });
check(traced.status === 200, `request with a traceparent: ${traced.status}`);
await traced.text();
// A malformed traceparent starts a trace of its own; refusals count by reason.
await (await post("/v1/chat/completions", { model, messages: [{ role: "user", content: "bad header" }], max_tokens: 2 },
                  { traceparent: "00-ZZZ-not-a-trace" })).text();
const tooLong = await post("/v1/completions", { model, prompt: "word ".repeat(20000), max_tokens: 2 });
await tooLong.text();
const badRequest = await post("/v1/completions", { model, prompt: 3 });
await badRequest.text();

// ---- the scrape afterwards ----
const after = await scrape();
const seriesAfter = seriesOf(after.text);
check(isDeepStrictEqual([...seriesAfter].sort(), [...seriesBefore].sort()),
      `series count unchanged by ${N + 4} distinct requests (${seriesBefore.size} before, ${seriesAfter.size} after)`);
const gen = sample(after.text, "rocket_generation_tokens_total");
check(gen >= N * 3, `rocket_generation_tokens_total = ${gen}`);
check(sample(after.text, 'rocket_requests_refused_total{reason="too_long"}') >= 1, "refused: too_long counted");
check(sample(after.text, 'rocket_requests_refused_total{reason="bad_request"}') >= 1, "refused: bad_request counted");
check(sample(after.text, 'rocket_request_success_total{finish_reason="length"}') >= 1, "success by finish_reason");
const moeSteps = sample(after.text, 'rocket_step_seconds_count{kind="moe"}');
const moeSum = sample(after.text, 'rocket_step_seconds_sum{kind="moe"}');
check(moeSteps >= 1 && moeSum > 0, `rocket_step_seconds{kind="moe"}: ${moeSteps} sampled steps, ${moeSum} s`);
for (const kind of ["norm", "gdn", "attention", "dense", "lm_head", "sampling"])
  check(sample(after.text, `rocket_step_seconds_sum{kind="${kind}"}`) > 0, `step split measured: ${kind}`);
check(sample(after.text, "rocket_bytes_read_per_token") > 0, `rocket_bytes_read_per_token = ${sample(after.text, "rocket_bytes_read_per_token")}`);
const usable = sample(after.text, "rocket_memory_usable_bytes"), residency = sample(after.text, "rocket_plan_residency_bytes");
check(usable > 0 && residency > 0 && residency <= usable, `memory: residency ${residency} within usable ${usable}`);
check(sample(after.text, "rocket_device_free_bytes") === usable + sample(after.text, "rocket_memory_reserve_bytes") +
      sample(after.text, "rocket_memory_floor_bytes"), "memory: free = usable + reserve + floor");
check(sample(after.text, "rocket_kv_pages_capacity") > 0, "kv pages total");
check(after.text.includes('rocket_info{booster="host",chemistry="qwen3_5_moe",fingerprint="'), "rocket_info labels");
check(!/chatcmpl-|cmpl-|request \d+/.test(after.text), "no request detail in any label");

// promtool on the scrape
writeFileSync(`${work}/scrape.txt`, after.text);
try {
  execFileSync("promtool", ["check", "metrics"], { input: after.text, stdio: ["pipe", "pipe", "pipe"] });
  ok("promtool check metrics");
} catch (e) {
  bad(`promtool check metrics: ${e.stdout}${e.stderr}`);
}

// ---- Prometheus has ingested it ----
const query = async (q) => (await (await fetch(`${promApi}/query?query=${encodeURIComponent(q)}`)).json()).data?.result ?? [];
let ingested = [];
for (let i = 0; i < 50; ++i) {
  ingested = await query("rocket_generation_tokens_total");
  if (ingested.length && Number(ingested[0].value[1]) >= gen) break;
  await sleep(200);
}
check(ingested.length === 1 && Number(ingested[0].value[1]) >= gen,
      `Prometheus: rocket_generation_tokens_total = ${ingested[0]?.value[1]} (scraped ${gen})`);
const up = await query('up{job="rocket"}');
check(up.length === 1 && up[0].value[1] === "1", "Prometheus: the target is up");
const p90 = await query("histogram_quantile(0.9, sum by (le) (rocket_time_to_first_token_seconds_bucket))");
check(p90.length === 1 && Number(p90[0].value[1]) > 0 && Number.isFinite(Number(p90[0].value[1])),
      `Prometheus: TTFT p90 = ${p90[0]?.value[1]} s`);
const split = await query('sum by (kind) (rocket_step_seconds_sum)');
// Eight kinds; all_to_all is a split engine's exchange, never observed on one booster.
const toAll = split.find((s) => s.metric.kind === "all_to_all");
check(split.length === 8 && toAll && Number(toAll.value[1]) === 0,
      `Prometheus: step split by kind (${split.map((s) => s.metric.kind).join(", ")}), all_to_all empty on one booster`);

// ---- the spans ----
for (let i = 0; i < 50 && received.filter((r) => r.span.kind === 2).length < N + 2; ++i) await sleep(100);
const roots = received.filter((r) => r.span.kind === 2);
check(roots.length === N + 2, `${roots.length} request spans received (${N + 2} requests ran)`);

// The span as the OpenTelemetry JS SDK holds it (ReadableSpan), from what was received.
const value = (v) =>
  "stringValue" in v ? v.stringValue : "boolValue" in v ? v.boolValue : "intValue" in v ? Number(v.intValue)
  : "doubleValue" in v ? v.doubleValue : v.arrayValue.values.map(value);
const hr = (nanos) => [Number(BigInt(nanos) / 1000000000n), Number(BigInt(nanos) % 1000000000n)];
const attrs = (list) => Object.fromEntries(list.map((a) => [a.key, value(a.value)]));
const readable = ({ resource, scope, span: s }) => ({
  name: s.name,
  kind: s.kind - 1,
  spanContext: () => ({ traceId: s.traceId, spanId: s.spanId, traceFlags: s.flags & 255 }),
  parentSpanContext: s.parentSpanId ? { traceId: s.traceId, spanId: s.parentSpanId, traceFlags: s.flags & 255,
                                        isRemote: (s.flags & 512) !== 0 } : undefined,
  startTime: hr(s.startTimeUnixNano), endTime: hr(s.endTimeUnixNano), duration: [0, 0],
  attributes: attrs(s.attributes), links: [], events: [], status: s.status,
  resource: resourceFromAttributes(attrs(resource.attributes)), instrumentationScope: scope,
  droppedAttributesCount: 0, droppedEventsCount: 0, droppedLinksCount: 0, ended: true,
});
// JavaScript has one number type, so the SDK writes an integral double as intValue: compare numbers as numbers.
const numbersAlike = (j) => JSON.parse(JSON.stringify(j), (k, v) =>
  v && typeof v === "object" && ("intValue" in v || "doubleValue" in v) ? { number: Number(v.intValue ?? v.doubleValue) } : v);
let mismatched = 0, badShapes = 0;
for (const r of received) {
  const sdk = JSON.parse(new TextDecoder().decode(JsonTraceSerializer.serializeRequest([readable(r)])));
  const sdkSpan = sdk.resourceSpans[0].scopeSpans[0].spans[0];
  if (!isDeepStrictEqual(numbersAlike(sdkSpan), numbersAlike(r.span)) ||
      !isDeepStrictEqual(sdk.resourceSpans[0].resource, r.resource)) {
    if (mismatched++ === 0) bad(`span differs from the SDK's encoding:\n  ours ${JSON.stringify(r.span)}\n  sdk  ${JSON.stringify(sdkSpan)}`);
  }
  const s = r.span;
  const shapes = /^[0-9a-f]{32}$/.test(s.traceId) && /^[0-9a-f]{16}$/.test(s.spanId) && /^[0-9]+$/.test(s.startTimeUnixNano) &&
    BigInt(s.endTimeUnixNano) >= BigInt(s.startTimeUnixNano) &&
    s.attributes.every((a) => Object.keys(a.value).length === 1 && (!("intValue" in a.value) || Number.isInteger(a.value.intValue)));
  if (!shapes && badShapes++ === 0) bad(`span shape: ${JSON.stringify(s)}`);
}
check(mismatched === 0 && badShapes === 0, `${received.length} spans encoded as the OpenTelemetry JS SDK encodes them`);
const nowNanos = BigInt(Date.now()) * 1000000n;
check(roots.every((r) => nowNanos - BigInt(r.span.startTimeUnixNano) < 600n * 1000000000n), "span times are Unix nanoseconds of this run");

const attr = (s, key) => { const a = s.attributes.find((a) => a.key === key); return a && value(a.value); };
const required = ["gen_ai.request.model", "gen_ai.request.max_tokens", "gen_ai.request.temperature", "gen_ai.usage.input_tokens",
                  "gen_ai.usage.output_tokens", "gen_ai.response.finish_reasons", "rocket.cached_tokens"];
check(roots.every((r) => required.every((k) => attr(r.span, k) !== undefined) && attr(r.span, "gen_ai.request.model") === model),
      "every request span has the GenAI attributes and rocket.cached_tokens");
check(roots.every((r) => attr(r.span, "gen_ai.usage.output_tokens") >= 1 && attr(r.span, "gen_ai.usage.input_tokens") > 0),
      "usage on the request spans");
const names = new Set(roots.map((r) => r.span.name));
check(names.has("chat.completions") && names.has("completions"), `request span names: ${[...names].join(", ")}`);
const childrenOf = (root) => received.filter((r) => r.span.parentSpanId === root.span.spanId && r.span.traceId === root.span.traceId);
check(roots.every((root) => isDeepStrictEqual(childrenOf(root).map((c) => c.span.name).sort(), ["decode", "prefill", "queue"])),
      "each request span has queue, prefill and decode children");
const continued = roots.filter((r) => r.span.traceId === clientTrace);
check(continued.length === 1 && continued[0].span.parentSpanId === clientSpan && (continued[0].span.flags & 512) !== 0,
      "the client's traceparent is continued (same trace id, its span as parent, marked remote)");
check(roots.filter((r) => r.span.parentSpanId === undefined).length === N + 1, "requests without a valid traceparent start their own traces");
const dropped = sample((await scrape()).text, "rocket_trace_spans_dropped_total");
check(dropped === 0, `rocket_trace_spans_dropped_total = ${dropped}`);

receiver.close();
if (failures) {
  console.log(`${failures} failure(s); logs in ${work}`);
  process.exit(1);
}
console.log("telemetry: all checks passed");
process.exit(0);
