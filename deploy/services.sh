#!/usr/bin/env bash
# Starts the real services Sluice's tests and CI talk to, on a bare Debian machine:
#   NATS (nats-server with JetStream) on 127.0.0.1:4222
#   Redis on 127.0.0.1:6379 (and ::1)
#   ClickHouse server: installed only. The tests start their own instance (random ports, temp
#   data dir), so the system one is not started.
#   docker-compose: installed only; deploy/compose.test.ts validates docker-compose.yml with it.
# Idempotent: a package already installed is not reinstalled, a service already answering is
# left alone. Each wait is bounded and says what did not answer. Run as root (or with sudo).
set -euo pipefail

WAIT_SECONDS="${SERVICES_WAIT_SECONDS:-30}"
SUDO=""
if [[ $EUID -ne 0 ]]; then SUDO="sudo"; fi

say() { printf 'services: %s\n' "$*"; }
fail() { printf 'services: FAILED: %s\n' "$*" >&2; exit 1; }

# apt-get update runs at most once, and only when something must be installed.
APT_UPDATED=0
install_package() {
  local package="$1"
  if [[ $APT_UPDATED -eq 0 ]]; then
    say "apt-get update"
    $SUDO apt-get update -qq || fail "apt-get update did not work"
    APT_UPDATED=1
  fi
  say "installing $package"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$package" >/dev/null \
    || fail "apt-get install $package did not work"
}

# ensure_binary PATH PACKAGE: installs PACKAGE unless PATH is there.
ensure_binary() {
  local binary="$1" package="$2"
  if [[ -x "$binary" ]]; then
    say "$package: already installed ($binary)"
  else
    install_package "$package"
    [[ -x "$binary" ]] || fail "$package is installed but $binary is not there"
  fi
}

# The checks run in subshells: the connection's file descriptor and the shell's own "connection
# refused" message stay in there.
# nats_info: the INFO line NATS greets every new connection with (nothing if nobody answers).
nats_info() (
  exec 3<>/dev/tcp/127.0.0.1/4222 && IFS= read -r -t 2 line <&3 && printf '%s' "$line"
) 2>/dev/null
nats_answers() { [[ "$(nats_info)" == INFO* ]]; }

redis_answers() (
  exec 3<>/dev/tcp/127.0.0.1/6379 && printf 'PING\r\n' >&3 && IFS= read -r -t 2 reply <&3 && [[ "$reply" == "+PONG"* ]]
) 2>/dev/null

# wait_for NAME CHECK LOG: polls CHECK until it succeeds or WAIT_SECONDS pass.
wait_for() {
  local name="$1" check="$2" log="$3" deadline=$((SECONDS + WAIT_SECONDS))
  until "$check"; do
    if (( SECONDS >= deadline )); then
      [[ -r "$log" ]] && { printf -- '--- last lines of %s ---\n' "$log" >&2; tail -n 20 "$log" >&2; }
      fail "$name did not answer within ${WAIT_SECONDS}s"
    fi
    sleep 0.2
  done
}

# --- NATS with JetStream ---------------------------------------------------------------
ensure_binary /usr/sbin/nats-server nats-server
if nats_answers; then
  say "nats-server: already answering on 127.0.0.1:4222"
else
  $SUDO mkdir -p /var/lib/nats-server
  say "nats-server: starting on 127.0.0.1:4222 with JetStream (store /var/lib/nats-server)"
  $SUDO start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- \
    -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log
  wait_for nats-server nats_answers /var/log/nats-server.log
  say "nats-server: answering"
fi
# A NATS someone else started without -js would pass the connect check but fail every test.
info="$(nats_info)" || true
[[ "$info" == *'"jetstream":true'* ]] \
  || fail "the NATS server on 127.0.0.1:4222 runs without JetStream (restart it with -js): ${info:-no answer}"

# --- Redis ------------------------------------------------------------------------------
ensure_binary /usr/bin/redis-server redis-server
if redis_answers; then
  say "redis-server: already answering on 127.0.0.1:6379"
else
  $SUDO mkdir -p /var/lib/redis /var/log/redis
  say "redis-server: starting on 127.0.0.1:6379 (no persistence)"
  $SUDO redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
  wait_for redis-server redis_answers /var/log/redis/ci.log
  say "redis-server: answering"
fi

# --- ClickHouse server: installed only --------------------------------------------------
ensure_binary /usr/sbin/clickhouse-server clickhouse-server
say "clickhouse-server: not started here (storage/clickhouse.test.ts starts its own instance)"

# --- docker-compose: installed only, to validate docker-compose.yml ----------------------
# No container engine runs here; `docker-compose config` checks the file without one
# (deploy/compose.test.ts).
ensure_binary /usr/bin/docker-compose docker-compose

say "ready"
