// End-to-end tests of `rocket serve` through the official `openai` npm client, the way applications
// talk to it: chat and completions, whole and streamed, usage, stop strings, seeds, logprobs, the
// 400/401/404/503 paths and clients that hang up.
//
// Tests marked FORCED use the server's TEST-ONLY --force-tokens option (openai_client.sh writes the
// sequences): they select a forced output with `user` and check how the server parses it (tool calls,
// reasoning separation, a stop string inside a known text). Every other test uses sampled output of
// the tiny fuel's random weights, so it checks properties of the output, never its words.
//
//   node openai_client.mjs BASE_URL API_KEY MODEL SERVER_LOG ALIAS
// The server serves the model as MODEL and as ALIAS (--served-model-name MODEL ALIAS).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import OpenAI from "openai";
import { runTests, test } from "./runner.mjs";
import { collectChat } from "./chat_stream.mjs";

const [base, apiKey, model, serverLog, alias] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey, maxRetries: 0, timeout: 120_000 });
const hello = [
  { role: "system", content: "Be brief." },
  { role: "user", content: "Hello, who are you?" },
];
const tools = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "The weather in a city",
      parameters: { type: "object", properties: { city: { type: "string" }, unit: { type: "string" } }, required: ["city"] },
    },
  },
  {
    type: "function",
    function: { name: "get_time", parameters: { type: "object", properties: { zone: { type: "string" } } } },
  },
];

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const logText = () => readFileSync(serverLog, "utf8");
const metrics = async () => (await fetch(`${base}/stats`)).json();
// Polls /stats (up to 10 s) until `done(m)`; returns the last snapshot.
async function metricsUntil(done) {
  let m = await metrics();
  for (let i = 0; i < 100 && !done(m); ++i) await sleep(100), (m = await metrics());
  return m;
}

async function collectCompletion(stream) {
  const out = { text: "", finish: null, usage: null, tokens: [], offsets: [] };
  for await (const chunk of stream) {
    if (chunk.usage) out.usage = chunk.usage;
    for (const choice of chunk.choices) {
      out.text += choice.text;
      if (choice.logprobs) out.tokens.push(...choice.logprobs.tokens), out.offsets.push(...choice.logprobs.text_offset);
      if (choice.finish_reason) out.finish = choice.finish_reason;
    }
  }
  return out;
}

function checkUsage(usage, maxTokens) {
  assert.ok(usage.prompt_tokens > 0);
  assert.ok(usage.completion_tokens >= 0 && usage.completion_tokens <= maxTokens, JSON.stringify(usage));
  assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens);
  const cached = usage.prompt_tokens_details.cached_tokens;  // from the scheduler's prefix cache
  assert.ok(Number.isInteger(cached) && cached >= 0 && cached <= usage.prompt_tokens, JSON.stringify(usage));
}

// Usage of two runs of one request: the same but for cached_tokens (the second finds the first's
// prefix in the cache).
function sameUsage(a, b) {
  assert.equal(a.prompt_tokens, b.prompt_tokens);
  assert.equal(a.completion_tokens, b.completion_tokens);
  assert.equal(a.total_tokens, b.total_tokens);
}

async function rejects(promise, status, check = () => {}) {
  try {
    await promise;
  } catch (e) {
    assert.ok(e instanceof OpenAI.APIError, `not an APIError: ${e}`);
    assert.equal(e.status, status, e.message);
    check(e);
    return;
  }
  assert.fail(`expected HTTP ${status}`);
}


test("models lists every served name", async () => {
  const page = await client.models.list();
  assert.deepEqual(page.data.map((m) => m.id), [model, alias]);
  assert.equal(page.data[1].rocket.fingerprint, page.data[0].rocket.fingerprint);
  const one = await client.models.retrieve(alias);
  assert.equal(one.id, alias);
  assert.equal(one.object, "model");
  await rejects(client.models.retrieve("no-such-model"), 404, (e) => assert.equal(e.code, "model_not_found"));
});

test("a request may name the model by any served name, and the response names it so", async () => {
  const r = await client.chat.completions.create({ model: alias, messages: hello, max_tokens: 3 });
  assert.equal(r.model, alias);
  const c = await client.completions.create({ model: alias, prompt: "Once", max_tokens: 3 });
  assert.equal(c.model, alias);
  await rejects(client.chat.completions.create({ model: "tiny", messages: hello }), 404, (e) => {
    assert.equal(e.code, "model_not_found");
    assert.match(e.message, new RegExp(`serves '${model}', '${alias}'`));
  });
});

test("chat, whole: message, finish_reason, usage", async () => {
  const r = await client.chat.completions.create({ model, messages: hello, max_tokens: 12, temperature: 0 });
  assert.equal(r.object, "chat.completion");
  assert.match(r.id, /^chatcmpl-/);
  const c = r.choices[0];
  assert.equal(c.message.role, "assistant");
  assert.equal(typeof c.message.content, "string");
  assert.equal(c.logprobs, null);
  assert.ok(["stop", "length"].includes(c.finish_reason));
  checkUsage(r.usage, 12);
  if (c.finish_reason === "length") assert.equal(r.usage.completion_tokens, 12);
});

test("chat, streamed: same text as whole at temperature 0, usage chunk", async () => {
  const params = { model, messages: hello, max_tokens: 16, temperature: 0 };
  const whole = await client.chat.completions.create(params);
  const s = await collectChat(
    await client.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } }));
  assert.equal(s.role, "assistant");
  assert.equal(s.content, whole.choices[0].message.content);
  assert.equal(s.finish, whole.choices[0].finish_reason);
  sameUsage(s.usage, whole.usage);
  checkUsage(s.usage, 16);
});

test("completions, whole and streamed", async () => {
  const params = { model, prompt: "The capital of France is", max_tokens: 10, temperature: 0 };
  const whole = await client.completions.create(params);
  assert.equal(whole.object, "text_completion");
  checkUsage(whole.usage, 10);
  const s = await collectCompletion(
    await client.completions.create({ ...params, stream: true, stream_options: { include_usage: true } }));
  assert.equal(s.text, whole.choices[0].text);
  assert.equal(s.finish, whole.choices[0].finish_reason);
  sameUsage(s.usage, whole.usage);
  const ids = await client.completions.create({ model, prompt: [9707, 11, 1879], max_tokens: 3 });
  assert.equal(ids.usage.prompt_tokens, 3);
});

test("stop string split across tokens, chosen from the model's own output", async () => {
  const params = { model, prompt: "Once upon a time", max_tokens: 24, temperature: 0 };
  const free = await client.completions.create({ ...params, logprobs: 0 });
  const { tokens } = free.choices[0].logprobs;
  const text = free.choices[0].text;
  // The last character of one token and the first of the next: a stop string no single token holds.
  let stop = null;
  for (let i = 0; i + 1 < tokens.length && !stop; ++i) {
    const a = [...tokens[i]], b = [...tokens[i + 1]];
    if (a.length && b.length && !tokens[i].includes("\uFFFD") && !tokens[i + 1].includes("\uFFFD")) {
      stop = a[a.length - 1] + b[0];
    }
  }
  assert.ok(stop, `no token boundary to cut at in ${JSON.stringify(tokens)}`);
  const want = text.slice(0, text.indexOf(stop));
  const cut = await client.completions.create({ ...params, stop: [stop] });
  assert.equal(cut.choices[0].text, want);
  assert.equal(cut.choices[0].finish_reason, "stop");
  const streamed = await collectCompletion(await client.completions.create({ ...params, stop, stream: true }));
  assert.equal(streamed.text, want);
  assert.equal(streamed.finish, "stop");
});

test("FORCED: stop string across tokens in a known text, chat whole and streamed", async () => {
  const params = { model, messages: hello, user: "stop_split", stop: ["ta gam", "never"] };
  const r = await client.chat.completions.create(params);
  assert.equal(r.choices[0].message.content, "Alpha be");
  assert.equal(r.choices[0].finish_reason, "stop");
  const s = await collectChat(await client.chat.completions.create({ ...params, stream: true }));
  assert.equal(s.content, "Alpha be");
  // Without the stop string the whole forced text comes out, ending as at eos.
  const free = await client.chat.completions.create({ model, messages: hello, user: "stop_split" });
  assert.equal(free.choices[0].message.content, "Alpha beta gamma delta epsilon");
  assert.equal(free.choices[0].finish_reason, "stop");
});

// vLLM's ignore_eos and min_tokens, which benchmark clients send (SGLang's bench_serving sends
// ignore_eos on every request unless told not to).
test("FORCED: ignore_eos and min_tokens run past eos, whose text never shows; whole and streamed", async () => {
  const params = { model, messages: hello, user: "eos_inside" };
  const plain = await client.chat.completions.create(params);
  assert.equal(plain.choices[0].message.content, "First part.");
  assert.equal(plain.choices[0].finish_reason, "stop");
  const n = plain.usage.completion_tokens;
  const past = await client.chat.completions.create({ ...params, ignore_eos: true });
  assert.equal(past.choices[0].message.content, "First part. Second part.");
  assert.equal(past.choices[0].finish_reason, "stop");  // the forced sequence ran out, as at eos
  assert.ok(past.usage.completion_tokens > n + 1, JSON.stringify(past.usage));  // eos counts as a token
  const streamed = await collectChat(await client.chat.completions.create({ ...params, ignore_eos: true, stream: true }));
  assert.equal(streamed.content, "First part. Second part.");
  const held = await client.chat.completions.create({ ...params, min_tokens: n + 2 });
  assert.equal(held.choices[0].message.content, "First part. Second part.");
  // Sampled on the engine, eos masked out of every pick: exactly max_tokens tokens.
  const masked = await client.chat.completions.create({ model, messages: hello, max_tokens: 12, min_tokens: 12, seed: 7 });
  assert.equal(masked.usage.completion_tokens, 12);
  assert.equal(masked.choices[0].finish_reason, "length");
  await rejects(client.chat.completions.create({ model, messages: hello, max_tokens: 4, min_tokens: 5 }), 400,
                (e) => assert.equal(e.param, "min_tokens"));
  await rejects(client.completions.create({ model, prompt: "x", ignore_eos: "yes" }), 400,
                (e) => assert.equal(e.param, "ignore_eos"));
});

test("a seed reproduces the output; another seed does not", async () => {
  const params = { model, messages: hello, max_tokens: 24, temperature: 1, top_p: 0.9 };
  const a = await client.chat.completions.create({ ...params, seed: 1234 });
  const b = await client.chat.completions.create({ ...params, seed: 1234 });
  const c = await client.chat.completions.create({ ...params, seed: 4321 });
  assert.deepEqual(a.choices[0].message, b.choices[0].message);
  assert.notDeepEqual(a.choices[0].message, c.choices[0].message);
});

test("chat logprobs: greedy token is the top alternative, whole equals streamed", async () => {
  const params = { model, messages: hello, max_tokens: 8, temperature: 0, logprobs: true, top_logprobs: 3 };
  const r = await client.chat.completions.create(params);
  const content = r.choices[0].logprobs.content;
  assert.equal(r.choices[0].logprobs.refusal, null);
  assert.equal(content.length, r.usage.completion_tokens);
  for (const t of content) {
    assert.equal(typeof t.token, "string");
    assert.ok(Array.isArray(t.bytes) && t.bytes.length > 0);
    assert.ok(t.logprob <= 0);
    assert.equal(t.top_logprobs.length, 3);
    for (let k = 1; k < 3; ++k) assert.ok(t.top_logprobs[k - 1].logprob >= t.top_logprobs[k].logprob);
    // Greedy: the chosen token is the most likely one, with the same logprob.
    assert.deepEqual(t.top_logprobs[0].bytes, t.bytes);
    assert.equal(t.top_logprobs[0].logprob, t.logprob);
    const mass = t.top_logprobs.reduce((m, a) => m + Math.exp(a.logprob), 0);
    assert.ok(mass <= 1 + 1e-5, `top-3 mass ${mass}`);
  }
  const s = await collectChat(await client.chat.completions.create({ ...params, stream: true }));
  assert.deepEqual(s.logprobs, content);
  // Sampled (temperature 1): the chosen token need not be the best, but its logprob is the model's.
  const sampled = await client.chat.completions.create({ ...params, temperature: 1, seed: 5, top_logprobs: 0 });
  for (const t of sampled.choices[0].logprobs.content) assert.ok(t.logprob <= 0 && t.top_logprobs.length === 0);
});

test("completion logprobs: tokens, token_logprobs, top_logprobs, text_offset", async () => {
  const params = { model, prompt: "The capital of France is", max_tokens: 8, temperature: 0, logprobs: 2 };
  const r = await client.completions.create(params);
  const lp = r.choices[0].logprobs;
  const n = r.usage.completion_tokens;
  assert.equal(lp.tokens.length, n);
  assert.equal(lp.token_logprobs.length, n);
  assert.equal(lp.top_logprobs.length, n);
  assert.equal(lp.text_offset[0], 0);
  for (let i = 0; i < n; ++i) {
    assert.ok(lp.token_logprobs[i] <= 0);
    const top = lp.top_logprobs[i];
    assert.ok(Object.keys(top).length >= 1 && Object.keys(top).length <= 3);
    assert.equal(top[lp.tokens[i]], lp.token_logprobs[i]);  // the sampled token is listed
    if (i > 0) assert.equal(lp.text_offset[i], lp.text_offset[i - 1] + [...lp.tokens[i - 1]].length);
  }
  if (!lp.tokens.some((t) => t.includes("\uFFFD"))) assert.equal(lp.tokens.join(""), r.choices[0].text);
  const s = await collectCompletion(await client.completions.create({ ...params, stream: true }));
  assert.deepEqual(s.tokens, lp.tokens);
  assert.deepEqual(s.offsets, lp.text_offset);
});

test("400 names the field; logprobs out of range", async () => {
  await rejects(client.chat.completions.create({ model, messages: hello, temperature: "hot" }), 400,
                (e) => assert.equal(e.param, "temperature"));
  await rejects(client.chat.completions.create({ model, messages: hello, n: 1000 }), 400, (e) => assert.equal(e.param, "n"));
  await rejects(client.completions.create({ model, prompt: "x", best_of: 2 }), 400, (e) => assert.equal(e.param, "best_of"));
  await rejects(client.chat.completions.create({ model, messages: hello, logit_bias: { 9707: 101 } }), 400,
                (e) => assert.equal(e.param, "logit_bias.9707"));
  await rejects(client.chat.completions.create({ model, messages: hello, logit_bias: { 999999: 1 } }), 400,
                (e) => assert.equal(e.param, "logit_bias.999999"));
  await rejects(client.chat.completions.create({ model, messages: hello, repetition_penalty: 0 }), 400,
                (e) => assert.equal(e.param, "repetition_penalty"));
  await rejects(client.chat.completions.create({ model, messages: hello, logprobs: true, top_logprobs: 21 }), 400,
                (e) => assert.equal(e.param, "top_logprobs"));
  await rejects(client.completions.create({ model, prompt: "x", logprobs: 6 }), 400, (e) => assert.equal(e.param, "logprobs"));
  await rejects(client.chat.completions.create({ model, messages: hello, max_tokens: 1 << 30 }), 400,
                (e) => assert.equal(e.code, "context_length_exceeded"));
});

test("401 without the right key, 404 for another model", async () => {
  const stranger = new OpenAI({ baseURL: `${base}/v1`, apiKey: "wrong", maxRetries: 0 });
  await rejects(stranger.chat.completions.create({ model, messages: hello }), 401);
  await rejects(stranger.models.list(), 401);
  await rejects(client.chat.completions.create({ model: "gpt-4o", messages: hello }), 404,
                (e) => assert.equal(e.code, "model_not_found"));
});

test("disconnect mid-stream cancels the request in the engine", async () => {
  const before = (await metrics()).cancelled;
  const stream = await client.chat.completions.create(
    { model, messages: hello, max_tokens: 1500, temperature: 1, seed: 7, stream: true });
  let chunks = 0;
  for await (const _ of stream) if (++chunks === 3) break;  // leaving the loop aborts the request
  const m = await metricsUntil((m) => m.cancelled > before && m.active === 0);
  assert.equal(m.cancelled, before + 1, "the engine did not cancel the stream");
  assert.equal(m.active, 0, "the cancelled stream still holds its slot");
  const after = await client.chat.completions.create({ model, messages: hello, max_tokens: 4 });
  assert.ok(after.choices[0].finish_reason);
});

test("disconnect while waiting for a whole response cancels it too", async () => {
  const before = (await metrics()).cancelled;
  const controller = new AbortController();
  const pending = client.chat.completions.create(
    { model, messages: hello, max_tokens: 1500, temperature: 1, seed: 8 }, { signal: controller.signal });
  await sleep(600);
  controller.abort();
  await assert.rejects(pending, (e) => e instanceof OpenAI.APIUserAbortError);
  const m = await metricsUntil((m) => m.cancelled > before && m.active === 0);
  assert.equal(m.cancelled, before + 1, "the engine did not cancel the request");
  assert.ok(logText().includes("the client hung up before the response"));
});

test("503 with Retry-After when every stream slot is busy and the queue is full", async () => {
  // openai_client.sh runs the server with --queue 1: long streams take the scheduler's slots, one
  // more waits, and the next is refused. The plan's max_streams bounds the slots.
  const slots = (await client.models.list()).data[0].rocket.max_streams;
  const long = { model, messages: hello, max_tokens: 1500, temperature: 1, stream: true };
  const running = [];
  let refused = null;
  try {
    for (let i = 0; i < slots + 2 && !refused; ++i) {
      try {
        running.push(await client.chat.completions.create({ ...long, seed: 100 + i }));
        await metricsUntil((m) => m.active + m.waiting === running.length);
      } catch (e) {
        refused = e;
      }
    }
    assert.ok(refused, `${running.length} concurrent streams and no 503`);
    assert.ok(refused instanceof OpenAI.APIError && refused.status === 503, String(refused));
    assert.equal(refused.headers.get("retry-after"), "1");
    assert.equal(refused.code, "server_busy");
    const m = await metrics();
    assert.equal(m.waiting, 1, "refused with the queue (--queue 1) not full");
    assert.ok(m.active >= 1 && m.active <= slots, JSON.stringify(m));
  } finally {
    for (const s of running) s.controller.abort();
  }
  const m = await metricsUntil((m) => m.active === 0 && m.waiting === 0);
  assert.equal(m.active + m.waiting, 0, "the hung-up requests still hold slots");
});

test("FORCED: one tool call, whole", async () => {
  const r = await client.chat.completions.create({ model, messages: hello, tools, user: "tool_call" });
  const c = r.choices[0];
  assert.equal(c.finish_reason, "tool_calls");
  assert.equal(c.message.content, null);
  assert.equal(c.message.tool_calls.length, 1);
  const call = c.message.tool_calls[0];
  assert.match(call.id, /^call_/);
  assert.equal(call.type, "function");
  assert.equal(call.function.name, "get_weather");
  assert.deepEqual(JSON.parse(call.function.arguments), { city: "Paris", unit: "celsius" });
});

test("FORCED: one tool call, streamed (id and name first, then the arguments)", async () => {
  const s = await collectChat(
    await client.chat.completions.create({ model, messages: hello, tools, user: "tool_call", stream: true }));
  assert.equal(s.finish, "tool_calls");
  assert.equal(s.content, "");
  assert.equal(s.calls.length, 1);
  assert.equal(s.calls[0].name, "get_weather");
  assert.deepEqual(JSON.parse(s.calls[0].arguments), { city: "Paris", unit: "celsius" });
});

test("FORCED: two tool calls in one turn, whole and streamed", async () => {
  const params = { model, messages: hello, tools, user: "two_calls" };
  const r = await client.chat.completions.create(params);
  const calls = r.choices[0].message.tool_calls;
  assert.deepEqual(calls.map((c) => c.function.name), ["get_weather", "get_time"]);
  assert.deepEqual(JSON.parse(calls[1].function.arguments), { zone: "Europe/Paris" });
  assert.notEqual(calls[0].id, calls[1].id);
  const s = await collectChat(await client.chat.completions.create({ ...params, stream: true }));
  assert.deepEqual(s.calls.map((c) => [c.name, JSON.parse(c.arguments)]),
                   [["get_weather", { city: "Paris" }], ["get_time", { zone: "Europe/Paris" }]]);
  assert.equal(s.finish, "tool_calls");
});

test("FORCED: malformed JSON in a tool call comes back as content", async () => {
  const r = await client.chat.completions.create({ model, messages: hello, tools, user: "malformed" });
  const c = r.choices[0];
  assert.equal(c.finish_reason, "stop");
  assert.equal(c.message.tool_calls, undefined);
  assert.equal(c.message.content, '<tool_call>\n{"name": "get_weather", "arguments": {"city": }\n</tool_call>');
});

test("FORCED: reasoning before a tool call", async () => {
  const params = { model, messages: hello, tools, user: "think_then_call" };
  const r = await client.chat.completions.create(params);
  const m = r.choices[0].message;
  assert.equal(m.reasoning_content, "The user wants the weather in Paris.");
  assert.equal(m.tool_calls.length, 1);
  assert.equal(r.choices[0].finish_reason, "tool_calls");
  const s = await collectChat(await client.chat.completions.create({ ...params, stream: true }));
  assert.equal(s.reasoning, "The user wants the weather in Paris.");
  assert.deepEqual(JSON.parse(s.calls[0].arguments), { city: "Paris" });
});

test("FORCED: reasoning separated from content, whole and streamed", async () => {
  const params = { model, messages: hello, user: "reasoning" };
  const r = await client.chat.completions.create(params);
  assert.equal(r.choices[0].message.reasoning_content, "Two plus two is four.");
  assert.equal(r.choices[0].message.content, "The answer is 4.");
  const s = await collectChat(await client.chat.completions.create({ ...params, stream: true }));
  assert.equal(s.reasoning, "Two plus two is four.");
  assert.equal(s.content, "The answer is 4.");
  assert.equal(s.finish, "stop");
});

test("FORCED: tool_choice naming a function: the output continues the call the prompt opened", async () => {
  // The forced tokens continue '<tool_call>\n{"name": "get_weather", "arguments": ' and then make a
  // second call: a named tool_choice allows one.
  const tool_choice = { type: "function", function: { name: "get_weather" } };
  const params = { model, messages: hello, tools, tool_choice, user: "named_continues" };
  const r = await client.chat.completions.create(params);
  const c = r.choices[0];
  assert.equal(c.finish_reason, "tool_calls");
  assert.equal(c.message.content, null);
  assert.equal(c.message.tool_calls.length, 1);
  assert.match(c.message.tool_calls[0].id, /^call_/);
  assert.equal(c.message.tool_calls[0].function.name, "get_weather");
  assert.deepEqual(JSON.parse(c.message.tool_calls[0].function.arguments), { city: "Paris" });
  // The opening is prompt, not completion.
  const free = await client.chat.completions.create({ model, messages: hello, tools, user: "tool_call" });
  assert.ok(r.usage.prompt_tokens > free.usage.prompt_tokens, `${r.usage.prompt_tokens} <= ${free.usage.prompt_tokens}`);
  const s = await collectChat(await client.chat.completions.create({ ...params, stream: true }));
  assert.equal(s.finish, "tool_calls");
  assert.equal(s.content, "");
  assert.deepEqual(s.calls.map((c) => [c.name, JSON.parse(c.arguments)]), [["get_weather", { city: "Paris" }]]);
});

test("FORCED: tool_choice required: the output names the function", async () => {
  // The forced tokens continue '<tool_call>\n{"name": "'.
  const params = { model, messages: hello, tools, tool_choice: "required", user: "required_continues" };
  const r = await client.chat.completions.create(params);
  assert.equal(r.choices[0].finish_reason, "tool_calls");
  assert.deepEqual(r.choices[0].message.tool_calls.map((c) => [c.function.name, JSON.parse(c.function.arguments)]),
                   [["get_time", { zone: "UTC" }]]);
  const s = await collectChat(await client.chat.completions.create({ ...params, stream: true }));
  assert.equal(s.finish, "tool_calls");
  assert.deepEqual(s.calls.map((c) => [c.name, JSON.parse(c.arguments)]), [["get_time", { zone: "UTC" }]]);
});

test("FORCED: parallel_tool_calls=false: one call, and the engine stops after it", async () => {
  const params = { model, messages: hello, tools, user: "calls_then_text" };
  const all = await client.chat.completions.create(params);
  assert.equal(all.choices[0].message.tool_calls.length, 2);
  const r = await client.chat.completions.create({ ...params, parallel_tool_calls: false });
  const c = r.choices[0];
  assert.equal(c.finish_reason, "tool_calls");
  assert.equal(c.message.content, null);
  assert.deepEqual(c.message.tool_calls.map((c) => [c.function.name, JSON.parse(c.function.arguments)]),
                   [["get_weather", { city: "Paris" }]]);
  // The request ended at the first call, not at the end of the forced sequence (the long text after
  // the second call leaves the loop far more steps than it takes the server to ask it to stop).
  assert.ok(r.usage.completion_tokens < all.usage.completion_tokens / 2,
            `${r.usage.completion_tokens} of ${all.usage.completion_tokens} tokens computed`);
  const s = await collectChat(await client.chat.completions.create({
    ...params, parallel_tool_calls: false, stream: true, stream_options: { include_usage: true } }));
  assert.equal(s.finish, "tool_calls");
  assert.equal(s.content, "");
  assert.deepEqual(s.calls.map((c) => [c.name, JSON.parse(c.arguments)]), [["get_weather", { city: "Paris" }]]);
  assert.ok(s.usage.completion_tokens < all.usage.completion_tokens / 2);
});

// Token ids of Qwen's vocabulary (the tiny fuel has it): "Hello", " world", ",".
const kHello = 9707, kWorld = 1879, kComma = 11;

test("n: 3, whole: choices 0..2 drawn with seed + index, usage counts the prompt once", async () => {
  const params = { model, messages: hello, max_tokens: 10, temperature: 1, seed: 40 };
  const r = await client.chat.completions.create({ ...params, n: 3 });
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2]);
  let completion = 0;
  for (let i = 0; i < 3; ++i) {
    const one = await client.chat.completions.create({ ...params, seed: 40 + i });
    assert.equal(r.choices[i].message.content, one.choices[0].message.content, `choice ${i}`);
    assert.equal(r.choices[i].finish_reason, one.choices[0].finish_reason);
    assert.equal(r.usage.prompt_tokens, one.usage.prompt_tokens);
    completion += one.usage.completion_tokens;
  }
  assert.equal(r.usage.completion_tokens, completion);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + completion);
  assert.ok(new Set(r.choices.map((c) => c.message.content)).size > 1, "three seeds, three draws");
});

test("n: 3 prefills the prompt once: the other choices resume from the prefix cache", async () => {
  // A prompt nobody sent before, four 256-token pages long: each fork recomputes at most the part past
  // the last page boundary, where three separate prompts would cost three prompts.
  const prompt = `${Math.random()} ` + "alpha beta gamma delta ".repeat(250);
  const before = await metricsUntil((m) => m.active === 0);
  const r = await client.completions.create({ model, prompt, max_tokens: 2, temperature: 1, seed: 5, n: 3 });
  const after = await metricsUntil((m) => m.active === 0);
  const prefilled = after.prefill_tokens - before.prefill_tokens, prompt_tokens = r.usage.prompt_tokens;
  console.log(`     n: 3 prefilled ${prefilled} tokens for a ${prompt_tokens}-token prompt`);
  assert.ok(prompt_tokens > 1000, `${prompt_tokens} prompt tokens`);
  assert.ok(prefilled <= prompt_tokens + 2 * 256, `${prefilled} tokens prefilled for a ${prompt_tokens}-token prompt`);
  assert.ok(after.cached_tokens - before.cached_tokens >= 2 * (prompt_tokens - 256), "the forks hit the cache");
});

test("n: 3, streamed: chunks interleaved by index, each choice as whole, one usage chunk", async () => {
  const params = { model, messages: hello, max_tokens: 10, temperature: 1, seed: 41, n: 3 };
  const whole = await client.chat.completions.create(params);
  const stream = await client.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
  const text = ["", "", ""], finish = [null, null, null], order = [];
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      assert.ok(c.index >= 0 && c.index < 3, `index ${c.index}`);
      assert.equal(finish[c.index], null, "nothing after a choice's finish_reason");
      if (c.delta.content) text[c.index] += c.delta.content, order.push(c.index);
      if (c.finish_reason) finish[c.index] = c.finish_reason;
    }
  }
  assert.deepEqual(text, whole.choices.map((c) => c.message.content));
  assert.deepEqual(finish, whole.choices.map((c) => c.finish_reason));
  assert.deepEqual(usage, whole.usage);
  // The choices decode side by side, so their chunks interleave rather than arrive one choice after another.
  const switches = order.filter((c, i) => i > 0 && c !== order[i - 1]).length;
  assert.ok(switches > 2, `chunk order ${order}`);
});

test("n: 3, completions: whole and streamed agree", async () => {
  const params = { model, prompt: "Once upon a time", max_tokens: 6, temperature: 1, seed: 42, n: 3 };
  const whole = await client.completions.create(params);
  assert.deepEqual(whole.choices.map((c) => c.index), [0, 1, 2]);
  const text = ["", "", ""];
  for await (const chunk of await client.completions.create({ ...params, stream: true }))
    for (const c of chunk.choices) text[c.index] += c.text;
  assert.deepEqual(text, whole.choices.map((c) => c.text));
});

test("logit_bias: +100 forces a token, -100 bans one", async () => {
  const forced = await client.completions.create({ model, prompt: "Numbers:", max_tokens: 4, temperature: 1, seed: 3,
                                                   logit_bias: { [kHello]: 100 } });
  assert.equal(forced.choices[0].text, "Hello".repeat(4));
  // Three tokens lifted alike: samples mix them; with "Hello" banned instead, it never appears.
  const lifted = { [kHello]: 100, [kWorld]: 100, [kComma]: 100 };
  let seen = "";
  for (let seed = 0; seed < 4; ++seed) {
    const r = await client.completions.create({ model, prompt: "Numbers:", max_tokens: 12, temperature: 1, seed, logit_bias: lifted });
    assert.match(r.choices[0].text, /^(Hello| world|,)+$/);
    seen += r.choices[0].text;
  }
  assert.ok(seen.includes("Hello"), seen);
  for (let seed = 0; seed < 4; ++seed) {
    const r = await client.completions.create({ model, prompt: "Numbers:", max_tokens: 12, temperature: 1, seed,
                                                logit_bias: { ...lifted, [kHello]: -100 } });
    assert.match(r.choices[0].text, /^( world|,)+$/);
  }
});

test("repetition_penalty: a drawn token's lifted logit halves, as computed; min_p 1 is greedy", async () => {
  // "Hello" lifted by 100, " world" by 75: far above the tiny fuel's own logits (a few units), so
  // greedy takes "Hello" every time. With repetition_penalty 2 a drawn token's logit halves: after
  // "Hello" (~50) " world" (~75) wins once, then "Hello" (~50) beats the halved " world" (~37.5) for good.
  const params = { model, prompt: "Numbers:", max_tokens: 6, temperature: 0, logit_bias: { [kHello]: 100, [kWorld]: 75 } };
  assert.equal((await client.completions.create(params)).choices[0].text, "Hello".repeat(6));
  const penalized = (await client.completions.create({ ...params, repetition_penalty: 2 })).choices[0].text;
  assert.equal(penalized, "Hello world" + "Hello".repeat(4));
  // min_p = 1 keeps only the most likely token: a sampled request is greedy.
  const greedy = await client.chat.completions.create({ model, messages: hello, max_tokens: 8, temperature: 0 });
  const minp = await client.chat.completions.create({ model, messages: hello, max_tokens: 8, temperature: 1.5, seed: 9, min_p: 1 });
  assert.equal(minp.choices[0].message.content, greedy.choices[0].message.content);
});

test("presence and frequency penalties: they change seeded draws, which repeat (each request's counts start at 0)", async () => {
  // Three tokens lifted alike are drawn about evenly; a frequency penalty of 2 makes a drawn token
  // e^2 times less likely per occurrence, so some of these draws must change.
  const lifted = { [kHello]: 100, [kWorld]: 100, [kComma]: 100 };
  let changed = 0;
  for (let seed = 0; seed < 4; ++seed) {
    const params = { model, prompt: "Numbers:", max_tokens: 12, temperature: 1, seed, logit_bias: lifted };
    const plain = (await client.completions.create(params)).choices[0].text;
    const pen = { ...params, frequency_penalty: 2, presence_penalty: 1 };
    const a = (await client.completions.create(pen)).choices[0].text;
    const b = (await client.completions.create(pen)).choices[0].text;
    assert.equal(a, b, "a seeded request with penalties reproduces: nothing of the last one's counts remains");
    assert.match(a, /^(Hello| world|,)+$/);
    changed += a !== plain;
  }
  assert.ok(changed > 0, "penalties changed none of the draws");
});

await runTests();
