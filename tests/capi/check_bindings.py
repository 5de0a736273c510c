#!/usr/bin/env python3
"""Fails when a function declared in agentrt.h is missing from (or has another parameter count in) the Python
binding's thin layer (agentrt._capi.PROTOTYPES, applied to the loaded library) or the Node binding's
(bindings/node/lib/prototypes.js). Also fails when a binding declares a function the header does not have.

usage: check_bindings.py <agentrt.h> <bindings dir>     (AGENTRT_LIBRARY must point at libagentrt.so)
"""
import json
import os
import re
import subprocess
import sys

DECL = re.compile(r"AGENTRT_API\s+[^;(]*?\b(agentrt_\w+)\s*\(([^)]*)\)\s*;", re.S)


def param_count(params):
    params = " ".join(params.split())
    if params in ("", "void"):
        return 0
    return len(params.split(","))


def header_functions(text):
    return {name: param_count(params) for name, params in DECL.findall(text)}


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


def node_layer(bindings):
    script = ("const {PROTOTYPES} = require(process.argv[1]);"
              "process.stdout.write(JSON.stringify(PROTOTYPES));")
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
    declared = header_functions(open(header, encoding="utf-8").read())
    if len(declared) < 30:
        print(f"only {len(declared)} functions parsed from {header}: the parser is broken")
        return 1
    # The check itself must be able to fail: a header with one more function is reported for both layers.
    fake = dict(declared, agentrt_not_in_any_binding=1)
    py, node = python_layer(bindings), node_layer(bindings)
    if (len(compare(fake, py, "python")) != len(compare(declared, py, "python")) + 1
            or len(compare(fake, node, "node")) != len(compare(declared, node, "node")) + 1):
        print("self-check failed: a function missing from a binding was not reported")
        return 1
    problems = compare(declared, py, "python") + compare(declared, node, "node")
    for p in problems:
        print(p)
    if problems:
        return 1
    print(f"both thin layers declare the {len(declared)} functions of agentrt.h with their parameter counts")
    return 0


if __name__ == "__main__":
    sys.exit(main())
