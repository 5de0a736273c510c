#!/usr/bin/env python3
"""Fails when a function declared in agentrt.h is missing from (or has another parameter count in) the Python
binding's thin layer (agentrt._capi.PROTOTYPES, applied to the loaded library) or the Node binding's
(bindings/node/lib/prototypes.js). Also fails when a binding declares a function the header does not have, and
when a callback type of the header (typedef ... (*agentrt_*_cb)(...)) is missing from a thin layer (the ctypes
CFUNCTYPE agentrt._capi.<name>, the koffi CALLBACKS entry) or has another parameter count there.

usage: check_bindings.py <agentrt.h> <bindings dir>     (AGENTRT_LIBRARY must point at libagentrt.so)
"""
import json
import os
import re
import subprocess
import sys

DECL = re.compile(r"AGENTRT_API\s+[^;(]*?\b(agentrt_\w+)\s*\(([^)]*)\)\s*;", re.S)
CALLBACK = re.compile(r"typedef\s+[^;(]*?\(\s*\*\s*(agentrt_\w+_cb)\s*\)\s*\(([^)]*)\)\s*;", re.S)


def param_count(params):
    params = " ".join(params.split())
    if params in ("", "void"):
        return 0
    return len(params.split(","))


def header_functions(text):
    return {name: param_count(params) for name, params in DECL.findall(text)}


def header_callbacks(text):
    return {name: param_count(params) for name, params in CALLBACK.findall(text)}


def python_layer(bindings):
    sys.path.insert(0, os.path.join(bindings, "python"))
    from agentrt import _capi  # loads AGENTRT_LIBRARY and applies every prototype

    out = {}
    for name, (restype, argtypes) in _capi.PROTOTYPES.items():
        fn = getattr(_capi.lib, name)
        if fn.argtypes != argtypes or fn.restype != restype:
            raise SystemExit(f"python: {name}: the prototype is not applied to the loaded library")
        out[name] = len(argtypes)
    return out


def python_callbacks(bindings):
    sys.path.insert(0, os.path.join(bindings, "python"))
    import ctypes

    from agentrt import _capi

    out = {}
    for name in dir(_capi):
        value = getattr(_capi, name)
        if name.startswith("agentrt_") and isinstance(value, type) and issubclass(value, ctypes._CFuncPtr):
            out[name] = len(value._argtypes_)
    return out


def node_layer(bindings, table="PROTOTYPES"):
    script = (f"const {{{table}}} = require(process.argv[1]);"
              f"process.stdout.write(JSON.stringify({table}));")
    path = os.path.abspath(os.path.join(bindings, "node", "lib", "prototypes.js"))
    protos = json.loads(subprocess.run(["node", "-e", script, path], check=True, capture_output=True,
                                       text=True).stdout)
    out = {}
    for name, proto in protos.items():
        m = re.match(r"^[\w\s*]*?\b(agentrt_\w+)\s*\((.*)\)\s*$", proto)
        if not m or m.group(1) != name:
            raise SystemExit(f"node: {name}: the prototype names another function: {proto}")
        out[name] = param_count(m.group(2))
    return out


def compare(declared, layer, label):
    problems = []
    for name, count in sorted(declared.items()):
        if name not in layer:
            problems.append(f"{label}: {name} is declared in agentrt.h but missing from the thin layer")
        elif layer[name] != count:
            problems.append(f"{label}: {name} takes {count} parameters in agentrt.h, {layer[name]} in the binding")
    for name in sorted(set(layer) - set(declared)):
        problems.append(f"{label}: {name} is not a function of agentrt.h")
    return problems


def main():
    header, bindings = sys.argv[1], sys.argv[2]
    text = open(header, encoding="utf-8").read()
    declared = header_functions(text)
    callbacks = header_callbacks(text)
    if len(declared) < 40 or len(callbacks) < 4:
        print(f"only {len(declared)} functions and {len(callbacks)} callback types parsed from {header}: "
              "the parser is broken")
        return 1
    # The check itself must be able to fail: a header with one more function is reported for both layers.
    fake = dict(declared, agentrt_not_in_any_binding=1)
    py, node = python_layer(bindings), node_layer(bindings)
    if (len(compare(fake, py, "python")) != len(compare(declared, py, "python")) + 1
            or len(compare(fake, node, "node")) != len(compare(declared, node, "node")) + 1):
        print("self-check failed: a function missing from a binding was not reported")
        return 1
    problems = compare(declared, py, "python") + compare(declared, node, "node")
    problems += compare(callbacks, python_callbacks(bindings), "python callbacks")
    problems += compare(callbacks, node_layer(bindings, "CALLBACKS"), "node callbacks")
    for p in problems:
        print(p)
    if problems:
        return 1
    print(f"both thin layers declare the {len(declared)} functions and the {len(callbacks)} callback types of "
          "agentrt.h with their parameter counts")
    return 0


if __name__ == "__main__":
    sys.exit(main())
