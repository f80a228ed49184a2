// Qwen3.5's XML tool-call format through the official `openai` npm client, on the tiny fuel forged
// with our Qwen3.5-shaped template (xml_tools.sh builds and serves it): typed parameters converted with
// the tool's schema, several calls in a turn, a call inside reasoning, a malformed block, tool_choice
// required and named, and the agent loop's next turn — the assistant's calls sent back with string
// arguments as OpenAI clients send them, rendered exactly as the JavaScript reference renders the
// same history with argument mappings, and resumed from the prefix cache.
//
// Every test is FORCED (the server's TEST-ONLY --force-tokens, selected by `user`) except the last
// turn's free request and the tool-call oracle (tool_oracle.mjs), which samples.
//
//   node xml_tools.mjs BASE_URL MODEL TEMPLATE.jinja TOKENIZER_DIR PAGE_TOKENS
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import OpenAI from "openai";
import { runTests, test } from "./runner.mjs";
import { collectChat } from "./chat_stream.mjs";
import { toolOracle } from "./tool_oracle.mjs";
import { Template } from "@huggingface/jinja";
import { TokenizerLoader } from "@lenml/tokenizers";

const [base, model, templatePath, tokenizerDir, pageArg] = process.argv.slice(2);
// The cache resumes at page boundaries, where the recurrent state was captured.
const pageTokens = Number(pageArg);
const resumable = (usage) => Math.floor((usage.prompt_tokens + usage.completion_tokens - 1) / pageTokens) * pageTokens;
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: "unused", maxRetries: 0, timeout: 120_000 });
const readJson = (path) => JSON.parse(readFileSync(path, "utf8"));
const tokenizer = TokenizerLoader.fromPreTrained({
  tokenizerJSON: readJson(`${tokenizerDir}/tokenizer.json`),
  tokenizerConfig: readJson(`${tokenizerDir}/tokenizer_config.json`),
});
const template = new Template(readFileSync(templatePath, "utf8"));

const ask = [{ role: "user", content: "Save my notes, then tell me the weather." }];
const tools = [
  {
    type: "function",
    function: {
      name: "write_file",
      description: "Writes a file.",
      parameters: {
        type: "object",
        properties: {
          path: { type: "string" }, text: { type: "string" }, count: { type: "integer" },
          mode: { type: "object" }, tags: { type: "array" }, force: { type: "boolean" },
        },
        required: ["path"],
      },
    },
  },
  {
    type: "function",
    function: {
      name: "get_weather",
      parameters: { type: "object", properties: { city: { type: "string" }, days: { type: "integer" } } },
    },
  },
];

const both = async (params) => [
  await client.chat.completions.create(params),
  await collectChat(await client.chat.completions.create({ ...params, stream: true })),
];
const named = (calls) => calls.map((c) => [c.function?.name ?? c.name, JSON.parse(c.function?.arguments ?? c.arguments)]);


const typedArguments = {
  path: "notes/a.txt", text: "line one\n\n  line two", count: 3, mode: { append: true, perm: 420 }, tags: ["x", 2, null],
  force: false,
};

test("typed parameters: strings verbatim, the rest parsed as JSON, in the order written", async () => {
  const [r, s] = await both({ model, messages: ask, tools, user: "typed" });
  const m = r.choices[0].message;
  assert.equal(r.choices[0].finish_reason, "tool_calls");
  assert.equal(m.content, null);
  assert.equal(m.reasoning_content, "The user wants a file.");
  assert.equal(m.tool_calls.length, 1);
  assert.match(m.tool_calls[0].id, /^call_/);
  assert.equal(m.tool_calls[0].function.name, "write_file");
  // The exact string: key order as the model wrote the parameters.
  assert.equal(m.tool_calls[0].function.arguments, JSON.stringify(typedArguments));
  assert.equal(s.finish, "tool_calls");
  assert.equal(s.content, "");
  assert.equal(s.reasoning, "The user wants a file.");
  assert.deepEqual(s.calls.map((c) => [c.name, c.arguments]), [["write_file", JSON.stringify(typedArguments)]]);
});

test("values that do not parse as their type, and undeclared parameters, stay strings", async () => {
  const r = await client.chat.completions.create({ model, messages: ask, tools, user: "loose" });
  assert.deepEqual(named(r.choices[0].message.tool_calls), [["write_file", { count: "three", note: '{"a": 1}', path: "42" }]]);
});

test("two calls in one turn, whole and streamed", async () => {
  const [r, s] = await both({ model, messages: ask, tools, user: "two_calls" });
  const want = [["get_weather", { city: "Paris" }], ["get_weather", { city: "Rome", days: 2 }]];
  assert.deepEqual(named(r.choices[0].message.tool_calls), want);
  assert.notEqual(r.choices[0].message.tool_calls[0].id, r.choices[0].message.tool_calls[1].id);
  assert.equal(r.choices[0].message.reasoning_content, "Two cities.");
  assert.deepEqual(named(s.calls), want);
  assert.equal(s.finish, "tool_calls");
});

test("a call written inside reasoning ends the reasoning and is a call", async () => {
  const [r, s] = await both({ model, messages: ask, tools, user: "in_reasoning" });
  assert.equal(r.choices[0].message.reasoning_content, "I should look it up.");
  assert.deepEqual(named(r.choices[0].message.tool_calls), [["get_weather", { city: "Oslo" }]]);
  assert.equal(r.choices[0].finish_reason, "tool_calls");
  assert.equal(s.reasoning, "I should look it up.");
  assert.deepEqual(named(s.calls), [["get_weather", { city: "Oslo" }]]);
});

test("a malformed block comes back as content", async () => {
  const [r, s] = await both({ model, messages: ask, tools, user: "malformed" });
  const block = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</function>\n</tool_call>";
  assert.equal(r.choices[0].finish_reason, "stop");
  assert.equal(r.choices[0].message.tool_calls, undefined);
  assert.equal(r.choices[0].message.content, block);
  assert.equal(s.content, block);
  assert.equal(s.calls.length, 0);
});

test("tool_choice naming a function: one call continuing the opening in the prompt", async () => {
  const tool_choice = { type: "function", function: { name: "get_weather" } };
  const [r, s] = await both({ model, messages: ask, tools, tool_choice, user: "named_continues" });
  assert.equal(r.choices[0].finish_reason, "tool_calls");
  assert.deepEqual(named(r.choices[0].message.tool_calls), [["get_weather", { city: "Lyon" }]]);
  assert.deepEqual(named(s.calls), [["get_weather", { city: "Lyon" }]]);
});

test("tool_choice required: the output names the function", async () => {
  const [r, s] = await both({ model, messages: ask, tools, tool_choice: "required", user: "required_continues" });
  assert.deepEqual(named(r.choices[0].message.tool_calls), [["get_weather", { city: "Brest" }]]);
  assert.deepEqual(named(s.calls), [["get_weather", { city: "Brest" }]]);
  assert.equal(s.finish, "tool_calls");
});

// The prompt the server must have built for `messages`: the template rendered by the JavaScript
// reference with every call's arguments as a mapping, tokenised by the JavaScript tokenizer.
const referencePromptTokens = (messages) => {
  const history = messages.map((m) => m.tool_calls
    ? { ...m, tool_calls: m.tool_calls.map((c) => ({ ...c, function: { ...c.function, arguments: JSON.parse(c.function.arguments) } })) }
    : m);
  const text = template.render({ messages: history, tools, add_generation_prompt: true, bos_token: null, eos_token: "<|im_end|>" });
  return tokenizer.encode(text, { add_special_tokens: false }).length;
};

test("the agent loop's next turn: string arguments render as a mapping and the turn resumes from cache", async () => {
  const first = await client.chat.completions.create({ model, messages: ask, tools, user: "typed" });
  const assistant = first.choices[0].message;  // as the SDK returns it: arguments a JSON string
  assert.equal(typeof assistant.tool_calls[0].function.arguments, "string");
  const messages = [
    ...ask,
    { role: "assistant", content: assistant.content, reasoning_content: assistant.reasoning_content, tool_calls: assistant.tool_calls },
    { role: "tool", tool_call_id: assistant.tool_calls[0].id, content: "wrote 2 lines" },
  ];
  const next = await client.chat.completions.create({ model, messages, tools, user: "answer" });
  assert.equal(next.choices[0].message.content, "It is sunny in Paris, 21 degrees.");
  assert.equal(next.usage.prompt_tokens, referencePromptTokens(messages));
  // The re-rendered call is the text the model generated, so the cache holds the first turn whole (its
  // prompt and its completion less the last token, whose successor was never computed), up to the
  // last page boundary in it.
  const cached = next.usage.prompt_tokens_details.cached_tokens;
  assert.ok(resumable(first.usage) > 0, "the first turn fills at least a page");
  assert.ok(cached >= resumable(first.usage),
            `cached ${cached} of ${next.usage.prompt_tokens}; first turn ${first.usage.prompt_tokens} + ${first.usage.completion_tokens}`);
  // A third turn, sampled: a new user message puts both assistant turns before the last query, where
  // the template drops reasoning unless preserve_thinking is set. Dropped, the history diverges from
  // the cache at the first assistant turn; preserved, it is the second turn's tokens again.
  const third = [...messages, next.choices[0].message, { role: "user", content: "Thanks!" }];
  const dropped = await client.chat.completions.create({ model, messages: third, tools, max_tokens: 8 });
  assert.ok(dropped.usage.completion_tokens >= 1);
  assert.ok(dropped.usage.prompt_tokens_details.cached_tokens <= first.usage.prompt_tokens,
            `cached ${dropped.usage.prompt_tokens_details.cached_tokens} past the first assistant turn`);
  const kept = await client.chat.completions.create({
    model, messages: third, tools, max_tokens: 8, chat_template_kwargs: { preserve_thinking: true } });
  assert.ok(kept.usage.prompt_tokens > dropped.usage.prompt_tokens, "the reasoning is rendered");
  assert.ok(kept.usage.prompt_tokens_details.cached_tokens >= resumable(next.usage),
            `cached ${kept.usage.prompt_tokens_details.cached_tokens}; second turn ${next.usage.prompt_tokens} + ${next.usage.completion_tokens}`);
});

test("arguments that are not a JSON object are refused, naming the field", async () => {
  const bad = [...ask, { role: "assistant", content: null, tool_calls: [
    { id: "call_1", type: "function", function: { name: "get_weather", arguments: "[1, 2]" } }] }];
  await assert.rejects(client.chat.completions.create({ model, messages: bad, tools }), (e) => {
    assert.equal(e.status, 400);
    assert.match(e.error?.param ?? e.param ?? "", /messages\[1\]\.tool_calls\[0\]\.function\.arguments/);
    return true;
  });
});

test("tool calls under the grammar (XML format): sampled arguments parse and validate under ajv", async () => {
  // Thinking off: auto mode's grammar starts after the reasoning, which random weights rarely close.
  const counts = await toolOracle(client, model, 18, { xml: true, seed: 5, extra: { chat_template_kwargs: { enable_thinking: false } } });
  console.log(`  tool oracle: ${counts.validated} of ${counts.calls} calls validated, ${counts.text} auto answers in text, ` +
              `${counts.truncated} forced calls cut by max_tokens`);
  assert.ok(counts.validated >= 6, `too few validated calls: ${JSON.stringify(counts)}`);
  assert.ok(counts.truncated <= 2, `too many forced calls cut by max_tokens: ${JSON.stringify(counts)}`);
});

await runTests();
