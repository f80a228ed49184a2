// A recording pass-through between a coding agent and `rocket serve` (tests/e2e/agents.sh): every
// request is forwarded unchanged and its answer streamed back unchanged, while one JSON line per
// exchange goes to LOG: method, path, the headers that say who sent it, the request body, the status,
// and the API errors in the answer (an error body, or an `error` / `response.failed` event of a stream).
//   node agent_recorder.mjs UPSTREAM_URL LOG     # prints the port it listens on, then serves
import fs from "node:fs";
import http from "node:http";

const [upstream, log] = process.argv.slice(2);
const target = new URL(upstream);
const kept = ["user-agent", "anthropic-beta", "anthropic-version", "x-rocket-force", "originator", "session-id",
              "x-session-id", "x-claude-code-session-id"];

// The API errors an answer carries: a non-2xx body, or the error events of a stream.
function errorsOf(status, text) {
  if (status < 200 || status >= 300) return [text.slice(0, 2000)];
  const errors = [];
  for (const line of text.split("\n")) {
    if (!line.startsWith("data:")) continue;
    const data = line.slice(5).trim();
    if (!data.startsWith("{")) continue;
    try {
      const j = JSON.parse(data);
      if (j.type === "error" || j.type === "response.failed" || (j.error && !j.choices)) errors.push(data.slice(0, 2000));
    } catch {
      errors.push(`unparsable event: ${data.slice(0, 200)}`);
    }
  }
  return errors;
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
          errors: errorsOf(ur.statusCode, Buffer.concat(answer).toString()),
        };
        fs.appendFileSync(log, JSON.stringify(entry) + "\n");
      });
    });
    up.on("error", (e) => {
      fs.appendFileSync(log, JSON.stringify({ method: req.method, path: req.url, status: 0, errors: [String(e)] }) + "\n");
      res.writeHead(502);
      res.end();
    });
    up.end(body);
  });
});
server.listen(0, "127.0.0.1", () => console.log(server.address().port));
