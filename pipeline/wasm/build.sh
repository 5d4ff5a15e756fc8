#!/bin/sh
# Builds the WebAssembly transcoder, pipeline/wasm/transcoder.wasm, from src/*.c with Debian's
# clang 14 and lld (apt-get install clang-14 lld-14; no libc, no Emscripten). The built file is
# committed, so running Sluice needs no compiler; this script is for changing the C.
#
#   sh pipeline/wasm/build.sh          (npm run build:wasm) rebuild transcoder.wasm
#   sh pipeline/wasm/build.sh --check  rebuild into a temporary directory and fail if the bytes
#                                      differ from the committed transcoder.wasm (the CI does
#                                      this: pipeline/wasm/build.test.ts)
#
# The build is reproducible: the same sources and the same clang major version give the same
# bytes. No debug information, no paths (sources are named relative to this directory, and
# -ffile-prefix-map maps the directory away in case a path slips in), no timestamps. The
# toolchain is pinned to clang/lld 14 (Debian 12's), printed, and another major version is
# refused: a different LLVM may well generate different code. CLANG names another binary of
# that version (e.g. clang-14); it links with the wasm-ld it finds beside it or on PATH.
set -eu
cd "$(dirname "$0")"
here=$(pwd)

CLANG_MAJOR=14
CLANG=${CLANG:-clang}

# The most memory the module may have: 256 MiB (the loader asks for the same maximum), and what
# it starts with: 2 MiB (its stack, its data, small requests; the loader's INITIAL_PAGES).
MAX_MEMORY=268435456
INITIAL_MEMORY=2097152
# Its stack, at the bottom of memory: an overflow leaves memory and traps, it corrupts nothing.
STACK_BYTES=1048576

fail() { printf 'build.sh: %s\n' "$*" >&2; exit 1; }

command -v "$CLANG" >/dev/null 2>&1 || fail "no $CLANG: install Debian's clang-$CLANG_MAJOR and lld-$CLANG_MAJOR (apt-get install clang-$CLANG_MAJOR lld-$CLANG_MAJOR), or set CLANG"
WASM_LD=$("$CLANG" -print-prog-name=wasm-ld)
command -v "$WASM_LD" >/dev/null 2>&1 || fail "no wasm-ld for $CLANG: install Debian's lld-$CLANG_MAJOR"
clang_version=$("$CLANG" --version | head -n 1)
ld_version=$("$WASM_LD" --version | head -n 1)
clang_major=$(printf '%s\n' "$clang_version" | sed -n 's/.*clang version \([0-9][0-9]*\)\..*/\1/p')
ld_major=$(printf '%s\n' "$ld_version" | sed -n 's/.*LLD \([0-9][0-9]*\)\..*/\1/p')
[ "$clang_major" = "$CLANG_MAJOR" ] || fail "$CLANG is '$clang_version', not clang $CLANG_MAJOR: the committed transcoder.wasm is built with clang $CLANG_MAJOR (set CLANG=clang-$CLANG_MAJOR)"
[ "$ld_major" = "$CLANG_MAJOR" ] || fail "$WASM_LD is '$ld_version', not LLD $CLANG_MAJOR"
echo "toolchain: $clang_version; $ld_version"

check=no
case "${1:-}" in
  --check) check=yes ;;
  '') ;;
  *) fail "usage: build.sh [--check]" ;;
esac

if [ "$check" = yes ]; then
  out_dir=$(mktemp -d)
  trap 'rm -rf "$out_dir"' EXIT
  out="$out_dir/transcoder.wasm"
else
  out="transcoder.wasm"
fi

# -O2: as fast as -O3 here and smaller. -ffp-contract=off: every double operation rounded on
# its own, as in JavaScript (numbers.c depends on it). -mbulk-memory: memcpy and memset become
# memory.copy and memory.fill (there is no libc to call). -mmutable-globals: the stack pointer
# is exported, so the loader can put it back after a call that ended in a trap.
"$CLANG" --target=wasm32-unknown-unknown -std=c11 -O2 -flto -nostdlib -ffreestanding \
  -mbulk-memory -mmutable-globals -ffp-contract=off \
  -Wall -Wextra -Werror -Wno-unused-parameter \
  -ffile-prefix-map="$here"=. \
  -Wl,--no-entry -Wl,--import-memory -Wl,--initial-memory=$INITIAL_MEMORY -Wl,--max-memory=$MAX_MEMORY \
  -Wl,--stack-first -Wl,-z,stack-size=$STACK_BYTES -Wl,--export=__stack_pointer \
  -Wl,--strip-debug \
  $(LC_ALL=C ls src/*.c) \
  -o "$out"

if [ "$check" = yes ]; then
  cmp -s "$out" transcoder.wasm || fail "transcoder.wasm differs from what src/ builds to: run npm run build:wasm and commit transcoder.wasm"
  echo "transcoder.wasm is what src/ builds to ($(wc -c < transcoder.wasm | tr -d ' ') bytes)"
else
  echo "built pipeline/wasm/transcoder.wasm ($(wc -c < "$out" | tr -d ' ') bytes)"
fi
