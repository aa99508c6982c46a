"""An HTTP error in OpenAI's shape: `{"error": {"message", "type", "param", "code"}}`."""

from __future__ import annotations


class ApiError(Exception):
    """A request the server refuses; `param` names the field at fault."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code

    def body(self) -> dict:
        kind = "invalid_request_error" if self.status < 500 else "server_error"
        return {"error": {"message": self.message, "type": kind, "param": self.param, "code": self.code}}
