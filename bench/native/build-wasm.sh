#!/bin/sh
# Builds the measuring prototype (not part of Sluice) as WebAssembly, with clang and lld
# (Debian: apt-get install clang lld) and no libc. Output: bench/native/build/traces.wasm
set -e
cd "$(dirname "$0")"
mkdir -p build
clang --target=wasm32 -O3 -nostdlib -mbulk-memory -Wall -Wextra -Wno-unused-parameter \
  -Wl,--no-entry -Wl,--export=__heap_base -Wl,--initial-memory=1048576 \
  traces.c -o build/traces.wasm
echo "built $(pwd)/build/traces.wasm"
