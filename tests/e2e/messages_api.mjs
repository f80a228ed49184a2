// End-to-end tests of POST /v1/messages (Anthropic's Messages API: Claude Code, the Anthropic SDKs)
// through the official `@anthropic-ai/sdk` client, on the server openai_client.sh starts: whole and
// streamed messages (the client's own stream accumulator rebuilds the message from the events),
// thinking, text and tool_use blocks, tool results sent back, count_tokens, stop sequences, the key
// as x-api-key, and the refusals in Anthropic's error shape. Each prompt is checked against the chat
// request it stands for (same prompt tokens, same greedy text). What Claude Code sends besides: signed
// thinking sent back (display omitted), server tools left out, context editing applied to the prompt.
// FORCED tests use the server's TEST-ONLY --force-tokens sequences (openai_client.sh).
//
//   node messages_api.mjs BASE_URL API_KEY MODEL
import assert from "node:assert/strict";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { runTests, test } from "./runner.mjs";

const [base, apiKey, model] = process.argv.slice(2);
const client = new Anthropic({ baseURL: base, apiKey, maxRetries: 0, timeout: 120_000 });
const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey, maxRetries: 0, timeout: 120_000 });
const tools = [
  { name: "get_weather", description: "The weather in a city",
    input_schema: { type: "object", properties: { city: { type: "string" }, unit: { type: "string" } }, required: ["city"] } },
  { name: "get_time", input_schema: { type: "object", properties: { zone: { type: "string" } } } },
];
const chatTools = tools.map(({ name, description, input_schema }) =>
  ({ type: "function", function: { name, ...(description ? { description } : {}), parameters: input_schema } }));
const hello = [{ role: "user", content: "Hello, who are you?" }];

async function rejects(promise, status, type, mention) {
  try {
    await promise;
  } catch (e) {
    assert.ok(e instanceof Anthropic.APIError, `not an APIError: ${e}`);
    assert.equal(e.status, status, e.message);
    assert.equal(e.error?.type, "error", JSON.stringify(e.error));
    assert.equal(e.error.error.type, type, JSON.stringify(e.error));
    if (mention) assert.ok(e.error.error.message.includes(mention), e.error.error.message);
    return;
  }
  assert.fail(`expected HTTP ${status}`);
}

const withoutIds = (content) => content.map(({ id, ...rest }) => rest);
// Anthropic counts a prompt in three parts.
const promptTokens = (u) => u.input_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens;
// A thinking block's signature: its reasoning, sealed by the server (openai/sealed_reasoning.h).
const unseal = (signature) => {
  assert.ok(signature.startsWith("rocket.r1."), signature);
  return Buffer.from(signature.slice("rocket.r1.".length), "base64").toString();
};

test("text: message object and usage as the chat request's; streamed equals whole", async () => {
  const params = { model, max_tokens: 8, system: "Be brief.", messages: hello, temperature: 0 };
  const m = await client.messages.create(params);
  assert.match(m.id, /^msg_/);
  assert.equal(m.type, "message");
  assert.equal(m.role, "assistant");
  assert.equal(m.model, model);
  assert.equal(m.content.length, 1);
  assert.equal(m.content[0].type, "text");
  assert.ok(["max_tokens", "end_turn"].includes(m.stop_reason), m.stop_reason);
  assert.equal(m.stop_sequence, null);
  const chat = await openai.chat.completions.create({
    model, max_tokens: 8, temperature: 0, messages: [{ role: "system", content: "Be brief." }, ...hello] });
  assert.equal(m.content[0].text, chat.choices[0].message.content);
  assert.equal(promptTokens(m.usage), chat.usage.prompt_tokens);
  assert.equal(m.usage.output_tokens, chat.usage.completion_tokens);

  const events = [];
  const stream = client.messages.stream(params);
  stream.on("streamEvent", (e) => events.push(e.type));
  const s = await stream.finalMessage();
  assert.equal(events[0], "message_start");
  assert.equal(events.at(-1), "message_stop");
  assert.ok(events.includes("content_block_delta"));
  assert.deepEqual(s.content, m.content);
  assert.equal(s.stop_reason, m.stop_reason);
  assert.equal(s.usage.output_tokens, m.usage.output_tokens);
  assert.equal(promptTokens(s.usage), chat.usage.prompt_tokens);
  // The second time the prompt's whole pages come from the cache the first one wrote.
  assert.ok(s.usage.cache_read_input_tokens >= m.usage.cache_creation_input_tokens, JSON.stringify([m.usage, s.usage]));
});

test("FORCED: thinking and tool_use blocks, whole and streamed", async () => {
  const params = { model, max_tokens: 200, tools, messages: [{ role: "user", content: "Weather in Paris?" }],
                   metadata: { user_id: "think_then_call" } };
  const m = await client.messages.create(params);
  assert.equal(m.stop_reason, "tool_use");
  assert.equal(m.content.length, 2, JSON.stringify(m.content));
  assert.equal(m.content[0].type, "thinking");
  assert.equal(m.content[0].thinking, "The user wants the weather in Paris.");
  assert.equal(unseal(m.content[0].signature), m.content[0].thinking);
  assert.equal(m.content[1].type, "tool_use");
  assert.equal(m.content[1].name, "get_weather");
  assert.deepEqual(m.content[1].input, { city: "Paris" });
  const s = await client.messages.stream(params).finalMessage();
  assert.deepEqual(withoutIds(s.content), withoutIds(m.content));
  assert.equal(s.stop_reason, "tool_use");
});

test("FORCED: tool results sent back; the prompt and count_tokens are the chat turn's", async () => {
  const first = await client.messages.create({ model, max_tokens: 200, tools, metadata: { user_id: "two_calls" },
                                               messages: [{ role: "user", content: "Weather and time in Paris?" }] });
  const uses = first.content.filter((b) => b.type === "tool_use");
  assert.deepEqual(uses.map((u) => u.name), ["get_weather", "get_time"]);
  const messages = [
    { role: "user", content: "Weather and time in Paris?" },
    { role: "assistant", content: first.content },
    { role: "user", content: [
      { type: "tool_result", tool_use_id: uses[0].id, content: "22 C, sunny" },
      { type: "tool_result", tool_use_id: uses[1].id, content: [{ type: "text", text: "14:05" }] },
      { type: "text", text: "Thanks.", cache_control: { type: "ephemeral" } },
    ] },
  ];
  const next = await client.messages.create({ model, max_tokens: 4, tools, messages });
  const chat = await openai.chat.completions.create({
    model, tools: chatTools, max_tokens: 4,
    messages: [
      { role: "user", content: "Weather and time in Paris?" },
      { role: "assistant", content: null,
        tool_calls: uses.map((u) => ({ id: u.id, type: "function", function: { name: u.name, arguments: JSON.stringify(u.input) } })) },
      { role: "tool", tool_call_id: uses[0].id, content: "22 C, sunny" },
      { role: "tool", tool_call_id: uses[1].id, content: "14:05" },
      { role: "user", content: "Thanks." },
    ] });
  assert.equal(promptTokens(next.usage), chat.usage.prompt_tokens);
  const counted = await client.messages.countTokens({ model, tools, messages });
  assert.equal(counted.input_tokens, chat.usage.prompt_tokens);
});

test("FORCED: stop_sequences report the one hit; a max_tokens past the context is a cap", async () => {
  const m = await client.messages.create({ model, max_tokens: 1_000_000, messages: hello, metadata: { user_id: "stop_split" },
                                           stop_sequences: ["never", "ta gam"] });
  assert.deepEqual(m.content, [{ type: "text", text: "Alpha be" }]);
  assert.equal(m.stop_reason, "stop_sequence");
  assert.equal(m.stop_sequence, "ta gam");
  const s = await client.messages.stream({ model, max_tokens: 50, messages: hello, metadata: { user_id: "stop_split" } })
                                   .finalMessage();
  assert.equal(s.content[0].text, "Alpha beta gamma delta epsilon");
  assert.equal(s.stop_reason, "end_turn");
});

test("FORCED: thinking with display omitted comes back by its signature and renders as the turn's reasoning", async () => {
  const thinking = { type: "enabled", budget_tokens: 100, display: "omitted" };
  const params = { model, max_tokens: 200, tools, thinking, messages: [{ role: "user", content: "Weather in Paris?" }],
                   metadata: { user_id: "think_then_call" } };
  const m = await client.messages.create(params);
  assert.equal(m.content[0].type, "thinking");
  assert.equal(m.content[0].thinking, "");  // omitted: the signature carries it
  assert.equal(unseal(m.content[0].signature), "The user wants the weather in Paris.");
  const s = await client.messages.stream(params).finalMessage();
  assert.equal(s.content[0].thinking, "");
  assert.equal(s.content[0].signature, m.content[0].signature);
  const use = m.content[1];
  const messages = [{ role: "user", content: "Weather in Paris?" }, { role: "assistant", content: m.content },
                    { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "22 C" }] }];
  const counted = await client.messages.countTokens({ model, tools, messages });
  const chat = await openai.chat.completions.create({
    model, tools: chatTools, max_tokens: 1,
    messages: [{ role: "user", content: "Weather in Paris?" },
               { role: "assistant", content: null, reasoning_content: "The user wants the weather in Paris.",
                 tool_calls: [{ id: use.id, type: "function", function: { name: use.name, arguments: JSON.stringify(use.input) } }] },
               { role: "tool", tool_call_id: use.id, content: "22 C" }] });
  assert.equal(counted.input_tokens, chat.usage.prompt_tokens);
});

test("server tools are not offered: the prompt is the one without them, and no use is counted", async () => {
  const m = await client.messages.create({ model, max_tokens: 2, messages: hello,
                                           tools: [{ type: "web_search_20250305", name: "web_search", max_uses: 3 }, tools[0]] });
  const plain = await client.messages.create({ model, max_tokens: 2, messages: hello, tools: [tools[0]] });
  assert.equal(promptTokens(m.usage), promptTokens(plain.usage));
  assert.equal(m.usage.server_tool_use.web_search_requests, 0);
});

test("context editing: tool results past the trigger are cleared as documented, and the answer says so", async () => {
  const messages = [
    { role: "user", content: "Weather and time in Paris?" },
    { role: "assistant", content: [{ type: "tool_use", id: "toolu_a", name: "get_weather", input: { city: "Paris" } }] },
    { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_a", content: "22 C, sunny, light wind from the west" }] },
    { role: "assistant", content: [{ type: "tool_use", id: "toolu_b", name: "get_time", input: { zone: "Europe/Paris" } }] },
    { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_b", content: "14:05" }] },
  ];
  const context_management = { edits: [{ type: "clear_tool_uses_20250919", trigger: { type: "tool_uses", value: 1 },
                                          keep: { type: "tool_uses", value: 1 } }] };
  const m = await client.beta.messages.create({ model, max_tokens: 2, tools, messages, context_management,
                                                betas: ["context-management-2025-06-27"] });
  assert.equal(m.context_management.applied_edits.length, 1, JSON.stringify(m.context_management));
  const edit = m.context_management.applied_edits[0];
  assert.equal(edit.type, "clear_tool_uses_20250919");
  assert.equal(edit.cleared_tool_uses, 1);
  const chat = await openai.chat.completions.create({
    model, tools: chatTools, max_tokens: 1,
    messages: [
      { role: "user", content: "Weather and time in Paris?" },
      { role: "assistant", content: null, tool_calls: [{ id: "toolu_a", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }] },
      { role: "tool", tool_call_id: "toolu_a", content: "[tool result cleared to save context]" },
      { role: "assistant", content: null, tool_calls: [{ id: "toolu_b", type: "function", function: { name: "get_time", arguments: '{"zone":"Europe/Paris"}' } }] },
      { role: "tool", tool_call_id: "toolu_b", content: "14:05" },
    ] });
  assert.equal(promptTokens(m.usage), chat.usage.prompt_tokens);
  const full = await client.messages.create({ model, max_tokens: 2, tools, messages });
  assert.equal(promptTokens(full.usage) - promptTokens(m.usage), edit.cleared_input_tokens);
});

test("refusals in Anthropic's error shape", async () => {
  const wrong = new Anthropic({ baseURL: base, apiKey: "wrong", maxRetries: 0 });
  await rejects(wrong.messages.create({ model, max_tokens: 4, messages: hello }), 401, "authentication_error");
  await rejects(client.messages.create({ model: "other", max_tokens: 4, messages: hello }), 404, "not_found_error");
  await rejects(client.messages.create({ model, messages: hello }), 400, "invalid_request_error", "max_tokens");
  await rejects(client.messages.create({ model, max_tokens: 4, messages: [{ role: "user", content: [
    { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } }] }] }),
                400, "invalid_request_error", "its plan carries no vision tower");
  await rejects(client.messages.create({ model, max_tokens: 4, messages: [{ role: "user", content: [
    { type: "image", source: { type: "url", url: "https://example.com/a.png" } }] }] }),
                400, "invalid_request_error", "remote image URLs are not fetched");
  await rejects(client.messages.create({ model, max_tokens: 4, messages: hello,
                                         tools: [{ type: "bash_20250124", name: "bash" }] }),
                400, "invalid_request_error", "tools[0].type");
  await rejects(client.messages.create({ model, max_tokens: 4, messages: hello, mcp_servers: [{ type: "url", url: "http://x", name: "x" }] }),
                400, "invalid_request_error", "mcp_servers");
  await rejects(client.messages.create({ model, max_tokens: 4, messages: hello, tools: [{ name: "f", input_schema: 5 }] }),
                400, "invalid_request_error", "tools[0].input_schema");
  await rejects(client.messages.create({ model, max_tokens: 4, messages: hello, stop_sequences: [""] }),
                400, "invalid_request_error", "stop_sequences");
  await rejects(client.messages.create({ model, max_tokens: 4, messages: hello, frobnicate: 1 }),
                400, "invalid_request_error", "frobnicate");
  await rejects(client.messages.create({ model, max_tokens: 4, messages: hello, thinking: { type: "enabled", budget_tokens: 8 } }),
                400, "invalid_request_error", "budget_tokens");
});

await runTests();
