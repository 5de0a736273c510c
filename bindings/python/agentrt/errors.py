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


class InvalidArgument(AgentrtError, ValueError):
    code, status = _capi.E_INVALID_ARGUMENT, "invalid_argument"


class NotFound(AgentrtError, LookupError):
    code, status = _capi.E_NOT_FOUND, "not_found"


class Conflict(AgentrtError):
    code, status = _capi.E_CONFLICT, "conflict"


class Expired(AgentrtError):
    code, status = _capi.E_EXPIRED, "expired"


class TooLarge(AgentrtError):
    code, status = _capi.E_TOO_LARGE, "too_large"


class Cancelled(AgentrtError):
    code, status = _capi.E_CANCELLED, "cancelled"


class Timeout(AgentrtError, TimeoutError):
    code, status = _capi.E_TIMEOUT, "timeout"


class IOFailure(AgentrtError, OSError):
    code, status = _capi.E_IO, "io"


class InvalidState(AgentrtError):
    code, status = _capi.E_INVALID_STATE, "invalid_state"


class ModelError(AgentrtError):
    code, status = _capi.E_MODEL, "model"


class Unauthorized(AgentrtError, PermissionError):
    code, status = _capi.E_UNAUTHORIZED, "unauthorized"


class Unsupported(AgentrtError, NotImplementedError):
    code, status = _capi.E_UNSUPPORTED, "unsupported"


class InternalError(AgentrtError):
    code, status = _capi.E_INTERNAL, "internal"


_BY_CODE = {cls.code: cls for cls in (InvalidArgument, NotFound, Conflict, Expired, TooLarge, Cancelled, Timeout,
                                       IOFailure, InvalidState, ModelError, Unauthorized, Unsupported, InternalError)}


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
