#!/usr/bin/env python3
"""Checks that libagentrt exports exactly the functions agentrt.h declares (nothing of the static core or its
dependencies leaks), and that its SONAME carries the ABI version.

usage: check_exports.py <agentrt.h> <libagentrt.so>
"""
import re
import subprocess
import sys


def header_functions(path):
    text = open(path, encoding="utf-8").read()
    return set(re.findall(r"AGENTRT_API\s+[^;(]*?\b(agentrt_\w+)\s*\(", text))


def header_abi(path):
    m = re.search(r"#define\s+AGENTRT_ABI_VERSION\s+(\d+)", open(path, encoding="utf-8").read())
    return int(m.group(1))


def exported(lib):
    out = subprocess.run(["nm", "-D", "--defined-only", lib], check=True, capture_output=True, text=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        kind, name = parts[1], parts[2]
        if kind == "A":  # the symbol-version node (AGENTRT_1)
            continue
        names.add(name.split("@")[0])
    return names


def soname(lib):
    out = subprocess.run(["readelf", "-d", lib], check=True, capture_output=True, text=True).stdout
    m = re.search(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]", out)
    return m.group(1) if m else None


def main():
    header, lib = sys.argv[1], sys.argv[2]
    declared = header_functions(header)
    exports = exported(lib)
    ok = True
    if len(declared) < 40:
        print(f"only {len(declared)} functions found in {header}: the parser is broken")
        ok = False
    missing = sorted(declared - exports)
    extra = sorted(exports - declared)
    if missing:
        print("declared in agentrt.h but not exported:", ", ".join(missing))
        ok = False
    if extra:
        print(f"{len(extra)} exported symbols not declared in agentrt.h:", ", ".join(extra[:50]))
        ok = False
    want = f"libagentrt.so.{header_abi(header)}"
    got = soname(lib)
    if got != want:
        print(f"SONAME is {got}, expected {want}")
        ok = False
    if ok:
        print(f"{len(exports)} exported symbols, exactly the functions of agentrt.h; SONAME {got}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
