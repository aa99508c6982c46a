"""A fault-injecting HTTP proxy for tests: forwards POSTs to an upstream server, except that
the next requests can be answered with scripted faults (429 with Retry-After, 500, a dropped
connection, a slow answer — `slow_seconds` before forwarding, beyond the client's timeout or
not —, malformed JSON), or every request fails (`always_fail`)."""

from __future__ import annotations

import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

FAULTS = ("429", "500", "drop", "slow", "malformed")


class FaultProxy:
    """Runs on 127.0.0.1 on a free port; `received` counts requests, `forwarded` those passed on."""

    def __init__(self, upstream: str, slow_seconds: float = 2.0) -> None:
        self.upstream = upstream.rstrip("/")
        self.faults: deque[str] = deque()
        self.always_fail = False
        self.slow_seconds = slow_seconds
        self.received = 0
        self.forwarded = 0
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                with proxy._lock:
                    proxy.received += 1
                    fault = "500" if proxy.always_fail else (proxy.faults.popleft() if proxy.faults else None)
                if fault == "429":
                    self._reply(429, b'{"error": "rate limited"}', {"Retry-After": "0.3"})
                elif fault == "500":
                    self._reply(500, b'{"error": "internal"}')
                elif fault == "drop":
                    self.close_connection = True
                    self.connection.close()
                elif fault == "malformed":
                    self._reply(200, b'{"choices": [ {"text": "trunc')
                else:
                    if fault == "slow":
                        time.sleep(proxy.slow_seconds)
                    r = httpx.post(proxy.upstream + self.path, content=body, headers={"content-type": "application/json"}, timeout=300)
                    with proxy._lock:
                        proxy.forwarded += 1
                    self._reply(r.status_code, r.content)

            def _reply(self, status: int, payload: bytes, headers: dict | None = None) -> None:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                try:
                    self.wfile.write(payload)
                except OSError:  # the client gave up (slow answer beyond its timeout)
                    pass

        class QuietServer(ThreadingHTTPServer):
            def handle_error(self, request, client_address):  # a client that gave up mid-answer
                pass

        self._server = QuietServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
