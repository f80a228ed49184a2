"""A Rocket server as the workload drivers reach it: base URL, key, JSON GETs and streamed POSTs.

Shared by bench/serve_agents.py and bench/random_serve.py, which import it by path (tools/client is
not a package), as they do sse.py.
"""
import http.client
import json
import urllib.parse


class Server:
    def __init__(self, base, api_key):
        u = urllib.parse.urlparse(base)
        self.host, self.port = u.hostname, u.port or 80
        self.headers = {"Content-Type": "application/json"}
        if api_key:
            self.headers["Authorization"] = "Bearer " + api_key

    def get_json(self, path):
        """(status, parsed body or None)."""
        c = http.client.HTTPConnection(self.host, self.port, timeout=600)
        c.request("GET", path, headers=self.headers)
        r = c.getresponse()
        body = r.read()
        c.close()
        return r.status, (json.loads(body) if body else None)

    def post(self, path, body, timeout=600):
        """The open connection and its response (read it, then close the connection)."""
        c = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        c.request("POST", path, body=json.dumps(body), headers=self.headers)
        return c, c.getresponse()
