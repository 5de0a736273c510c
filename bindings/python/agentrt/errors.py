"""Exceptions mapped from agentrt's status codes: one class per code, all subclasses of AgentrtError."""
from . import _capi


class AgentrtError(Exception):
    """A failed agentrt call. `code` is the status (negative int), `status` its name ("not_found", ...)."""

    code = _capi.E_INTERNAL
    status = "internal"

    def __init__(self, message, code=None):
        super().__init__(message)
        if code is not None:
            self.code = code
            self.status = _capi.lib.agentrt_status_name(code).decode()


# The class of each status: its name and the built-in exception it also is, so that `except LookupError` catches
# NotFound. Its `code` and `status` are the status's number and agentrt_status_name.
_CLASSES = {
    _capi.E_INVALID_ARGUMENT: ("InvalidArgument", ValueError),
    _capi.E_NOT_FOUND: ("NotFound", LookupError),
    _capi.E_CONFLICT: ("Conflict",),
    _capi.E_EXPIRED: ("Expired",),
    _capi.E_TOO_LARGE: ("TooLarge",),
    _capi.E_CANCELLED: ("Cancelled",),
    _capi.E_TIMEOUT: ("Timeout", TimeoutError),
    _capi.E_IO: ("IOFailure", OSError),
    _capi.E_INVALID_STATE: ("InvalidState",),
    _capi.E_MODEL: ("ModelError",),
    _capi.E_UNAUTHORIZED: ("Unauthorized", PermissionError),
    _capi.E_UNSUPPORTED: ("Unsupported", NotImplementedError),
    _capi.E_INTERNAL: ("InternalError",),
}


def _error_class(code, name, *builtins):
    status = _capi.lib.agentrt_status_name(code).decode()
    return type(name, (AgentrtError, *builtins), {"code": code, "status": status, "__module__": __name__})


_BY_CODE = {code: _error_class(code, *spec) for code, spec in _CLASSES.items()}
globals().update({cls.__name__: cls for cls in _BY_CODE.values()})
__all__ = ["AgentrtError", *(cls.__name__ for cls in _BY_CODE.values()), "check", "error_for"]


def error_for(code, message=None):
    """The exception for a status code, with the calling thread's last-error message unless one is given."""
    if message is None:
        message = (_capi.lib.agentrt_last_error() or b"").decode("utf-8", "replace")
    cls = _BY_CODE.get(code)
    if cls is None:
        return AgentrtError(message or f"agentrt status {code}", code)
    return cls(message or cls.status)


def check(code):
    """Raises the mapped exception for a failed status; returns None for AGENTRT_OK."""
    if code != _capi.OK:
        raise error_for(code)
