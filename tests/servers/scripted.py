"""A scripted OpenAI-compatible server for tests: answers each POST with the next canned JSON
body of its route and records the request bodies."""

from __future__ import annotations

import json
import threading
from collections import defaultdict, deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ScriptedServer:
    def __init__(self, responses: dict[str, list[object]]) -> None:
        self.responses = {path: deque(items) for path, items in responses.items()}
        self.requests: dict[str, list[dict]] = defaultdict(list)
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
                server.requests[self.path].append(body)
                queue = server.responses.get(self.path)
                item = queue.popleft() if queue else {"error": "no scripted response"}
                payload = item if isinstance(item, bytes) else json.dumps(item).encode()
                self.send_response(200 if queue is not None else 404)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
