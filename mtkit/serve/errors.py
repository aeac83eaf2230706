"""The one exception a refused request raises: its HTTP status, the field at fault, and why."""

from __future__ import annotations


class ApiError(Exception):
    """A request the server refuses: ``status``, the ``field`` at fault, and why."""

    def __init__(
        self, status: int, field: str, message: str, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(f"{field}: {message}")
        self.status, self.field, self.headers = status, field, headers or {}

    def body(self) -> dict[str, str]:
        return {"error": str(self), "field": self.field}
