// Shared by the e2e clients: a streamed chat completion assembled from its chunks, checking the
// chunk shape OpenAI's stream has (a call starts with the next index, id and type first).
import assert from "node:assert/strict";

// Everything a streamed chat response carried, assembled.
export async function collectChat(stream) {
  const out = { chunks: 0, role: null, content: "", reasoning: "", calls: [], finish: null, usage: null, logprobs: [] };
  for await (const chunk of stream) {
    ++out.chunks;
    assert.equal(chunk.object, "chat.completion.chunk");
    if (chunk.usage) out.usage = chunk.usage;
    for (const choice of chunk.choices) {
      const d = choice.delta;
      if (d.role) out.role = d.role;
      if (d.content) out.content += d.content;
      if (d.reasoning_content) out.reasoning += d.reasoning_content;
      for (const c of d.tool_calls ?? []) {
        if (c.id) {
          assert.equal(c.index, out.calls.length, "a call starts with the next index");
          assert.equal(c.type, "function");
          out.calls.push({ id: c.id, name: c.function.name, arguments: c.function.arguments ?? "" });
        } else {
          out.calls[c.index].arguments += c.function.arguments;
        }
      }
      if (choice.logprobs?.content) out.logprobs.push(...choice.logprobs.content);
      if (choice.finish_reason) out.finish = choice.finish_reason;
    }
  }
  return out;
}
