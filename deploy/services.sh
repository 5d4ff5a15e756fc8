#!/usr/bin/env bash
# Brings up the real services Sluice's tests talk to. `npm test` runs it first (the `pretest`
# script), so a fresh clone needs only `npm install && npm test`:
#   NATS (nats-server with JetStream) on 127.0.0.1:4222
#   Redis on 127.0.0.1:6379 (and ::1)
#   ClickHouse server: installed only. The tests start their own instance (random ports, temp
#   data dir), so the system one is not started.
#   docker-compose: installed only; deploy/compose.test.ts validates docker-compose.yml with it.
#   Chromium: installed only; the browser tests (test/relay-browser.test.ts) drive it with
#   playwright-core (playwright's own browser download cannot work offline).
#   jq: installed only; the shell examples of the README and docs/ use it (test/readme-examples.test.ts).
#   clang and lld (Debian 12: clang 14): installed only; pipeline/wasm/build.test.ts rebuilds the
#   committed WebAssembly transcoder with them and checks the bytes are the same.
#   promtool (Debian package prometheus): installed only; test/metrics.test.ts lints /metrics and
#   the example alert rules with it. On a host run by systemd the package also starts a
#   Prometheus server on :9090, which the tests do not use (`systemctl disable --now prometheus`).
# Idempotent, and quick when all is there: an installed package is not reinstalled, a service
# already answering is left alone. Missing packages are installed with apt-get when this runs
# as root or with passwordless sudo; otherwise it stops with one line naming the command to run
# as root. Installed services are started as whoever runs this (root keeps their state in
# /var/lib, anyone else under ~/.local/state/sluice-services). Each wait is bounded and says
# what did not answer.
#
# Settings (environment): SERVICES_WAIT_SECONDS (30), SERVICES_INSTALL (auto; never: only
# report what is missing), SERVICES_PATH (where the binaries are looked for; default PATH and
# the sbin directories), SERVICES_NATS_PORT (4222), SERVICES_REDIS_PORT (6379),
# SERVICES_STATE_DIR (a non-root user's state dir). The tests expect the default ports.
set -euo pipefail

WAIT_SECONDS="${SERVICES_WAIT_SECONDS:-30}"
SEARCH_PATH="${SERVICES_PATH:-$PATH:/usr/sbin:/usr/bin:/sbin}"
NATS_PORT="${SERVICES_NATS_PORT:-4222}"
REDIS_PORT="${SERVICES_REDIS_PORT:-6379}"
AS_ROOT_COMMAND="sudo bash deploy/services.sh"

say() { printf 'services: %s\n' "$*"; }
fail() { printf 'services: FAILED: %s\n' "$*" >&2; exit 1; }

# Two runs at once (two `npm test`s) take turns: apt-get and the starts are not re-entrant. The
# lock is on this file; a daemon started below does not inherit it (9<&-).
exec 9<"${BASH_SOURCE[0]}"
flock -w 600 9 || fail "another deploy/services.sh held its lock for 10 minutes"

# binary NAME: the path of an installed NAME, or nothing.
binary() (
  IFS=:
  for dir in $SEARCH_PATH; do
    [[ -n "$dir" && -x "$dir/$1" ]] && { printf '%s' "$dir/$1"; return 0; }
  done
  return 0
)

# --- Packages: install what is missing, if this may ------------------------------------
# package_of BINARY: the Debian package that installs it (the binary's own name, but for promtool and wasm-ld).
package_of() {
  case "$1" in
    promtool) printf prometheus ;;
    wasm-ld) printf lld ;;
    *) printf '%s' "$1" ;;
  esac
}
binaries=(nats-server redis-server clickhouse-server docker-compose chromium openssl promtool jq clang wasm-ld)
missing=() missing_binaries=()
for name in "${binaries[@]}"; do
  [[ -n "$(binary "$name")" ]] || { missing+=("$(package_of "$name")"); missing_binaries+=("$name"); }
done
if (( ${#missing[@]} > 0 )); then
  may_install=no
  if [[ "${SERVICES_INSTALL:-auto}" != never ]]; then
    if [[ $EUID -eq 0 ]]; then ROOT=(); may_install=yes
    elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then ROOT=(sudo -n); may_install=yes
    fi
  fi
  [[ $may_install == yes ]] || fail "not installed: ${missing[*]}; install them as root with: $AS_ROOT_COMMAND"
  command -v apt-get >/dev/null || fail "not installed: ${missing[*]}, and there is no apt-get here: install them with this system's package manager"
  say "installing ${missing[*]} (apt-get)"
  "${ROOT[@]}" apt-get update -qq || fail "apt-get update did not work"
  "${ROOT[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || fail "apt-get install ${missing[*]} did not work"
  for name in "${missing_binaries[@]}"; do
    [[ -n "$(binary "$name")" ]] || fail "$name was installed but is not in $SEARCH_PATH"
  done
fi
say "installed: nats-server, redis-server, clickhouse-server, docker-compose, chromium, openssl, promtool, jq, clang, wasm-ld"

# Where a started service keeps its state and log.
if [[ $EUID -eq 0 ]]; then
  NATS_STORE=/var/lib/nats-server NATS_LOG=/var/log/nats-server.log
  REDIS_DIR=/var/lib/redis REDIS_LOG=/var/log/redis/ci.log
else
  STATE_DIR="${SERVICES_STATE_DIR:-${XDG_STATE_HOME:-$HOME/.local/state}/sluice-services}"
  NATS_STORE="$STATE_DIR/nats" NATS_LOG="$STATE_DIR/nats-server.log"
  REDIS_DIR="$STATE_DIR/redis" REDIS_LOG="$STATE_DIR/redis-server.log"
fi

# The checks run in subshells: the connection's file descriptor and the shell's own "connection
# refused" message stay in there.
# nats_info: the INFO line NATS greets every new connection with (nothing if nobody answers).
nats_info() (
  exec 3<>"/dev/tcp/127.0.0.1/$NATS_PORT" && IFS= read -r -t 2 line <&3 && printf '%s' "$line"
) 2>/dev/null
nats_answers() { [[ "$(nats_info)" == INFO* ]]; }

redis_answers() (
  exec 3<>"/dev/tcp/127.0.0.1/$REDIS_PORT" && printf 'PING\r\n' >&3 && IFS= read -r -t 2 reply <&3 && [[ "$reply" == "+PONG"* ]]
) 2>/dev/null

# wait_for NAME CHECK LOG PORT: polls CHECK until it succeeds or WAIT_SECONDS pass.
wait_for() {
  local name="$1" check="$2" log="$3" port="$4" deadline=$((SECONDS + WAIT_SECONDS))
  until "$check"; do
    if (( SECONDS >= deadline )); then
      [[ -r "$log" ]] && { printf -- '--- last lines of %s ---\n' "$log" >&2; tail -n 20 "$log" >&2; }
      fail "$name did not answer on 127.0.0.1:$port within ${WAIT_SECONDS}s"
    fi
    sleep 0.2
  done
}

# --- NATS with JetStream ---------------------------------------------------------------
if nats_answers; then
  say "nats-server: already answering on 127.0.0.1:$NATS_PORT"
else
  mkdir -p "$NATS_STORE" "$(dirname "$NATS_LOG")"
  say "nats-server: starting on 127.0.0.1:$NATS_PORT with JetStream (store $NATS_STORE)"
  # setsid -f: detached from this shell and from npm, which would otherwise wait for it.
  setsid -f "$(binary nats-server)" -a 127.0.0.1 -p "$NATS_PORT" -js -sd "$NATS_STORE" -l "$NATS_LOG" -P "$NATS_STORE/nats-server.pid" \
    </dev/null >/dev/null 2>&1 9<&-
  wait_for nats-server nats_answers "$NATS_LOG" "$NATS_PORT"
  say "nats-server: answering"
fi
# A NATS someone else started without -js would pass the connect check but fail every test.
info="$(nats_info)" || true
[[ "$info" == *'"jetstream":true'* ]] \
  || fail "the NATS server on 127.0.0.1:$NATS_PORT runs without JetStream (restart it with -js): ${info:-no answer}"

# --- Redis ------------------------------------------------------------------------------
if redis_answers; then
  say "redis-server: already answering on 127.0.0.1:$REDIS_PORT"
else
  mkdir -p "$REDIS_DIR" "$(dirname "$REDIS_LOG")"
  say "redis-server: starting on 127.0.0.1:$REDIS_PORT (no persistence)"
  "$(binary redis-server)" --daemonize yes --bind 127.0.0.1 -::1 --port "$REDIS_PORT" --save "" --appendonly no \
    --dir "$REDIS_DIR" --logfile "$REDIS_LOG" --pidfile "$REDIS_DIR/redis-server.pid" 9<&-
  wait_for redis-server redis_answers "$REDIS_LOG" "$REDIS_PORT"
  say "redis-server: answering"
fi

say "ready"
