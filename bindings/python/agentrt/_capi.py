"""The thin layer: libagentrt loaded with ctypes, one prototype (argtypes/restype) per function of agentrt.h.

Nothing here is idiomatic; agentrt.runtime builds the Python API on top of it. The library is found through
the AGENTRT_LIBRARY environment variable (a path to libagentrt.so), next to this package, or by the system's
loader, and its ABI version is checked at import.
"""
import ctypes
import ctypes.util
import os

# The ABI generation this binding was written for (AGENTRT_ABI_VERSION in agentrt.h).
ABI_VERSION = 1

# Status codes (agentrt_status in agentrt.h), also module constants: AGENTRT_E_NOT_FOUND is E_NOT_FOUND.
STATUS = {
    "OK": 0,
    "E_INVALID_ARGUMENT": -1,
    "E_NOT_FOUND": -2,
    "E_CONFLICT": -3,
    "E_EXPIRED": -4,
    "E_TOO_LARGE": -5,
    "E_CANCELLED": -6,
    "E_TIMEOUT": -7,
    "E_IO": -8,
    "E_INVALID_STATE": -9,
    "E_MODEL": -10,
    "E_UNAUTHORIZED": -11,
    "E_UNSUPPORTED": -12,
    "E_INTERNAL": -13,
}
globals().update(STATUS)

c_int32 = ctypes.c_int32
c_int64 = ctypes.c_int64
c_uint32 = ctypes.c_uint32
c_size_t = ctypes.c_size_t
c_char_p = ctypes.c_char_p
c_void_p = ctypes.c_void_p
P_void_p = ctypes.POINTER(ctypes.c_void_p)  # out-parameters: handles and library-owned strings
P_int64 = ctypes.POINTER(ctypes.c_int64)

# Callback types. They run on library threads; ctypes takes the GIL for them.
agentrt_destroy_cb = ctypes.CFUNCTYPE(None, c_void_p)
agentrt_tool_cb = ctypes.CFUNCTYPE(None, c_void_p, c_char_p, c_void_p)
agentrt_model_cb = ctypes.CFUNCTYPE(None, c_void_p, c_char_p, c_void_p)
agentrt_job_cb = ctypes.CFUNCTYPE(None, c_char_p, c_void_p)

# name: (restype, argtypes) — every function of agentrt.h, in its order.
PROTOTYPES = {
    "agentrt_version": (c_char_p, []),
    "agentrt_abi_version": (c_uint32, []),
    "agentrt_last_error": (c_char_p, []),
    "agentrt_status_name": (c_char_p, [c_int32]),
    "agentrt_free": (None, [c_void_p]),
    "agentrt_runtime_open": (c_int32, [P_void_p, c_char_p]),
    "agentrt_runtime_open_with_model": (
        c_int32, [P_void_p, c_char_p, agentrt_model_cb, c_void_p, agentrt_destroy_cb]),
    "agentrt_runtime_free": (None, [c_void_p]),
    "agentrt_tool_register": (c_int32, [c_void_p, c_char_p, agentrt_tool_cb, c_void_p, agentrt_destroy_cb]),
    "agentrt_tool_unregister": (c_int32, [c_void_p, c_char_p]),
    "agentrt_tool_call_complete": (c_int32, [c_void_p, c_char_p, c_char_p]),
    "agentrt_tool_call_state_delta": (c_int32, [c_void_p, c_char_p]),
    "agentrt_tool_call_fail": (c_int32, [c_void_p, c_char_p, c_char_p]),
    "agentrt_tool_call_start_job": (c_int32, [c_void_p, c_char_p]),
    "agentrt_tool_call_free": (None, [c_void_p]),
    "agentrt_model_call_text": (c_int32, [c_void_p, c_char_p]),
    "agentrt_model_call_reasoning": (c_int32, [c_void_p, c_char_p]),
    "agentrt_model_call_tool_call_start": (c_int32, [c_void_p, c_int32, c_char_p, c_char_p]),
    "agentrt_model_call_tool_call_args": (c_int32, [c_void_p, c_int32, c_char_p]),
    "agentrt_model_call_finish": (c_int32, [c_void_p, c_char_p]),
    "agentrt_model_call_fail": (c_int32, [c_void_p, c_int32, c_char_p]),
    "agentrt_model_call_free": (None, [c_void_p]),
    "agentrt_turn_start": (c_int32, [P_void_p, c_void_p, c_char_p]),
    "agentrt_turn_resume": (c_int32, [P_void_p, c_void_p, c_char_p, c_char_p, c_char_p]),
    "agentrt_turn_cancel": (c_int32, [c_void_p, c_char_p]),
    "agentrt_turn_get": (c_int32, [P_void_p, c_void_p, c_char_p]),
    "agentrt_turn_wait": (c_int32, [P_void_p, c_void_p, c_char_p, c_int32]),
    "agentrt_turn_interrupts": (c_int32, [P_void_p, c_void_p, c_char_p]),
    "agentrt_turn_messages": (c_int32, [P_void_p, c_void_p, c_char_p]),
    "agentrt_thread_history": (c_int32, [P_void_p, c_void_p, c_char_p]),
    "agentrt_thread_state": (c_int32, [P_void_p, c_void_p, c_char_p]),
    "agentrt_threads_list": (c_int32, [P_void_p, c_void_p, c_char_p]),
    "agentrt_thread_delete": (c_int32, [c_void_p, c_char_p, c_char_p]),
    "agentrt_mcp_servers": (c_int32, [P_void_p, c_void_p]),
    "agentrt_mcp_tools": (c_int32, [P_void_p, c_void_p]),
    "agentrt_spend": (c_int32, [P_void_p, c_void_p, c_char_p, c_char_p]),
    "agentrt_flush_traces": (c_int32, [c_void_p, c_int32]),
    "agentrt_mcp_tool_approve": (c_int32, [P_void_p, c_void_p, c_char_p]),
    "agentrt_upload_create": (c_int32, [P_void_p, c_void_p, c_char_p, c_char_p, c_void_p, c_size_t, c_char_p]),
    "agentrt_job_get": (c_int32, [P_void_p, c_void_p, c_char_p]),
    "agentrt_jobs_list": (c_int32, [P_void_p, c_void_p, c_char_p]),
    "agentrt_job_update": (c_int32, [P_void_p, c_void_p, c_char_p, c_char_p]),
    "agentrt_job_complete": (c_int32, [P_void_p, c_void_p, c_char_p, c_char_p]),
    "agentrt_job_fail": (c_int32, [P_void_p, c_void_p, c_char_p, c_char_p, c_char_p]),
    "agentrt_job_cancel": (c_int32, [P_void_p, c_void_p, c_char_p, c_char_p]),
    "agentrt_runtime_set_job_cancel_hook": (c_int32, [c_void_p, agentrt_job_cb, c_void_p, agentrt_destroy_cb]),
    "agentrt_events_open": (c_int32, [P_void_p, c_void_p, c_char_p, c_int64]),
    "agentrt_events_page": (c_int32, [P_void_p, c_void_p, c_char_p, c_char_p, c_int64, c_int32]),
    "agentrt_events_next": (c_int32, [P_void_p, P_int64, c_void_p, c_int32]),
    "agentrt_events_close": (c_int32, [c_void_p]),
    "agentrt_events_free": (None, [c_void_p]),
    "agentrt_transcribe": (c_int32, [P_void_p, c_void_p, c_void_p, c_size_t, c_char_p, c_char_p]),
}


def _candidates():
    env = os.environ.get("AGENTRT_LIBRARY")
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    for name in (f"libagentrt.so.{ABI_VERSION}", "libagentrt.so", "libagentrt.dylib", "agentrt.dll"):
        path = os.path.join(here, name)
        if os.path.exists(path):
            yield path
    found = ctypes.util.find_library("agentrt")
    if found:
        yield found
    yield f"libagentrt.so.{ABI_VERSION}"


def load_library():
    """Loads libagentrt, declares every prototype, and checks the ABI version (ImportError otherwise)."""
    errors = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
            break
        except OSError as e:
            errors.append(f"{path}: {e}")
    else:
        raise ImportError("agentrt: cannot load libagentrt (set AGENTRT_LIBRARY to its path): " + "; ".join(errors))
    declare(lib)
    check_abi(lib.agentrt_abi_version(), ABI_VERSION, getattr(lib, "_name", "libagentrt"))
    return lib


# The values each integer parameter type holds. ctypes converts a Python int into one by cutting its high bits
# (2**32 + 5 arrives as 5): an argument outside the type's range is refused before the call instead.
_INT_RANGES = {
    c_int32: (-(2**31), 2**31 - 1),
    c_int64: (-(2**63), 2**63 - 1),
    c_uint32: (0, 2**32 - 1),
    c_size_t: (0, 2 ** (8 * ctypes.sizeof(c_size_t)) - 1),
}


def _range_checked(name, fn):
    """`fn` behind a check of its integer arguments: InvalidArgument (a ValueError) naming the function, the
    argument and its value for one the C type cannot hold. `fn` itself when it takes no integer."""
    checks = [(i, _INT_RANGES[t]) for i, t in enumerate(fn.argtypes) if t in _INT_RANGES]
    if not checks:
        return fn

    def call(*args):
        for i, (lo, hi) in checks:
            value = args[i] if i < len(args) else None
            if isinstance(value, int) and not lo <= value <= hi:
                from .errors import InvalidArgument  # errors imports this module

                raise InvalidArgument(f"{name}: argument {i + 1} is {value}, outside {lo}..{hi}")
        return fn(*args)

    call.__name__ = name
    call.argtypes = fn.argtypes
    call.restype = fn.restype
    return call


def declare(lib):
    for name, (restype, argtypes) in PROTOTYPES.items():
        fn = getattr(lib, name)  # AttributeError: the library lacks a function this binding needs
        fn.restype = restype
        fn.argtypes = argtypes
        setattr(lib, name, _range_checked(name, fn))


def check_abi(found, expected, where="libagentrt"):
    if found != expected:
        raise ImportError(f"agentrt: {where} has ABI version {found}, this binding needs {expected}")


lib = load_library()


def take_string(ptr):
    """Copies a library-owned string (a c_void_p) into a Python str and frees it with agentrt_free."""
    if not ptr:
        return None
    try:
        return ctypes.string_at(ptr).decode("utf-8")
    finally:
        lib.agentrt_free(ptr)
