// The tool-call oracle, shared by structured_outputs.mjs (the tiny fuel's Qwen3 template: the JSON
// tool-call format) and xml_tools.mjs (our Qwen3.5-shaped template: the XML format): sampled
// generations at temperature 1 on random weights with tool_choice "required", a named function, and
// "auto" with strict tools, over random parameter schemas; every call's arguments must parse and
// validate under ajv (a JSON Schema validator nobody here wrote) against its tool's parameters.
//
// The XML format reads a parameter whose type is string (or absent) as raw text, which ends only at
// "\n</parameter>": random weights almost never write that, so the XML schemas leave plain strings
// out (string enums, written as literal text, stay) to keep generations bounded.
import assert from "node:assert/strict";
import Ajv from "ajv";

// A seeded uniform generator on [0, 1), shared with structured_outputs.mjs's random schemas.
export function rng(seed) {  // mulberry32
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// A property's schema: JSON-valued kinds anywhere; raw-text ones only as JSON (nested) or outside XML.
function randomProperty(r, xml, depth = 0) {
  const pick = (xs) => xs[Math.floor(r() * xs.length)];
  const kinds = ["integer", "number", "boolean", "enum", "object", "array", "nullable"];
  if (!xml || depth > 0) kinds.push("string", "pattern", "const");
  switch (pick(depth >= 2 ? kinds.filter((k) => k !== "object" && k !== "array") : kinds)) {
    case "integer": case "number": case "boolean": return { type: pick(["integer", "number", "boolean"]) };
    case "enum": return { enum: pick([["celsius", "fahrenheit"], ["a<b", "c d", "é"], ["x", "y", "z"]]) };
    case "nullable": return { type: ["integer", "null"] };
    case "string": return { type: "string", maxLength: 1 + Math.floor(r() * 10) };
    case "pattern": return { type: "string", pattern: "^[a-z]{1,5}$" };
    case "const": return { const: pick(["fixed", 7, true]) };
    case "array": return { type: "array", items: randomProperty(r, xml, depth + 1), maxItems: 1 + Math.floor(r() * 3) };
    default: return randomParameters(r, xml, depth + 1);
  }
}

function randomParameters(r, xml, depth = 0) {
  const names = ["city", "unit", "days", "query", "limit", "tags", "mode", "n_2"];
  const properties = {};
  const count = 1 + Math.floor(r() * 3);
  for (let i = 0; i < count; ++i) properties[names[Math.floor(r() * names.length)]] = randomProperty(r, xml, depth);
  const required = Object.keys(properties).filter(() => r() < 0.6);
  return { type: "object", properties, required, additionalProperties: false };
}

// Runs GENERATIONS requests, 8 at a time; returns counts. `extra` is merged into every request.
export async function toolOracle(client, model, generations, { xml = false, seed = 7, extra = {} } = {}) {
  const ajv = new Ajv({ strict: false, allErrors: true });
  const counts = { calls: 0, validated: 0, truncated: 0, text: 0 };
  let next = 0;
  const worker = async () => {
    while (next < generations) {
      const i = next++;
      const r = rng(seed * 100003 + i);  // per generation: the same tools whatever the workers' order
      const tools = ["get_a", "get_b"].map((name, k) => ({
        type: "function",
        function: { name, parameters: randomParameters(r, xml), strict: k === 0 || i % 2 === 0 },
      }));
      const mode = ["required", "named", "auto"][i % 3];
      const tool_choice = mode === "named" ? { type: "function", function: { name: "get_b" } } : mode;
      const res = await client.chat.completions.create({
        model, messages: [{ role: "user", content: "Call a tool." }], tools, tool_choice, max_tokens: mode === "auto" ? 200 : 600,
        temperature: 1, seed: i, ...extra,
      });
      const c = res.choices[0];
      const calls = c.message.tool_calls ?? [];
      const what = `generation ${i} (${mode}, tools ${JSON.stringify(tools)})`;
      if (mode !== "auto") {
        // The call is forced and under the grammar: its first call always parses; a cut one is counted.
        if (c.finish_reason === "length" && calls.length === 0) {
          ++counts.truncated;
          continue;
        }
        assert.equal(c.finish_reason, "tool_calls", `${what}: ${JSON.stringify(c.message)}`);
        assert.ok(calls.length >= 1, what);
        if (mode === "named") assert.deepEqual(calls.map((x) => x.function.name), ["get_b"], what);
      } else if (calls.length === 0) {
        ++counts.text;
        continue;
      }
      for (const call of calls) {
        const tool = tools.find((t) => t.function.name === call.function.name);
        assert.ok(tool, `${what}: a call of ${call.function.name}`);
        let args;
        try {
          args = JSON.parse(call.function.arguments);
        } catch (e) {
          assert.fail(`${what}: arguments do not parse (${e.message}): ${call.function.arguments}`);
        }
        ++counts.calls;
        if (mode === "auto" && !tool.function.strict) continue;
        const check = ajv.compile(tool.function.parameters);
        assert.ok(check(args), `${what}: ${ajv.errorsText(check.errors)} in ${call.function.arguments}`);
        ++counts.validated;
      }
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
  return counts;
}
