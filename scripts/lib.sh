#!/usr/bin/env bash
# Shared helpers for scripts/*.sh: make sure the local services are up, starting them when they are
# installed but stopped, or say exactly what is missing.

say() { printf '%s\n' "$*" >&2; }

# go.mod's `toolchain go1.26.11` carries the standard library's security fixes (net/http, crypto/tls,
# crypto/x509). This machine's go.env says GOTOOLCHAIN=local, which would ignore it: an older Go fetches go1.26.11
# once through the module proxy instead.
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}

wait_for() { # wait_for <seconds> <command...>
  local n=$1; shift
  for ((i = 0; i < n * 5; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.2
  done
  return 1
}

pg_bin() { # directory of the PostgreSQL server binaries
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  [[ -n $d ]] && printf '%s' "$d"
}

ensure_postgres() {
  if pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then return 0; fi
  if ! command -v pg_ctlcluster >/dev/null 2>&1 || [[ -z $(ls /etc/postgresql 2>/dev/null) ]]; then
    say "PostgreSQL is not installed. Install it with: apt-get install -y postgresql"
    return 1
  fi
  say "starting PostgreSQL…"
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -n 1)" main start || true
  wait_for 30 pg_isready -q -h 127.0.0.1 -p 5432 || { say "PostgreSQL did not become ready on 127.0.0.1:5432"; return 1; }
}

ensure_redis() {
  if redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; then return 0; fi
  if ! command -v redis-server >/dev/null 2>&1; then
    say "Redis is not installed. Install it with: apt-get install -y redis-server"
    return 1
  fi
  say "starting Redis…"
  mkdir -p /var/lib/redis /var/log/redis 2>/dev/null || true
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log >/dev/null || true
  wait_for 20 sh -c 'redis-cli -h 127.0.0.1 -p 6379 ping | grep -q PONG' || { say "Redis did not become ready on 127.0.0.1:6379"; return 1; }
}

mariadb_ping() {
  if command -v mariadb-admin >/dev/null 2>&1; then
    mariadb-admin -h 127.0.0.1 -P 3306 -uroot ping >/dev/null 2>&1
  else
    mysqladmin -h 127.0.0.1 -P 3306 -uroot ping >/dev/null 2>&1
  fi
}

ensure_mariadb() {
  if mariadb_ping; then return 0; fi
  if [[ ! -x /usr/sbin/mariadbd ]]; then
    say "MariaDB is not installed. Install it with: apt-get install -y mariadb-server"
    return 1
  fi
  say "starting MariaDB…"
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd >/dev/null 2>&1 || true
  wait_for 30 mariadb_ping || { say "MariaDB did not become ready on 127.0.0.1:3306"; return 1; }
}

port_open() { # port_open <port>: something listens on 127.0.0.1:<port>
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# ensure_rabbitmq starts RabbitMQ when it is installed but stopped, and enables its management
# plugin (the HTTP API on 15672 that the queues module drives) when it is off.
ensure_rabbitmq() {
  if ! command -v rabbitmq-server >/dev/null 2>&1; then
    say "RabbitMQ is not installed. Install it with: apt-get install -y rabbitmq-server"
    return 1
  fi
  if ! port_open 5672; then
    say "starting RabbitMQ…"
    rabbitmq-server -detached >/dev/null 2>&1 || true
    wait_for 90 port_open 5672 || { say "RabbitMQ did not become ready on 127.0.0.1:5672"; return 1; }
  fi
  if ! port_open 15672; then
    say "enabling the RabbitMQ management plugin…"
    rabbitmq-plugins enable rabbitmq_management >/dev/null 2>&1 || true
    wait_for 90 port_open 15672 || { say "the RabbitMQ management API did not answer on 127.0.0.1:15672"; return 1; }
  fi
}

free_port() { # free_port <start>
  local p=$1
  while (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; do p=$((p + 1)); done
  printf '%s' "$p"
}
