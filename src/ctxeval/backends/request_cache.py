"""A persistent cache of API responses, so a rerun of the same requests costs nothing.

The key is a SHA-256 over the base URL, the endpoint path and the full JSON request body
(model, prompt or messages, every sampling and logprob parameter), serialised with sorted
keys. Credentials travel in HTTP headers and are never part of the body, so the API key is
neither in a key nor in a stored value. Only successful, well-formed responses are stored.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path

def request_key(base_url: str, path: str, payload: dict) -> str:
    """Stable hash of one request: everything that decides the response except credentials."""
    blob = json.dumps({"base_url": base_url.rstrip("/"), "path": path, "body": payload}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class RequestCache:
    """SQLite table `responses(key, path, response, created)`; safe to share between threads."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
        with self._lock, self._db:
            self._db.execute("CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, path TEXT, response TEXT NOT NULL, created REAL)")

    def get(self, key: str) -> dict | None:
        with self._lock:
            row = self._db.execute("SELECT response FROM responses WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, key: str, path: str, response: dict) -> None:
        with self._lock, self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO responses (key, path, response, created) VALUES (?, ?, ?, ?)",
                (key, path, json.dumps(response), time.time()),
            )

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()
