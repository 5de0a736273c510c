"""agentrt for Python: an embeddable agent runtime, through its stable C ABI (ctypes).

    import agentrt
    with agentrt.Runtime({"data_dir": "./data", "model": {"type": "demo"}}) as rt:
        @rt.tool(approval="always")
        def book_room(room: str, day: str) -> dict:
            "Book a hotel room for a day."
            return {"ok": True, "booking_id": "BK-1"}

        turn = rt.start_turn("thread-1", "book a room", user_id="me")
        for event in rt.events("thread-1", runs=1):
            print(event.seq, event.type)

The library is libagentrt.so: set AGENTRT_LIBRARY to its path, or put it next to this package.
"""
from . import _capi
from .errors import (AgentrtError, Cancelled, Conflict, Expired, InternalError, InvalidArgument, InvalidState,
                     IOFailure, ModelError, NotFound, Timeout, TooLarge, Unauthorized, Unsupported)
from .runtime import Event, EventStream, ModelStream, Runtime, ToolCall, ToolResult, TurnHandle
from .schema import schema_for_function, schema_for_type

ABI_VERSION = _capi.ABI_VERSION


def version():
    """The loaded library's version, "MAJOR.MINOR.PATCH"."""
    return _capi.lib.agentrt_version().decode()


__version__ = version()

__all__ = [
    "ABI_VERSION", "AgentrtError", "Cancelled", "Conflict", "Event", "EventStream", "Expired", "InternalError",
    "InvalidArgument", "InvalidState", "IOFailure", "ModelError", "ModelStream", "NotFound", "Runtime", "Timeout",
    "TooLarge", "ToolCall", "ToolResult", "TurnHandle", "Unauthorized", "Unsupported", "schema_for_function",
    "schema_for_type", "version",
]
