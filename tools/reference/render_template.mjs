#!/usr/bin/env node
// Reference chat-template renderer the C++ one (src/template/chat_template.cc) is checked against by
// tests/chat_template_test.cc: @huggingface/jinja, HF's JavaScript implementation of the Jinja subset
// chat templates use, which renders with HF transformers' settings (trim_blocks, lstrip_blocks).
//
//   node tools/reference/render_template.mjs INPUT.json OUT.json
//
// INPUT.json is {"template": "...", "cases": [context, ...]}; each context is the template's variables
// (messages, tools, add_generation_prompt, ...). OUT.json gets one entry per case: the rendered string,
// or {"error": message} when rendering throws.
//
// Known divergences from Python Jinja2 as HF transformers runs it, which the C++ follows instead (the
// test corpus avoids them and tests/chat_template_test.cc pins Python's behaviour separately):
//   - str.strip/lstrip/rstrip ignore their argument here and strip all whitespace, so
//     "  x".lstrip("\n") is "x" here and "  x" in Python;
//   - floats: 1.0 parsed from JSON is the integer 1 here, and tojson writes floats from 1e16 to 1e21
//     and below 1e-4 in JavaScript's notation (10000000000000000, 1e-7) rather than Python's (1e+16,
//     1e-07);
//   - none prints as "" here and "None" in Python, booleans as "true"/"false" rather than "True"/"False",
//     lists and dicts as JSON rather than Python's repr;
//   - == is JavaScript's loose equality (1 == "1" holds, [1] == [1] does not), str + int concatenates
//     instead of failing, `x.items` on a dict with a key "items" is the key rather than the method, and
//     strings cannot be iterated;
//   - string lengths and indices count UTF-16 units here, code points in Python.
import { readFileSync, writeFileSync } from "node:fs";
import { Template } from "@huggingface/jinja";

const [inputPath, outPath] = process.argv.slice(2);
if (!inputPath || !outPath) {
  console.error("usage: node render_template.mjs INPUT.json OUT.json");
  process.exit(2);
}

const input = JSON.parse(readFileSync(inputPath, "utf8"));
if (typeof input.template !== "string" || !Array.isArray(input.cases)) {
  console.error(`${inputPath}: expected {"template": string, "cases": [object, ...]}`);
  process.exit(2);
}

const template = new Template(input.template);
const out = input.cases.map((context) => {
  try {
    return template.render(context);
  } catch (e) {
    return { error: String(e?.message ?? e) };
  }
});
writeFileSync(outPath, JSON.stringify(out));
