#!/bin/sh
# Builds the measuring prototype (not part of Sluice) as a Node-API addon, with gcc and the
# Node headers only (Debian: /usr/include/node). Output: bench/native/build/traces.node
set -e
cd "$(dirname "$0")"
mkdir -p build
gcc -O2 -march=native -shared -fPIC -Wall -Wextra -Wno-unused-parameter \
  -I"${NODE_INCLUDE:-/usr/include/node}" -DNODE_GYP_MODULE_NAME=traces \
  traces.c -o build/traces.node -lm
echo "built $(pwd)/build/traces.node"
