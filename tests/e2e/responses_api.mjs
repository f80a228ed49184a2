// End-to-end tests of POST /v1/responses (OpenAI's Responses API: the OpenAI Agents SDK's default,
// Codex's wire API) through the official `openai` npm client, on the server openai_client.sh starts:
// whole and streamed responses (the client's own stream accumulator rebuilds the response from the
// events), items for reasoning, messages and function calls, a conversation sent back as items, the
// same prompt as the chat request the items stand for, structured output, and the refusals. What Codex
// sends besides: encrypted reasoning carried between turns, namespace tools, a hosted web_search.
// FORCED tests use the server's TEST-ONLY --force-tokens sequences (openai_client.sh).
//
//   node responses_api.mjs BASE_URL API_KEY MODEL
import assert from "node:assert/strict";
import OpenAI from "openai";
import { runTests, test } from "./runner.mjs";

const [base, apiKey, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey, maxRetries: 0, timeout: 120_000 });
const tools = [
  {
    type: "function",
    name: "get_weather",
    description: "The weather in a city",
    parameters: { type: "object", properties: { city: { type: "string" }, unit: { type: "string" } }, required: ["city"] },
  },
  { type: "function", name: "get_time", parameters: { type: "object", properties: { zone: { type: "string" } } } },
];
const chatTools = tools.map(({ type, ...f }) => ({ type, function: f }));

async function rejects(promise, status, param) {
  try {
    await promise;
  } catch (e) {
    assert.ok(e instanceof OpenAI.APIError, `not an APIError: ${e}`);
    assert.equal(e.status, status, e.message);
    assert.equal(e.param, param, e.message);
    return;
  }
  assert.fail(`expected HTTP ${status}`);
}

// The stream through the client's accumulator, and every event it saw.
async function streamed(params) {
  const events = [];
  const s = client.responses.stream(params);
  for await (const e of s) events.push(e);
  return { events, response: await s.finalResponse() };
}

// Items without their random ids (nor the client's parsed_arguments), to compare two answers.
const shape = (output) => output.map(({ id, call_id, parsed_arguments, ...rest }) => rest);
const textOf = (response) => response.output.filter((o) => o.type === "message").map((o) => o.content[0].text).join("");

test("text: response object, usage, incomplete at max_output_tokens; streamed equals whole", async () => {
  const params = { model, instructions: "Be brief.", input: "Hello, who are you?", max_output_tokens: 8, temperature: 0 };
  const r = await client.responses.create(params);
  assert.match(r.id, /^resp_/);
  assert.equal(r.object, "response");
  assert.equal(r.model, model);
  assert.equal(r.store, false);
  assert.equal(r.instructions, "Be brief.");
  assert.equal(r.max_output_tokens, 8);
  const message = r.output.find((o) => o.type === "message");
  assert.ok(message, JSON.stringify(r.output));
  assert.match(message.id, /^msg_/);
  assert.equal(message.role, "assistant");
  assert.equal(message.content[0].type, "output_text");
  assert.equal(r.output_text, message.content[0].text);  // the client's own join of the output text
  assert.ok(r.usage.input_tokens > 0);
  assert.ok(r.usage.output_tokens > 0 && r.usage.output_tokens <= 8, JSON.stringify(r.usage));
  assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
  assert.equal(r.usage.output_tokens_details.reasoning_tokens, 0);
  if (r.usage.output_tokens === 8) {  // random weights: eos is unlikely in 8 tokens
    assert.equal(r.status, "incomplete");
    assert.deepEqual(r.incomplete_details, { reason: "max_output_tokens" });
    assert.equal(message.status, "incomplete");
  } else {
    assert.equal(r.status, "completed");
  }

  const { events, response } = await streamed(params);
  assert.deepEqual(events.map((e) => e.sequence_number), events.map((_, i) => i));
  assert.deepEqual(events.slice(0, 4).map((e) => e.type),
                   ["response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"]);
  assert.equal(events.at(-1).type, r.status === "completed" ? "response.completed" : "response.incomplete");
  const deltas = events.filter((e) => e.type === "response.output_text.delta");
  assert.ok(deltas.length > 0);
  assert.equal(deltas.map((e) => e.delta).join(""), r.output_text);
  assert.equal(textOf(response), r.output_text);  // what the client's accumulator made of the deltas
  // The last event carries the whole response (the accumulator takes it from response.completed only).
  assert.deepEqual(shape(events.at(-1).response.output), shape(r.output));
  assert.deepEqual(events.at(-1).response.usage, r.usage);
});

test("the prompt is the chat request's: instructions as the system message, same greedy text", async () => {
  const r = await client.responses.create({ model, instructions: "Be brief.", input: "Hello, who are you?",
                                            max_output_tokens: 12, temperature: 0 });
  const c = await client.chat.completions.create({
    model, max_tokens: 12, temperature: 0,
    messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Hello, who are you?" }] });
  assert.equal(r.usage.input_tokens, c.usage.prompt_tokens);
  assert.equal(r.output_text, c.choices[0].message.content);
});

test("FORCED: reasoning and a function call as items, whole and streamed", async () => {
  const params = { model, input: "Weather in Paris?", tools, user: "think_then_call" };
  const r = await client.responses.create(params);
  assert.equal(r.status, "completed");
  assert.equal(r.output.length, 2, JSON.stringify(r.output));
  const [reasoning, call] = r.output;
  assert.equal(reasoning.type, "reasoning");
  assert.match(reasoning.id, /^rs_/);
  assert.deepEqual(reasoning.content, [{ type: "reasoning_text", text: "The user wants the weather in Paris." }]);
  assert.equal(call.type, "function_call");
  assert.match(call.id, /^fc_/);
  assert.match(call.call_id, /^call_/);
  assert.equal(call.name, "get_weather");
  assert.equal(call.status, "completed");
  assert.deepEqual(JSON.parse(call.arguments), { city: "Paris" });
  const details = r.usage.output_tokens_details.reasoning_tokens;
  assert.ok(details > 0 && details < r.usage.output_tokens, JSON.stringify(r.usage));

  const { events, response } = await streamed(params);
  assert.deepEqual(shape(response.output), shape(r.output));
  const types = events.map((e) => e.type);
  for (const t of ["response.reasoning_text.delta", "response.reasoning_text.done", "response.function_call_arguments.delta",
                   "response.function_call_arguments.done", "response.output_item.done", "response.completed"])
    assert.ok(types.includes(t), `${t} missing from ${types}`);
  const done = events.find((e) => e.type === "response.function_call_arguments.done");
  assert.equal(done.name, "get_weather");
  assert.deepEqual(JSON.parse(done.arguments), { city: "Paris" });
});

test("FORCED: two calls are two items; sent back with their outputs, the prompt is the chat turn's", async () => {
  const first = await client.responses.create({ model, input: "Weather and time in Paris?", tools, user: "two_calls" });
  const calls = first.output.filter((o) => o.type === "function_call");
  assert.deepEqual(calls.map((c) => c.name), ["get_weather", "get_time"]);
  assert.notEqual(calls[0].call_id, calls[1].call_id);
  const input = [
    { role: "user", content: "Weather and time in Paris?" },
    ...first.output,
    { type: "function_call_output", call_id: calls[0].call_id, output: "22 C, sunny" },
    { type: "function_call_output", call_id: calls[1].call_id, output: [{ type: "input_text", text: "14:05" }] },
  ];
  const next = await client.responses.create({ model, input, tools, max_output_tokens: 4 });
  const chat = await client.chat.completions.create({
    model, tools: chatTools, max_tokens: 4,
    messages: [
      { role: "user", content: "Weather and time in Paris?" },
      { role: "assistant", content: null,
        tool_calls: calls.map((c) => ({ id: c.call_id, type: "function", function: { name: c.name, arguments: c.arguments } })) },
      { role: "tool", tool_call_id: calls[0].call_id, content: "22 C, sunny" },
      { role: "tool", tool_call_id: calls[1].call_id, content: "14:05" },
    ] });
  assert.equal(next.usage.input_tokens, chat.usage.prompt_tokens);
  assert.ok(next.usage.input_tokens > first.usage.input_tokens);
});

test("FORCED: reasoning then text; a reasoning item sent back is the next assistant turn's", async () => {
  const r = await client.responses.create({ model, input: "What is 2 + 2?", user: "reasoning" });
  assert.deepEqual(r.output.map((o) => o.type), ["reasoning", "message"]);
  assert.equal(r.output_text, "The answer is 4.");
  const input = [{ role: "user", content: "What is 2 + 2?" }, ...r.output, { role: "user", content: "And 3 + 3?" }];
  const next = await client.responses.create({ model, input, max_output_tokens: 2 });
  const chat = await client.chat.completions.create({
    model, max_tokens: 2,
    messages: [
      { role: "user", content: "What is 2 + 2?" },
      { role: "assistant", content: "The answer is 4.", reasoning_content: "Two plus two is four." },
      { role: "user", content: "And 3 + 3?" },
    ] });
  assert.equal(next.usage.input_tokens, chat.usage.prompt_tokens);
});

test("FORCED: encrypted reasoning sent back alone renders as the turn's reasoning; namespaces and hosted tools", async () => {
  const namespace = { type: "namespace", name: "weather_ns", description: "Weather tools.", tools: [tools[0]] };
  const r = await client.responses.create({
    model, input: "Weather in Paris?", tools: [namespace, tools[1], { type: "web_search", external_web_access: false }],
    user: "think_then_call", include: ["reasoning.encrypted_content"], store: false, reasoning: { summary: "auto" },
    prompt_cache_key: "thread-1", client_metadata: { thread_id: "thread-1" } });
  const [reasoning, call] = r.output;
  assert.match(reasoning.encrypted_content, /^rocket\.r1\./);
  assert.equal(call.name, "get_weather");
  assert.equal(call.namespace, "weather_ns");  // its tool came from the namespace
  assert.deepEqual(r.tools.map((t) => t.type), ["namespace", "function"]);  // web_search was not offered
  // The reasoning sent back as Codex does (encrypted_content, no text) is the assistant turn's reasoning.
  const input = [{ role: "user", content: "Weather in Paris?" },
                 { type: "reasoning", id: reasoning.id, summary: [], encrypted_content: reasoning.encrypted_content },
                 call, { type: "function_call_output", call_id: call.call_id, output: "22 C" }];
  const next = await client.responses.create({ model, input, tools, max_output_tokens: 1 });
  const chat = await client.chat.completions.create({
    model, tools: chatTools, max_tokens: 1,
    messages: [{ role: "user", content: "Weather in Paris?" },
               { role: "assistant", content: null, reasoning_content: "The user wants the weather in Paris.",
                 tool_calls: [{ id: call.call_id, type: "function", function: { name: call.name, arguments: call.arguments } }] },
               { role: "tool", tool_call_id: call.call_id, content: "22 C" }] });
  assert.equal(next.usage.input_tokens, chat.usage.prompt_tokens);
});

test("text.format json_schema: the output parses and follows the schema", async () => {
  const schema = { type: "object", properties: { answer: { enum: ["yes", "no"] } }, required: ["answer"],
                   additionalProperties: false };
  const r = await client.responses.create({ model, input: "Is the sky blue?", max_output_tokens: 32,
                                            text: { format: { type: "json_schema", name: "verdict", schema, strict: true } } });
  assert.equal(r.status, "completed", JSON.stringify(r));
  assert.ok(["yes", "no"].includes(JSON.parse(r.output_text).answer), r.output_text);
  assert.deepEqual(r.text.format.name, "verdict");
});

test("refusals name the field as the Responses request spells it", async () => {
  const input = "Hi";
  await rejects(client.responses.create({ model, input, previous_response_id: "resp_x" }), 400, "previous_response_id");
  await rejects(client.responses.create({ model, input, tools: [{ type: "custom", name: "apply_patch" }] }), 400, "tools[0].type");
  // An image's URL is checked while parsing; a good one is refused where the prompt goes to the engine.
  await rejects(client.responses.create({ model, input: [{ role: "user", content: [{ type: "input_image", image_url: "x" }] }] }),
                400, "input");
  await rejects(client.responses.create({ model, input: [{ role: "user", content: [
    { type: "input_image", image_url: "data:image/png;base64,iVBORw0KGgo=", detail: "auto" }] }] }), 400, "input");
  await rejects(client.responses.create({ model, input: [{ role: "user", content: [
    { type: "input_image", file_id: "file-x", detail: "auto" }] }] }), 400, "input[0].content[0].file_id");
  await rejects(client.responses.create({ model, input: [{ type: "item_reference", id: "msg_x" }] }), 400, "input[0].type");
  await rejects(client.responses.create({ model, input, max_output_tokens: 0 }), 400, "max_output_tokens");
  await rejects(client.responses.create({ model, input, tools: [{ type: "function", name: "f", parameters: 5 }] }), 400,
                "tools[0].parameters");
  await rejects(client.responses.create({ model, input, tool_choice: { type: "function", name: "nope" }, tools }), 400,
                "tool_choice.name");
  await rejects(client.responses.create({ model, input, text: { format: { type: "xml" } } }), 400, "text.format.type");
  await rejects(client.responses.create({ model, input, truncation: "auto" }), 400, "truncation");
  await rejects(client.responses.create({ model, input, frobnicate: 1 }), 400, "frobnicate");
  await rejects(client.responses.create({ model, input: "x".repeat(20000), max_output_tokens: 4 }), 400, "input");
  await rejects(client.responses.create({ model: "other", input }), 404, "model");
});

await runTests();
