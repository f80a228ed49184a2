// A recording pass-through between a coding agent and `rocket serve` (tests/e2e/agents.sh): every
// request is forwarded unchanged and its answer streamed back unchanged, while one JSON line per
// exchange goes to LOG: method, path, the headers that say who sent it, the request body, the status,
// and the API errors in the answer (an error body, or an `error` / `response.failed` event of a stream).
//   node agent_recorder.mjs UPSTREAM_URL LOG     # prints the port it listens on, then serves
import fs from "node:fs";
import http from "node:http";
import zlib from "node:zlib";

const [upstream, log] = process.argv.slice(2);
const target = new URL(upstream);
const kept = ["user-agent", "anthropic-beta", "anthropic-version", "x-rocket-force", "originator", "session-id",
              "x-session-id", "x-claude-code-session-id"];

// An answer's text, decoded as its Content-Encoding says (the server compresses for clients that accept it).
function decoded(encoding, bytes) {
  if (encoding === "gzip") return zlib.gunzipSync(bytes, { finishFlush: zlib.constants.Z_SYNC_FLUSH }).toString();
  if (encoding === "br") return zlib.brotliDecompressSync(bytes).toString();
  if (encoding === "deflate") return zlib.inflateSync(bytes).toString();
  return bytes.toString();
}

// The API errors an answer carries (a non-2xx body, or the error events of a stream), and how many
// JSON events its stream had (0 for a whole answer).
function errorsOf(status, text) {
  if (status < 200 || status >= 300) return { errors: [text.slice(0, 2000)], events: 0 };
  const errors = [];
  let events = 0;
  for (const line of text.split("\n")) {
    if (!line.startsWith("data:")) continue;
    const data = line.slice(5).trim();
    if (!data.startsWith("{")) continue;
    ++events;
    try {
      const j = JSON.parse(data);
      if (j.type === "error" || j.type === "response.failed" || (j.error && !j.choices)) errors.push(data.slice(0, 2000));
    } catch {
      errors.push(`unparsable event: ${data.slice(0, 200)}`);
    }
  }
  return { errors, events };
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const body = Buffer.concat(chunks);
    const headers = { ...req.headers, host: target.host };
    const up = http.request({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers }, (ur) => {
      res.writeHead(ur.statusCode, ur.headers);
      const answer = [];
      ur.on("data", (c) => {
        answer.push(c);
        res.write(c);
      });
      ur.on("end", () => {
        res.end();
        let parsed = null;
        try {
          parsed = body.length ? JSON.parse(body.toString()) : null;
        } catch {
          parsed = body.toString().slice(0, 2000);
        }
        const entry = {
          method: req.method,
          path: req.url,
          headers: Object.fromEntries(kept.filter((k) => req.headers[k] !== undefined).map((k) => [k, req.headers[k]])),
          body: parsed,
          status: ur.statusCode,
          ...errorsOf(ur.statusCode, decoded(ur.headers["content-encoding"], Buffer.concat(answer))),
        };
        fs.appendFileSync(log, JSON.stringify(entry) + "\n");
      });
    });
    up.on("error", (e) => {
      fs.appendFileSync(log, JSON.stringify({ method: req.method, path: req.url, status: 0, errors: [String(e)] }) + "\n");
      if (!res.headersSent) res.writeHead(502);
      res.end();
    });
    // A client that hangs up cancels its request upstream, as it would without the recorder between.
    res.on("close", () => {
      if (!res.writableFinished) up.destroy();
    });
    up.end(body);
  });
});
server.listen(0, "127.0.0.1", () => console.log(server.address().port));
