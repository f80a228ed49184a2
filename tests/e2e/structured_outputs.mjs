// Structured outputs end to end, through the official `openai` npm client, on the tiny fuel's random
// weights (so the model has no idea what JSON is: every token it writes is the grammar's doing):
//  - response_format json_object and json_schema, whole and streamed: the content parses and the
//    schema validates it;
//  - a schema keyword outside the subset is a 400 naming the keyword's path;
//  - the oracle: GENERATIONS sampled generations at temperature 1 over the schema corpus plus schemas
//    generated here at random, every one validated by ajv (a JSON Schema validator nobody here wrote);
//  - the tool-call oracle (tool_oracle.mjs) in this fuel's JSON tool-call format.
//
//   node structured_outputs.mjs BASE_URL MODEL SCHEMA_CORPUS GENERATIONS
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import Ajv from "ajv";
import addFormats from "ajv-formats";
import OpenAI from "openai";
import { runTests, test } from "./runner.mjs";
import { rng, toolOracle } from "./tool_oracle.mjs";

const [base, model, corpusPath, generationsArg] = process.argv.slice(2);
const generations = Number(generationsArg);
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: "none", maxRetries: 0, timeout: 300_000 });
const ajv = new Ajv({ strict: false, allErrors: true });
addFormats(ajv);
const corpus = JSON.parse(readFileSync(corpusPath, "utf8"));
const messages = [{ role: "user", content: "Reply in JSON." }];

function validate(schema, text, what) {
  let value;
  try {
    value = JSON.parse(text);
  } catch (e) {
    assert.fail(`${what}: the content does not parse (${e.message}): ${JSON.stringify(text)}`);
  }
  const check = ajv.compile(schema);
  assert.ok(check(value), `${what}: ${ajv.errorsText(check.errors)} in ${text}`);
  return value;
}

const jsonSchema = (name, schema) => ({ type: "json_schema", json_schema: { name, schema, strict: true } });

async function streamed(request) {
  const out = { content: "", finish: null };
  for await (const chunk of await client.chat.completions.create({ ...request, stream: true })) {
    for (const c of chunk.choices) {
      if (c.delta.content) out.content += c.delta.content;
      if (c.finish_reason) out.finish = c.finish_reason;
    }
  }
  return out;
}

// ---- random schemas of the supported subset

function randomSchema(r, depth = 0) {
  const pick = (xs) => xs[Math.floor(r() * xs.length)];
  const leaf = ["string", "integer", "number", "boolean", "null", "enum", "const", "union", "pattern", "format"];
  const kind = pick(depth >= 2 ? leaf : [...leaf, "object", "object", "array", "anyOf"]);
  switch (kind) {
    case "string": {
      const lo = Math.floor(r() * 3);
      return { type: "string", minLength: lo, maxLength: lo + Math.floor(r() * 12) };
    }
    case "integer": case "number": case "boolean": case "null": return { type: kind };
    case "enum": return { enum: pick([["a", "b", "c"], [1, 2.5, "x", null], ["é", "😀", "q\"t"], [true, { k: [1] }]]) };
    case "const": return { const: pick(["fixed", 42, false, ["a", 1]]) };
    case "union": return { type: pick([["string", "null"], ["integer", "boolean"], ["number", "string"]]), maxLength: 6 };
    case "pattern": return { type: "string", pattern: pick(["^[a-z]{1,6}$", "^\\d{2,3}-[A-F]+$", "^(yes|no|maybe)$", "^[^\"\\\\]{0,5}$"]) };
    case "format": return { type: "string", format: pick(["date", "time", "date-time", "uuid"]) };
    case "array": {
      const lo = Math.floor(r() * 2);
      return { type: "array", items: randomSchema(r, depth + 1), minItems: lo, maxItems: lo + Math.floor(r() * 3) };
    }
    case "anyOf": return { anyOf: [randomSchema(r, depth + 1), randomSchema(r, depth + 1)] };
    default: {
      const properties = {};
      const names = ["id", "name", "value", "tags", "clé", "a b", "x\"y", "n2"];
      const count = 1 + Math.floor(r() * 4);
      for (let i = 0; i < count; ++i) properties[pick(names)] = randomSchema(r, depth + 1);
      const required = Object.keys(properties).filter(() => r() < 0.6);
      return { type: "object", properties, required, additionalProperties: false };
    }
  }
}

// ---- tests

const weather = corpus.find((c) => c.name === "weather").schema;

test("json_object: any JSON object, whole and streamed", async () => {
  for (const stream of [false, true]) {
    const request = { model, messages, response_format: { type: "json_object" }, max_tokens: 400, temperature: 1, seed: 5 };
    const out = stream ? await streamed(request) : await client.chat.completions.create(request).then((r) => ({
      content: r.choices[0].message.content, finish: r.choices[0].finish_reason }));
    // Unbounded JSON from random weights may run out of tokens; a finished one is an object.
    assert.ok(out.content.trimStart().startsWith("{"), out.content);
    if (out.finish === "stop") assert.equal(typeof validate({ type: "object" }, out.content, "json_object"), "object");
    else assert.equal(out.finish, "length");
  }
});

test("json_schema: the content validates, whole and streamed, the same for one seed", async () => {
  const request = { model, messages, response_format: jsonSchema("weather", weather), max_tokens: 600, temperature: 1, seed: 9 };
  const whole = await client.chat.completions.create(request);
  assert.equal(whole.choices[0].finish_reason, "stop");
  validate(weather, whole.choices[0].message.content, "whole");
  const s = await streamed(request);
  assert.equal(s.finish, "stop");
  assert.equal(s.content, whole.choices[0].message.content);
  validate(weather, s.content, "streamed");
});

test("json_schema: greedy decoding too", async () => {
  const r = await client.chat.completions.create({ model, messages, response_format: jsonSchema("weather", weather), max_tokens: 600, temperature: 0 });
  validate(weather, r.choices[0].message.content, "greedy");
});

test("a keyword outside the subset is a 400 naming its path", async () => {
  const schema = { type: "object", properties: { n: { type: "integer", minimum: 3 } } };
  try {
    await client.chat.completions.create({ model, messages, response_format: jsonSchema("bad", schema) });
    assert.fail("accepted");
  } catch (e) {
    assert.ok(e instanceof OpenAI.BadRequestError, String(e));
    assert.equal(e.param, "response_format.json_schema.schema");
    assert.match(e.message, /\$\.properties\.n\.minimum: keyword 'minimum' is not supported/);
  }
});

test(`oracle: ${generations} generations at temperature 1 all parse and validate under ajv`, async () => {
  const r = rng(20241202);
  const schemas = corpus.map((c) => c.schema);
  while (schemas.length < corpus.length + 40) schemas.push(randomSchema(r));
  let next = 0, stopped = 0, truncated = 0;
  const worker = async () => {
    while (next < generations) {
      const i = next++;
      const schema = schemas[i % schemas.length];
      const res = await client.chat.completions.create({
        model, messages, response_format: jsonSchema(`s${i % schemas.length}`, schema), max_tokens: 800, temperature: 1, seed: i,
      });
      const c = res.choices[0];
      if (c.finish_reason === "length") {  // counted; a cut text cannot be validated
        ++truncated;
        continue;
      }
      assert.equal(c.finish_reason, "stop");
      validate(schema, c.message.content, `generation ${i} (schema ${i % schemas.length}: ${JSON.stringify(schema)})`);
      ++stopped;
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
  console.log(`  oracle: ${stopped} validated, ${truncated} ran out of max_tokens, over ${schemas.length} schemas`);
  assert.ok(truncated <= generations / 20, `too many generations cut by max_tokens: ${truncated}`);
});

test("a forced call's parameters outside the subset are a 400 naming the tool and path", async () => {
  const tools = [{ type: "function", function: { name: "f", parameters: { type: "object", properties: { n: { type: "integer", minimum: 3 } } } } }];
  try {
    await client.chat.completions.create({ model, messages, tools, tool_choice: "required", max_tokens: 8 });
    assert.fail("accepted");
  } catch (e) {
    assert.ok(e instanceof OpenAI.BadRequestError, String(e));
    assert.equal(e.param, "tools");
    assert.match(e.message, /\$\.properties\.n\.minimum: function 'f': keyword 'minimum' is not supported/);
  }
  // Not forced and not strict: the call is parsed, not generated under a grammar, so nothing is refused.
  const r = await client.chat.completions.create({ model, messages, tools, max_tokens: 8 });
  assert.ok(r.choices[0].finish_reason);
});

test(`tool calls (JSON format): ${Math.ceil(generations / 8)} generations, arguments parse and validate under ajv`, async () => {
  const n = Math.ceil(generations / 8);
  const counts = await toolOracle(client, model, n, { seed: 11 });
  console.log(`  tool oracle: ${counts.validated} of ${counts.calls} calls validated (any others: non-strict tools under auto), ` +
              `${counts.text} auto answers in text, ${counts.truncated} forced calls cut by max_tokens`);
  assert.ok(counts.validated >= n / 3, `too few validated calls: ${JSON.stringify(counts)}`);
  assert.ok(counts.truncated <= n / 10, `too many forced calls cut by max_tokens: ${JSON.stringify(counts)}`);
});

await runTests();
