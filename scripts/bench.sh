#!/usr/bin/env bash
# Performance ratios of the service against baselines measured in the same run on the same
# machine (absolute figures vary on shared machines; ratios travel). Each figure is the median of
# REPEAT runs (default 3). Writes test-output/bench.md.
#   scripts/bench.sh            all figures
#   DURATION=5 REPEAT=3 scripts/bench.sh
# P1 GET /api/me/databases throughput ÷ a bare Fiber JSON handler          target ≥ 0.35
# P2 AI gateway added latency over the fake upstream at 1,000 req/s          target p50 < 0.2 ms, p99 < 1 ms
#    (with, for context, what a bare Fiber + fasthttp relay adds in the same run: the floor; and
#    what the OpenAI-compatible pass-through adds; and the context switches per request of the
#    service and of the relay, every thread counted, from /proc)
# P3 POST → usable database ÷ bare CREATE ROLE + CREATE DATABASE             target ≤ 1.3
# P4 p99 of an authenticated GET during a login flood ÷ without one          target ≤ 3
# P5 resident memory idle and under 500 connections                          target ≤ 40 MB, ≤ 150 MB
# P6 login p50 ÷ one in-process argon2id hash                                target ≤ 1.5
#    unknown-email login ÷ known-email wrong-password login (p50)           must stay within 0.8–1.2
# P7 rate-limiter median ÷ one Redis INCR round trip (redis-benchmark)       target ≤ 2
#    (the hot-path limits, taken in shares; and a small limit, counted hit by hit)
# P12 p99 of one address's logins during a one-address flood of distinct emails ÷ without   target ≤ 3
#    (the hash slots are shared fairly between client addresses; 127.0.0.2 floods, 127.0.0.1 signs in)
# Then scripts/bench-scale.sh: how the cost grows (P8 at a million users, the P1 and P2 curves, with
# plots). SCALE=0 skips it.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
# shellcheck source=scripts/tenant-pg.sh
source scripts/tenant-pg.sh
export PATH="$PATH:/usr/local/go/bin:$HOME/go/bin"
DURATION=${DURATION:-5}
REPEAT=${REPEAT:-3}

ensure_postgres
ensure_redis
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
command -v vegeta >/dev/null || go install github.com/tsenart/vegeta/v12@v12.12.0
command -v jq >/dev/null || { apt-get update -qq && apt-get install -y -qq jq >/dev/null; }

work=$(mktemp -d /tmp/bench.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  psql -q -h 127.0.0.1 -U postgres -d postgres -c "DROP DATABASE IF EXISTS $dbname WITH (FORCE)" >/dev/null 2>&1 || true
  stop_tenant_pg
  rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/provisioner" .
go build -o "$work/benchkit" ./cmd/benchkit
port=$(free_port 15133)
base_port=$(free_port 17001)
up_port=$(free_port 17101)
px_port=$(free_port 17201)
dbname="bench_$RANDOM$RANDOM"
"$work/benchkit" baseline -addr "127.0.0.1:$base_port" & pids+=($!)
"$work/benchkit" upstream -addr "127.0.0.1:$up_port" & pids+=($!)
"$work/benchkit" proxy -addr "127.0.0.1:$px_port" -upstream "http://127.0.0.1:$up_port/chat/completions" & px_pid=$!; pids+=($!)

export Environment=Development Server__Port=$port Log__Level=error \
  Jwt__Key=$(head -c 48 /dev/urandom | base64 -w0) Secrets__EncryptionKey=$(head -c 32 /dev/urandom | base64 -w0) \
  ConnectionStrings__Control="postgres://postgres@127.0.0.1:5432/$dbname?sslmode=disable" ConnectionStrings__TenantPostgres="" \
  Redis__Url=redis://127.0.0.1:6379/0 Redis__KeyPrefix="bench$RANDOM" Ai__BaseUrl="http://127.0.0.1:$up_port" Ai__DefaultModel=fake \
  RateLimit__PerIp=1000000000-M RateLimit__PerUser=1000000000-M RateLimit__Login=1000000000-M RateLimit__LoginPerIp=1000000000-M \
  RateLimit__Register=1000000000-M RateLimit__AiGenerate=1000000000-M Server__MaxConnectionsPerIp=0 \
  Auth__LockoutThreshold=1000000
"$work/provisioner" >"$work/service.log" 2>&1 & svc=$!; pids+=($svc)
rss_mb() { awk '/VmRSS/ {printf "%.1f", $2/1024}' "/proc/$svc/status"; }
B=http://127.0.0.1:$port
wait_for 30 curl -sf "$B/healthz" || { cat "$work/service.log"; exit 1; }
wait_for 10 curl -sf "http://127.0.0.1:$base_port/"

sleep 1
P5a=$(rss_mb) # idle: started, migrated, nothing served yet
pw=bench-password-$RANDOM-long
curl -sf "$B/api/auth/register" -H 'Content-Type: application/json' \
  -d "{\"fullName\":\"Bench\",\"email\":\"bench@example.test\",\"password\":\"$pw\"}" >"$work/reg.json"
token=$(jq -r .data.accessToken "$work/reg.json")
key=$(curl -sf "$B/api/me/ai-keys" -H "Authorization: Bearer $token" -H 'Content-Type: application/json' -d '{"name":"bench"}' | jq -r .data.key)
# A key with a budget (never reached): each generation reserves in Redis, one round trip.
bkey=$(curl -sf "$B/api/me/ai-keys" -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
  -d '{"name":"bench budgeted","policy":{"tokenBudget":1000000000000000,"requestBudget":1000000000000,"budgetPeriod":"month"}}' | jq -r .data.key)

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a/b}'; }
rps() { wrk -t2 -c32 -d"${DURATION}s" "$@" 2>/dev/null | awk '/Requests\/sec/ {print $2}'; }
# vegeta_p <rate> <targets-file> <percentile 50|99> → milliseconds
vegeta_p() {
  vegeta attack -rate="$1" -duration="${DURATION}s" -targets="$2" -format=http | vegeta report -type=json >"$work/v.json"
  jq -r ".latencies[\"$3th\"] / 1000000" "$work/v.json"
}

echo "== P1 throughput" >&2
p1=()
for _ in $(seq "$REPEAT"); do
  b=$(rps "http://127.0.0.1:$base_port/")
  s=$(rps -H "Authorization: Bearer $token" "$B/api/me/databases")
  p1+=("$(ratio "$s" "$b")")
done
P1=$(printf '%s\n' "${p1[@]}" | median)

echo "== P2 gateway added latency" >&2
printf 'POST http://127.0.0.1:%s/chat/completions\nContent-Type: application/json\n@%s\n' "$up_port" "$work/direct.json" >"$work/direct.t"
echo '{"model":"fake","messages":[{"role":"user","content":"Say hello"}]}' >"$work/direct.json"
printf 'POST %s/api/ai/generate\nContent-Type: application/json\nX-API-Key: %s\n@%s\n' "$B" "$key" "$work/gen.json" >"$work/gen.t"
echo '{"prompt":"Say hello"}' >"$work/gen.json"
printf 'POST %s/api/ai/generate\nContent-Type: application/json\nX-API-Key: %s\n@%s\n' "$B" "$bkey" "$work/gen.json" >"$work/genb.t"
printf 'POST http://127.0.0.1:%s/gen\nContent-Type: application/json\n@%s\n' "$px_port" "$work/direct.json" >"$work/proxy.t"
printf 'POST %s/api/ai/v1/chat/completions\nContent-Type: application/json\nAuthorization: Bearer %s\n@%s\n' "$B" "$key" "$work/direct.json" >"$work/pass.t"
p2a=(); p2b=(); p2c=(); p2d=(); p2e=(); p2f=(); p2g=(); p2h=(); p2i=(); p2j=()
minus() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", a-b}'; }
# switches <pid>: the context switches of every thread of a process so far
switches() { cat /proc/"$1"/task/*/status 2>/dev/null | awk '/ctxt_switches/ {s += $2} END {print s}'; }
per_request() { awk -v a="$1" -v b="$2" -v n="$(jq -r .requests "$work/v.json")" 'BEGIN {printf "%.1f", (b-a)/n}'; }
for _ in $(seq "$REPEAT"); do
  d50=$(vegeta_p 1000 "$work/direct.t" 50); d99=$(jq -r '.latencies["99th"] / 1000000' "$work/v.json")
  s0=$(switches "$svc")
  g50=$(vegeta_p 1000 "$work/gen.t" 50); g99=$(jq -r '.latencies["99th"] / 1000000' "$work/v.json")
  p2g+=("$(per_request "$s0" "$(switches "$svc")")")
  s0=$(switches "$px_pid")
  x50=$(vegeta_p 1000 "$work/proxy.t" 50); x99=$(jq -r '.latencies["99th"] / 1000000' "$work/v.json")
  p2h+=("$(per_request "$s0" "$(switches "$px_pid")")")
  o50=$(vegeta_p 1000 "$work/pass.t" 50); o99=$(jq -r '.latencies["99th"] / 1000000' "$work/v.json")
  k50=$(vegeta_p 1000 "$work/genb.t" 50); k99=$(jq -r '.latencies["99th"] / 1000000' "$work/v.json")
  p2i+=("$(minus "$k50" "$d50")"); p2j+=("$(minus "$k99" "$d99")")
  p2a+=("$(minus "$g50" "$d50")"); p2b+=("$(minus "$g99" "$d99")")
  p2c+=("$(minus "$x50" "$d50")"); p2d+=("$(minus "$x99" "$d99")")
  p2e+=("$(minus "$o50" "$d50")"); p2f+=("$(minus "$o99" "$d99")")
done
P2a=$(printf '%s\n' "${p2a[@]}" | median); P2b=$(printf '%s\n' "${p2b[@]}" | median)
P2c=$(printf '%s\n' "${p2c[@]}" | median); P2d=$(printf '%s\n' "${p2d[@]}" | median)
P2e=$(printf '%s\n' "${p2e[@]}" | median); P2f=$(printf '%s\n' "${p2f[@]}" | median)
P2g=$(printf '%s\n' "${p2g[@]}" | median); P2h=$(printf '%s\n' "${p2h[@]}" | median)
P2i=$(printf '%s\n' "${p2i[@]}" | median); P2j=$(printf '%s\n' "${p2j[@]}" | median)

echo "== P3 database create to usable" >&2
start_tenant_pg
trap cleanup EXIT # start_tenant_pg set its own trap; cleanup stops the cluster too
P3=$(go test -run '^$' -bench CreateToUsable -benchtime 10x -count "$REPEAT" ./modules/databases/ 2>/dev/null |
  awk '/x-bare/ {for (i=1;i<=NF;i++) if ($(i+1)=="x-bare") print $i}' | median)

echo "== P4 latency during a login flood" >&2
printf 'GET %s/api/me\nAuthorization: Bearer %s\n' "$B" "$token" >"$work/me.t"
printf 'wrk.method = "POST"\nwrk.body = [[{"email":"bench@example.test","password":"wrong-password-x"}]]\nwrk.headers["Content-Type"] = "application/json"\n' >"$work/login.lua"
p4=()
for _ in $(seq "$REPEAT"); do
  calm=$(vegeta_p 200 "$work/me.t" 99)
  wrk -t1 -c64 -d"$((DURATION + 2))s" -s "$work/login.lua" "$B/api/auth/login" >/dev/null 2>&1 & flood=$!
  sleep 1
  loaded=$(vegeta_p 200 "$work/me.t" 99)
  wait "$flood" || true
  p4+=("$(ratio "$loaded" "$calm")")
done
P4=$(printf '%s\n' "${p4[@]}" | median)

echo "== P5 memory" >&2
wrk -t2 -c500 -d"${DURATION}s" "$B/healthz" >/dev/null 2>&1 & load=$!
peak=0
while kill -0 "$load" 2>/dev/null; do
  m=$(rss_mb); peak=$(awk -v a="$m" -v b="$peak" 'BEGIN {print (a>b)?a:b}'); sleep 0.3
done
P5b=$peak

echo "== P6 login cost and timing" >&2
hash_ms=$(for _ in $(seq "$REPEAT"); do "$work/benchkit" hash; done | median)
printf 'POST %s/api/auth/login\nContent-Type: application/json\n@%s\n' "$B" "$work/ok.json" >"$work/ok.t"
echo "{\"email\":\"bench@example.test\",\"password\":\"$pw\"}" >"$work/ok.json"
printf 'POST %s/api/auth/login\nContent-Type: application/json\n@%s\n' "$B" "$work/wrong.json" >"$work/wrong.t"
echo '{"email":"bench@example.test","password":"wrong-password-x"}' >"$work/wrong.json"
printf 'POST %s/api/auth/login\nContent-Type: application/json\n@%s\n' "$B" "$work/unknown.json" >"$work/unknown.t"
echo '{"email":"nobody@example.test","password":"wrong-password-x"}' >"$work/unknown.json"
p6a=(); p6b=()
for _ in $(seq "$REPEAT"); do
  login=$(vegeta_p 20 "$work/ok.t" 50)
  p6a+=("$(ratio "$login" "$hash_ms")")
  wrong=$(vegeta_p 20 "$work/wrong.t" 50)
  unknown=$(vegeta_p 20 "$work/unknown.t" 50)
  p6b+=("$(ratio "$unknown" "$wrong")")
done
P6a=$(printf '%s\n' "${p6a[@]}" | median); P6b=$(printf '%s\n' "${p6b[@]}" | median)

echo "== P7 rate limiter" >&2
p7=(); p7b=()
for _ in $(seq "$REPEAT"); do
  lim_us=$("$work/benchkit" limiter)
  exact_us=$("$work/benchkit" limiter -rate 20-M)
  incr_ms=$(redis-benchmark -h 127.0.0.1 -t incr -n 20000 -c 1 -q 2>/dev/null | tr '\r' '\n' | grep -o 'p50=[0-9.]*' | tail -1 | cut -d= -f2)
  p7+=("$(awk -v a="$lim_us" -v b="$incr_ms" 'BEGIN {printf "%.3f", a/(b*1000)}')")
  p7b+=("$(awk -v a="$exact_us" -v b="$incr_ms" 'BEGIN {printf "%.2f", a/(b*1000)}')")
done
P7=$(printf '%s\n' "${p7[@]}" | median); P7b=$(printf '%s\n' "${p7b[@]}" | median)

echo "== P12 logins of one address during another's login flood" >&2
p12=(); p12c=(); p12f=()
for _ in $(seq "$REPEAT"); do
  read -r c f r < <("$work/benchkit" fairlogin -base "$B" -email bench@example.test -password "$pw" -duration "${DURATION}s")
  p12+=("$r"); p12c+=("$c"); p12f+=("$f")
done
P12=$(printf '%s\n' "${p12[@]}" | median)
P12c=$(printf '%s\n' "${p12c[@]}" | median); P12f=$(printf '%s\n' "${p12f[@]}" | median)

mkdir -p test-output
{
  echo "| Figure | Measured | Target |"
  echo "|---|---|---|"
  echo "| P1 \`GET /api/me/databases\` throughput ÷ bare Fiber JSON | $P1 | ≥ 0.35 |"
  echo "| P2 AI gateway added latency at 1,000 req/s, p50 / p99 | ${P2a} ms / ${P2b} ms | < 0.2 ms / < 1 ms |"
  echo "| P2 floor: a bare Fiber + fasthttp relay, same run, p50 / p99 | ${P2c} ms / ${P2d} ms | (context) |"
  echo "| P2 the OpenAI-compatible pass-through, same run, p50 / p99 | ${P2e} ms / ${P2f} ms | (context) |"
  echo "| P2 generate with a budgeted key (one Redis round trip), same run, p50 / p99 | ${P2i} ms / ${P2j} ms | (context) |"
  echo "| P2 context switches per generate request: the service / the bare relay | ${P2g} / ${P2h} | (context) |"
  echo "| P3 create-to-usable ÷ bare CREATE ROLE + CREATE DATABASE | $P3 | ≤ 1.3 |"
  echo "| P4 p99 of \`GET /api/me\` during a login flood ÷ without | $P4 | ≤ 3 |"
  echo "| P5 resident memory idle / under 500 connections | ${P5a} MB / ${P5b} MB | ≤ 40 MB / ≤ 150 MB |"
  echo "| P6 login p50 ÷ one argon2id hash (${hash_ms} ms) | $P6a | ≤ 1.5 |"
  echo "| P6 unknown-email ÷ known-email wrong-password login, p50 | $P6b | 0.8–1.2 |"
  echo "| P7 rate-limit check ÷ Redis INCR round trip (hot-path limits, in shares) | $P7 | ≤ 2 |"
  echo "| P7 the same for a small limit, counted hit by hit (Login) | $P7b | ≤ 2 |"
  echo "| P12 p99 of one address's logins during another's flood of distinct emails ÷ without (${P12f} ms / ${P12c} ms) | $P12 | ≤ 3 |"
  echo
  echo "Measured $(date -u +%F) on $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(awk -F: '/model name/ {print $2; exit}' /proc/cpuinfo | xargs); median of $REPEAT runs of ${DURATION}s; \`scripts/bench.sh\`."
} | tee test-output/bench.md

if [[ ${SCALE:-1} != 0 ]]; then
  DURATION=$DURATION scripts/bench-scale.sh
fi
