// End-to-end tests of image input on the host booster (images.sh serves the tiny multimodal fuel with
// a chat template that places images, --max-images 2): PNGs made here, sent as an `image_url` data:
// URL through the official `openai` client and as a base64 `image` block through `@anthropic-ai/sdk`.
// Each test says what it checks; greedy decoding throughout, so equal requests give equal text.
//
//   node images.mjs BASE_URL MODEL PAGE_TOKENS
import assert from "node:assert/strict";
import zlib from "node:zlib";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { runTests, test } from "./runner.mjs";

const [base, model, pageArg] = process.argv.slice(2);
const pageTokens = Number(pageArg);
const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: "none", maxRetries: 0, timeout: 120_000 });
const anthropic = new Anthropic({ baseURL: base, apiKey: "none", maxRetries: 0, timeout: 120_000 });

// A PNG (8-bit RGB, no filter) of width x height whose pixel (x, y) is rgb(x, y).
const crcTable = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; ++k) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});
const crc32 = (buf) => {
  let c = 0xffffffff;
  for (const b of buf) c = crcTable[(c ^ b) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
};
function png(width, height, rgb) {
  const chunk = (type, data) => {
    const len = Buffer.alloc(4), crc = Buffer.alloc(4), body = Buffer.concat([Buffer.from(type, "latin1"), data]);
    len.writeUInt32BE(data.length);
    crc.writeUInt32BE(crc32(body));
    return Buffer.concat([len, body, crc]);
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header.set([8, 2, 0, 0, 0], 8);  // 8-bit, RGB, deflate, no filter, no interlace
  const raw = Buffer.alloc(height * (1 + 3 * width));
  for (let y = 0; y < height; ++y)
    for (let x = 0; x < width; ++x) raw.set(rgb(x, y), y * (1 + 3 * width) + 1 + 3 * x);
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk("IHDR", header),
                        chunk("IDAT", zlib.deflateSync(raw)), chunk("IEND", Buffer.alloc(0))]);
}
// 96x64: the plan's processor (images.sh sets the fuel's preprocessor_config.json shortest_edge to 128²,
// where the releases' 256² would give 320x224 and 70 tokens) scales it to 160x128, a 10x8 grid, 20 image
// tokens: the count checks the server resizes by the plan's bounds.
const kImageTokens = 20;
const imageA = png(96, 64, (x, y) => [x * 2, y * 3, 128]).toString("base64");
const imageB = png(96, 64, (x, y) => [((x * 37 + y * 101) * 13) & 255, (x * y * 7) & 255, ((x ^ y) * 29) & 255]).toString("base64");
// 320x256 is within the plan's bounds as it is: a 20x16 grid, 80 image tokens, wide enough for a page
// boundary to fall well inside it.
const kWideTokens = 80;
const imageWide = png(320, 256, (x, y) => [(x * 5 + y) & 255, (y * 7) & 255, (x ^ y) & 255]).toString("base64");
const dataUrl = (b64) => `data:image/png;base64,${b64}`;

const chat = (parts, max_tokens = 12, extra = {}) =>
  openai.chat.completions.create({ model, max_tokens, temperature: 0, messages: [{ role: "user", content: parts }], ...extra });
// Each generated token with its logprob: equal only where the engine computed the same logits.
const picks = (c) => JSON.stringify(c.choices[0].logprobs.content.map((t) => [t.token, t.logprob]));
const text = (t) => ({ type: "text", text: t });
// The template opens <think>: a short greedy answer is reasoning, its content often empty.
const said = (c) => `${c.choices[0].message.reasoning_content ?? ""}|${c.choices[0].message.content ?? ""}`;
const image = (b64) => ({ type: "image_url", image_url: { url: dataUrl(b64) } });
const ask = "What is in this picture?";

async function rejects(promise, status, mention) {
  try {
    await promise;
  } catch (e) {
    assert.ok(e instanceof OpenAI.APIError, `not an APIError: ${e}`);
    assert.equal(e.status, status, e.message);
    if (mention) assert.ok(e.message.includes(mention), e.message);
    return;
  }
  assert.fail(`expected HTTP ${status}`);
}

let first;  // the chat answer about image A

test("chat.completions with an image_url data: URL: 200, text, the image's tokens in usage", async () => {
  first = await chat([text(ask), image(imageA)]);
  assert.equal(first.choices[0].finish_reason, "length");
  assert.ok(said(first).length > 1, JSON.stringify(first.choices[0]));
  const plain = await chat([text(ask)]);
  // The template writes <|vision_start|><|image_pad|><|vision_end|>, the pad widened to the image.
  assert.equal(first.usage.prompt_tokens - plain.usage.prompt_tokens, kImageTokens + 2);
  assert.notEqual(said(first), said(plain));
});

test("the same image twice: the same greedy text", async () => {
  const again = await chat([text(ask), image(imageA)]);
  assert.equal(said(again), said(first));
  assert.equal(again.usage.prompt_tokens, first.usage.prompt_tokens);
});

test("another image: another text", async () => {
  const other = await chat([text(ask), image(imageB)]);
  assert.equal(other.usage.prompt_tokens, first.usage.prompt_tokens);
  assert.notEqual(said(other), said(first));
});

test("n = 2: each choice runs the image (the forks set it again after the cache restore)", async () => {
  const two = await chat([text(ask), image(imageA)], 12, { n: 2 });
  assert.equal(two.choices.length, 2);
  for (const c of two.choices)
    assert.equal(`${c.message.reasoning_content ?? ""}|${c.message.content ?? ""}`, said(first));
});

test("Anthropic messages with a base64 image block: the chat request's prompt and text", async () => {
  const m = await anthropic.messages.create({ model, max_tokens: 12, temperature: 0, messages: [{ role: "user", content: [
    { type: "text", text: ask }, { type: "image", source: { type: "base64", media_type: "image/png", data: imageA } }] }] });
  assert.equal(m.stop_reason, "max_tokens");
  const prompt = m.usage.input_tokens + (m.usage.cache_read_input_tokens ?? 0) + (m.usage.cache_creation_input_tokens ?? 0);
  assert.equal(prompt, first.usage.prompt_tokens);
  const thinking = m.content.filter((b) => b.type === "thinking").map((b) => b.thinking).join("");
  const answer = m.content.filter((b) => b.type === "text").map((b) => b.text).join("");
  assert.equal(`${thinking}|${answer}`, said(first));
  const counted = await anthropic.messages.countTokens({ model, messages: [{ role: "user", content: [
    { type: "text", text: ask }, { type: "image", source: { type: "base64", media_type: "image/png", data: imageA } }] }] });
  assert.equal(counted.input_tokens, prompt);
});

test("the prefix cache keys an image by its content: resent, it resumes past it; another image does not", async () => {
  // Text long enough to span pages before and after the image: the image's tokens are one id
  // (<|image_pad|>) whatever the image, so a cache keyed by ids alone would serve B the state of A.
  const before = `Remember this list: ${Array.from({ length: 150 }, (_, i) => `item ${i}`).join(", ")}. Now look:`;
  const after = `And this one: ${Array.from({ length: 100 }, (_, i) => `entry ${i}`).join(", ")}. Describe the picture.`;
  const head = await chat([text(before)]);  // its prompt ends where the image's tokens would start, and a little more
  const long = (b64) => chat([text(before), image(b64), text(after)], 8, { logprobs: true });
  const cachedOf = (c) => c.usage.prompt_tokens_details.cached_tokens;
  const a = await long(imageA);
  assert.ok(a.usage.prompt_tokens > head.usage.prompt_tokens + kImageTokens + pageTokens,
            `the text after spans a page (${head.usage.prompt_tokens}, ${a.usage.prompt_tokens})`);
  // A's image computed cold: nothing cached held it.
  assert.ok(cachedOf(a) <= head.usage.prompt_tokens, `cached ${cachedOf(a)} on A's first run`);
  const b = await long(imageB);
  assert.ok(cachedOf(b) <= head.usage.prompt_tokens, `cached ${cachedOf(b)} past B's first image token (< ${head.usage.prompt_tokens})`);
  assert.ok(cachedOf(b) >= pageTokens, `the text before the image is cached (${cachedOf(b)} tokens)`);
  // Far from the image the tiny model's greedy text can agree; its logprobs do not.
  assert.notEqual(picks(b), picks(a));
  // Resent, each image resumes past its own tokens (keyed by its digest) and computes, token and
  // logprob, what its cold run did.
  const again = await long(imageA);
  assert.ok(cachedOf(again) >= head.usage.prompt_tokens + kImageTokens,
            `A resent resumes past its image (${cachedOf(again)} cached, its image ends before ${head.usage.prompt_tokens + kImageTokens})`);
  assert.equal(picks(again), picks(a));
  const bAgain = await long(imageB);
  assert.ok(cachedOf(bAgain) >= head.usage.prompt_tokens + kImageTokens, `B resent: ${cachedOf(bAgain)} cached`);
  assert.equal(picks(bAgain), picks(b));
});

test("a resent image resumes inside it where a page boundary falls there, the rest of its rows from the tower", async () => {
  // Text that puts the image across the page boundary pageTokens, more than 8 tokens into it (the
  // cache holds no state within an image's first 8 tokens), with no boundary after it in the prompt.
  const count = async (t) =>
    (await anthropic.messages.countTokens({ model, messages: [{ role: "user", content: [text(t)] }] })).input_tokens;
  const filler = (k) => `Keep these: ${Array.from({ length: k }, (_, i) => `mark ${i}`).join(", ")}. Look:`;
  const [p10, p110] = [await count(filler(10)), await count(filler(110))];
  const k = Math.max(0, Math.round(10 + ((pageTokens - 24 - p10) * 100) / (p110 - p10)));
  // The text alone is p0 tokens: the image's first token is at most p0 (the text-only prompt ends with
  // at least one token after the text), and it ends at least p0 + kWideTokens - 15 (that tail is under
  // 16 tokens).
  const p0 = await count(filler(k));
  assert.ok(p0 + 8 < pageTokens && pageTokens < p0 + kWideTokens - 15, `the image straddles ${pageTokens} (${p0})`);
  const run = () => chat([text(filler(k)), image(imageWide)], 8, { logprobs: true });
  const cold = await run();
  assert.equal(cold.usage.prompt_tokens - (await chat([text(filler(k))], 1)).usage.prompt_tokens, kWideTokens + 2);
  assert.ok(cold.usage.prompt_tokens < 2 * pageTokens);
  assert.equal(cold.usage.prompt_tokens_details.cached_tokens, 0);
  const warm = await run();
  assert.equal(warm.usage.prompt_tokens_details.cached_tokens, pageTokens, "resumed inside the image");
  assert.equal(picks(warm), picks(cold));
});

// A coding agent's turn: the model called a screenshot tool, whose result holds text and an image.
const shotTool = { type: "function", name: "screenshot", description: "Shows the screen.",
                   parameters: { type: "object", properties: {} } };
const responsesTurn = (output) => [
  { role: "user", content: [{ type: "input_text", text: "Take a screenshot." }] },
  { type: "function_call", call_id: "call_1", name: "screenshot", arguments: "{}" },
  { type: "function_call_output", call_id: "call_1", output }];

test("Responses: a function_call_output with an input_image runs the image inside the tool response", async () => {
  // The image first: the text after it tokenizes as it does alone (a special token ends the image).
  const withImage = await openai.responses.create({ model, max_output_tokens: 6, temperature: 0, tools: [shotTool],
    input: responsesTurn([{ type: "input_image", image_url: dataUrl(imageA) }, { type: "input_text", text: "The screen" }]) });
  const textOnly = await openai.responses.create({ model, max_output_tokens: 6, temperature: 0, tools: [shotTool],
    input: responsesTurn([{ type: "input_text", text: "The screen" }]) });
  assert.equal(withImage.status, "incomplete", JSON.stringify(withImage.output));
  assert.equal(withImage.usage.input_tokens - textOnly.usage.input_tokens, kImageTokens + 2);
  const other = await openai.responses.create({ model, max_output_tokens: 6, temperature: 0, tools: [shotTool],
    input: responsesTurn([{ type: "input_image", image_url: dataUrl(imageB) }, { type: "input_text", text: "The screen" }]) });
  assert.equal(other.usage.input_tokens, withImage.usage.input_tokens);
});

test("Anthropic: a tool_result with an image block runs the image inside the tool response", async () => {
  const turn = (content) => [
    { role: "user", content: "Take a screenshot." },
    { role: "assistant", content: [{ type: "tool_use", id: "toolu_1", name: "screenshot", input: {} }] },
    { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content }] }];
  const tools = [{ name: "screenshot", description: "Shows the screen.", input_schema: { type: "object", properties: {} } }];
  const shot = [{ type: "image", source: { type: "base64", media_type: "image/png", data: imageA } }, { type: "text", text: "The screen" }];
  const m = await anthropic.messages.create({ model, max_tokens: 6, temperature: 0, tools, messages: turn(shot) });
  assert.equal(m.stop_reason, "max_tokens");
  const prompt = m.usage.input_tokens + (m.usage.cache_read_input_tokens ?? 0) + (m.usage.cache_creation_input_tokens ?? 0);
  const textOnly = await anthropic.messages.countTokens({ model, tools, messages: turn([shot[1]]) });
  assert.equal(prompt - textOnly.input_tokens, kImageTokens + 2);
  assert.equal((await anthropic.messages.countTokens({ model, tools, messages: turn(shot) })).input_tokens, prompt);
});

test("chat.completions: an image in a tool message is a 400 (OpenAI's tool content is text parts only)", async () => {
  await rejects(openai.chat.completions.create({ model, max_tokens: 4, messages: [
    { role: "user", content: "Take a screenshot." },
    { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "screenshot", arguments: "{}" } }] },
    { role: "tool", tool_call_id: "call_1", content: [text("The screen:"), image(imageA)] }] }),
    400, "a tool message's content is text parts only in Chat Completions");
});

test("refusals: more images than --max-images, a remote URL", async () => {
  await rejects(chat([text(ask), image(imageA), image(imageB), image(imageA)]), 400, "images");
  await rejects(chat([text(ask), { type: "image_url", image_url: { url: "https://example.com/a.png" } }]), 400,
                "remote image URLs are not fetched");
  const remote = await anthropic.messages.create({ model, max_tokens: 4, messages: [{ role: "user", content: [
    { type: "image", source: { type: "url", url: "https://example.com/a.png" } }] }] }).then(() => null, (e) => e);
  assert.ok(remote instanceof Anthropic.APIError, `not an APIError: ${remote}`);
  assert.equal(remote.status, 400);
  assert.equal(remote.error.error.type, "invalid_request_error");
  assert.ok(remote.error.error.message.includes("remote image URLs are not fetched"), remote.error.error.message);
});

await runTests();
