#!/usr/bin/env bash
# Network benchmarks (issue 6) against examples/http_server:
#   1. HTTP/1.1 keep-alive hello under wrk (64 and 512 connections, 1 and 2
#      workers): requests/s, p99, server CPU per request;
#   2. idle connections (10,000 and as many as the fd limit allows): server
#      RSS per connection, threads, time to open, one request's latency;
#   3. connection churn (50,000 short connections, 64 in flight): conn/s.
# Rows 1 and 3 also run against bench/net/epoll_reference.cpp (a hand-written
# single-threaded epoll server) so shoal can be read as a same-run ratio.
# Every figure is the median of NET_BENCH_REPS runs (idle: one run each).
#
#   bench/net/run.sh [build-dir]      (default: build/release)
#
# Knobs (environment): NET_BENCH_REPS=3, NET_BENCH_SECONDS=10 (per wrk run),
# NET_BENCH_WORKERS="1 2 ref" (SHOAL_THREADS values for row 1; ref: the epoll
# reference), NET_BENCH_CONNS="64 512", NET_BENCH_CHURN=50000,
# NET_BENCH_JOBS=2 (build parallelism), NET_BENCH_SECTIONS="http churn idle"
# (to rerun one that was noisy), NET_BENCH_NO_BUILD=1 (use the binaries as
# they are). Installs wrk with apt-get if missing.
# Per-run output goes to $BUILD/bench/net/logs/. Takes about 4 minutes.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${1:-$ROOT/build/release}
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
REPS=${NET_BENCH_REPS:-3}
SECONDS_PER_RUN=${NET_BENCH_SECONDS:-10}
WORKERS=${NET_BENCH_WORKERS:-"1 2 ref"}
CONNS=${NET_BENCH_CONNS:-"64 512"}
CHURN=${NET_BENCH_CHURN:-50000}
JOBS=${NET_BENCH_JOBS:-2}
SECTIONS=" ${NET_BENCH_SECTIONS:-http churn idle} "

# ---- build and tools ------------------------------------------------------------
BUILT="built now"
if [[ ${NET_BENCH_NO_BUILD:-0} == 1 ]]; then
  BUILT="binaries not rebuilt, $(date -u -r "$BUILD/examples/http_server" +%H:%MZ)"
else
  if [[ ! -f $BUILD/CMakeCache.txt ]]; then
    cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=g++ >/dev/null
  fi
  if ! cmake --build "$BUILD" -j "$JOBS" --target http_server net_idle_client net_churn_client net_idle_server \
    net_epoll_reference >"$BUILD/net-bench-build.log" 2>&1; then
    tail -20 "$BUILD/net-bench-build.log" >&2
    echo "bench/net/run.sh: the build failed (log: $BUILD/net-bench-build.log)" >&2
    exit 1
  fi
fi
SERVER=$BUILD/examples/http_server
IDLE=$BUILD/bench/net/net_idle_client
CHURNER=$BUILD/bench/net/net_churn_client
FLOOR=$BUILD/bench/net/net_idle_server
REFERENCE=$BUILD/bench/net/net_epoll_reference
if ! command -v wrk >/dev/null; then
  echo "wrk is missing: apt-get install -y wrk" >&2
  apt-get install -y wrk >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y wrk >/dev/null; }
fi
LOGS=$BUILD/bench/net/logs
mkdir -p "$LOGS"
rm -f "$LOGS"/*.log "$LOGS"/*.txt
ulimit -n "$(ulimit -Hn)"  # the servers inherit the raised soft limit; the clients raise their own
HZ=$(getconf CLK_TCK)

# ---- helpers --------------------------------------------------------------------
SPID=""
SADDR=""
# start_server <log-name> <env assignments...> -- <command...>: sets SPID and SADDR.
start_server() {
  local name=$1
  shift
  local envs=()
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" "$@" >"$LOGS/$name.out" 2>"$LOGS/$name.err" &
  SPID=$!
  STARTED+=("$SPID")
  for _ in $(seq 100); do
    SADDR=$(grep -o '127\.0\.0\.1:[0-9]*' "$LOGS/$name.out" 2>/dev/null | head -1 || true)
    [[ -n $SADDR ]] && return 0
    sleep 0.05
  done
  echo "server $name did not start; see $LOGS/$name.err" >&2
  exit 1
}
STARTED=()  # every server pid, for the exit trap
stop_server() {  # [pid] (default: $SPID)
  local pid=${1:-$SPID}
  kill -INT "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
trap 'for p in "${STARTED[@]}"; do kill -TERM "$p" 2>/dev/null; done; true' EXIT
cpu_ticks() { sed 's/^.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }
median() { sort -g | awk '{v[NR] = $1} END {if (NR == 0) print "n/a"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
# column_median <file> <column>
column_median() { awk -v c="$2" '{print $c}' "$1" | median; }
# value <key> <RESULT line>
value() { tr ' ' '\n' <<<"$2" | sed -n "s/^$1=//p"; }
faults() { grep -c 'handler for' "$LOGS/$1.err" 2>/dev/null || true; }

echo "shoal network benchmarks: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)$(git -C "$ROOT" diff --quiet HEAD 2>/dev/null || echo '+dirty'), $(basename "$BUILD") ($BUILT), wrk $(wrk -v 2>&1 | awk 'NR==1{print $2}')"
echo

# ---- 1. HTTP keep-alive hello under wrk ----------------------------------------------
if [[ $SECTIONS == *" http "* ]]; then
echo "1. HTTP/1.1 keep-alive hello, wrk -t1 -d${SECONDS_PER_RUN}s --latency (medians of $REPS) [$(date +%T)]"
echo "   All servers run at once and the runs are interleaved (rep 1 of each, rep 2 of each, ...), so a burst"
echo "   of outside load hits them alike. server CPU/req: utime+stime from /proc/<pid>/stat over the run / requests."
printf '   %-10s %-6s %12s %10s %16s  %s\n' server conns "req/s" p99 "server CPU/req" "notes"
declare -A HPID HADDR
for w in $WORKERS; do
  if [[ $w == ref ]]; then
    start_server http-ref -- "$REFERENCE" 127.0.0.1:0
  else
    start_server "http-w$w" SHOAL_THREADS="$w" -- "$SERVER" 127.0.0.1:0 30000
  fi
  HPID[$w]=$SPID
  HADDR[$w]=$SADDR
  wrk -t1 -c64 -d1s "http://$SADDR/" >/dev/null 2>&1  # warm-up
done
for c in $CONNS; do
  for r in $(seq "$REPS"); do
    for w in $WORKERS; do
      out=$LOGS/wrk-$w-c$c-$r.log
      t0=$(cpu_ticks "${HPID[$w]}")
      wrk -t1 -c"$c" -d"${SECONDS_PER_RUN}s" --latency "http://${HADDR[$w]}/" >"$out" 2>&1
      t1=$(cpu_ticks "${HPID[$w]}")
      awk -v d=$((t1 - t0)) -v hz="$HZ" '
        /requests in/ {n = $1}
        /Requests\/sec/ {rps = $2}
        $1 == "99%" {v = $2; u = v; gsub(/[0-9.]/, "", u); sub(/[a-z]+$/, "", v);
                     p99 = (u == "us" ? v : u == "ms" ? v * 1000 : v * 1e6)}
        END {printf "%s %s %.2f\n", rps, p99, d / hz * 1e6 / n}' "$out" >>"$LOGS/http-$w-c$c.txt"
    done
  done
  for w in $WORKERS; do
    label="shoal w=$w"
    [[ $w == ref ]] && label="epoll ref"
    notes=$(cat "$LOGS"/wrk-"$w"-c"$c"-*.log | grep -E 'Socket errors|Non-2xx' | tr -s ' ' | tr '\n' ';' || true)
    printf '   %-10s %-6s %12.0f %8.0f us %13.1f us  %s\n' "$label" "$c" \
      "$(column_median "$LOGS/http-$w-c$c.txt" 1)" "$(column_median "$LOGS/http-$w-c$c.txt" 2)" \
      "$(column_median "$LOGS/http-$w-c$c.txt" 3)" "runs: $(awk '{printf "%.0f ", $1}' "$LOGS/http-$w-c$c.txt")${notes}"
  done
done
for w in $WORKERS; do stop_server "${HPID[$w]}"; done
echo "   (handler faults logged by http_server, e.g. resets when wrk closes its connections:" \
  "$(for w in ${WORKERS//ref/}; do printf 'w=%s: %s ' "$w" "$(faults "http-w$w")"; done))"
echo
fi

# ---- 3. connection churn ---------------------------------------------------------------
if [[ $SECTIONS == *" churn "* ]]; then
echo "3. connection churn: $CHURN connections, 64 in flight, 'Connection: close', client resets on close" \
  "(medians of $REPS) [$(date +%T)]"
echo "   Both servers run at once and the runs alternate."
start_server churn -- "$SERVER" 127.0.0.1:0 30000
CPID=$SPID CADDR=$SADDR
start_server churn-ref -- "$REFERENCE" 127.0.0.1:0
RPID=$SPID RADDR=$SADDR
bad=0
for r in $(seq "$REPS"); do
  for pair in "churn $CADDR $CPID" "churn-ref $RADDR $RPID"; do
    read -r name addr pid <<<"$pair"
    "$CHURNER" "$addr" "$CHURN" 64 "$pid" >"$LOGS/$name-$r.log" 2>&1 || bad=$((bad + 1))
    res=$(grep '^RESULT' "$LOGS/$name-$r.log" || true)
    echo "$(value conn_per_s "$res") $(value server_cpu_us "$res") $(value client_cpu_us "$res")" >>"$LOGS/$name.txt"
  done
done
stop_server "$CPID"
stop_server "$RPID"
for pair in "shoal churn" "epoll_ref churn-ref"; do
  read -r label name <<<"$pair"
  printf '   %-10s %6.0f conn/s (runs: %s); server CPU %.1f us/conn, client CPU %.1f us/conn\n' "${label/_/ }" \
    "$(column_median "$LOGS/$name.txt" 1)" "$(awk '{printf "%s ", $1}' "$LOGS/$name.txt")" \
    "$(column_median "$LOGS/$name.txt" 2)" "$(column_median "$LOGS/$name.txt" 3)"
done
[[ $bad -gt 0 ]] && echo "   $bad churn run(s) reported errors: see $LOGS/churn*.log"
echo "   (http_server handler faults: $(faults churn); TIME_WAIT sockets now: $(($(ss -tan state time-wait | wc -l) - 1)))"
echo
fi

# ---- 2. idle connections ---------------------------------------------------------------
if [[ $SECTIONS == *" idle "* ]]; then
echo "2. idle connections (client in another process, 8 source addresses; fd limit $(ulimit -Hn)) [$(date +%T)]"
printf '   %-34s %6s %10s %8s %8s %14s %14s %4s\n' server count "RSS/conn" threads "open s" "request us" "(no idle)" cut
idle_row() {  # <label> <log-name> <count> <warm> -- <server command...>
  local label=$1 name=$2 count=$3 warm=$4
  shift 5
  start_server "$name" -- "$@"
  "$IDLE" "$SADDR" "$SPID" "$count" 20 8 0 "$warm" >"$LOGS/$name.log" 2>&1 || true
  stop_server
  local res
  res=$(grep '^RESULT' "$LOGS/$name.log" || true)
  if [[ -z $res ]]; then
    echo "   $label: FAILED, see $LOGS/$name.log"
    return
  fi
  printf '   %-34s %6s %8s B %8s %8s %6s / %5s %6s / %5s %4s\n' "$label" "$(value count "$res")" \
    "$(value per_conn_b "$res")" "$(value threads "$res")" "$(value accepted_s "$res")" \
    "$(value probe_us "$res")" "$(value probe_hot_us "$res")" "$(value probe_base_us "$res")" \
    "$(value probe_base_hot_us "$res")" "$(value cut "$res")"
}
idle_row "http_server" idle-10k 10000 0 -- "$SERVER" 127.0.0.1:0 30000
idle_row "http_server" idle-max max 0 -- "$SERVER" 127.0.0.1:0 30000
idle_row "http_server, one request first" idle-10k-warm 10000 1 -- "$SERVER" 127.0.0.1:0 30000
idle_row "floor: serve + wait_readable" idle-floor-max max 0 -- "$FLOOR" 127.0.0.1:0 minimal
idle_row "epoll ref (no buffer while idle)" idle-ref-max max 0 -- "$REFERENCE" 127.0.0.1:0
echo "   request us: one request on a fresh connection while the others idle, median of 20 probes 10 ms apart /"
echo "   back to back; (no idle): the same before any idle connection was opened. threads = workers + the main thread."
echo "   RSS is user-space memory only: the kernel's socket memory is in none of these rows."
echo
fi
echo "logs: $LOGS [$(date +%T)]"
