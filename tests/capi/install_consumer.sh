#!/usr/bin/env bash
# Installs agentrt (component "agentrt") into a temp prefix, then builds and runs a tiny C consumer against it
# twice: with find_package(agentrt) and with pkg-config.
# usage: install_consumer.sh <agentrt build dir> <consumer source dir> <C compiler> [cmake generator]
set -euo pipefail
build=$1
src=$2
cc=$3
generator=${4:-}
work=$(mktemp -d "${TMPDIR:-/tmp}/agentrt-install-XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

cmake --install "$build" --prefix "$prefix" --component agentrt >/dev/null
for f in include/agentrt.h include/agentrt/runtime.hpp; do
  [ -f "$prefix/$f" ] || { echo "not installed: $f"; exit 1; }
done
pc=$(find "$prefix" -name agentrt.pc | head -n1)
config=$(find "$prefix" -name agentrtConfig.cmake | head -n1)
lib=$(find "$prefix" -name 'libagentrt.so.*' | head -n1)
[ -n "$pc" ] && [ -n "$config" ] && [ -n "$lib" ] || { echo "missing: agentrt.pc, agentrtConfig.cmake or libagentrt.so"; exit 1; }
libdir=$(dirname "$lib")
[ -f "$libdir/libagentrt_core.a" ] || { echo "not installed: libagentrt_core.a"; exit 1; }

# 1. find_package(agentrt)
gen=()
[ -n "$generator" ] && gen=(-G "$generator")
cmake -S "$src" -B "$work/cmake-build" "${gen[@]}" -DCMAKE_C_COMPILER="$cc" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release >"$work/cmake.log" 2>&1 || { cat "$work/cmake.log"; exit 1; }
cmake --build "$work/cmake-build" >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
mkdir -p "$work/data1"
"$work/cmake-build/consumer" "$work/data1"

# 2. pkg-config
export PKG_CONFIG_PATH=$(dirname "$pc")
version=$(pkg-config --modversion agentrt)
[ "$version" = "$(sed -n 's/^#define AGENTRT_VERSION_STRING "\(.*\)"$/\1/p' "$prefix/include/agentrt.h")" ] ||
  { echo "pkg-config version $version does not match agentrt.h"; exit 1; }
# shellcheck disable=SC2046
"$cc" -std=c99 -Wall -Wextra -pedantic -Werror "$src/consumer.c" -o "$work/consumer-pc" \
  $(pkg-config --cflags --libs agentrt)
mkdir -p "$work/data2"
LD_LIBRARY_PATH="$libdir" "$work/consumer-pc" "$work/data2"
echo "installed tree OK: find_package(agentrt) and pkg-config (agentrt $version) consumers ran"
