"""Reading an OpenAI-style streamed response: `data: {json}` events, ended by `data: [DONE]`.

Shared by the workload drivers (bench/serve_agents.py) and the serving tests (tests/e2e/serve_load.py),
which import it by path: neither lives in a package.
"""
import json


class SseStream:
    """Iterates the JSON chunks of an http.client response; `done` says whether `[DONE]` arrived
    (False after the iteration means the server closed the stream without it)."""

    def __init__(self, response):
        self.response = response
        self.done = False

    def __iter__(self):
        while True:
            line = self.response.readline()
            if not line:
                return
            line = line.strip()
            if not line.startswith(b"data: "):
                continue
            if line == b"data: [DONE]":
                self.done = True
                return
            yield json.loads(line[6:])
