#!/usr/bin/env bash
# HTTPS beside nginx, in one run: the "hello" answer over TLS 1.3 from
# shoal's examples/http_server --tls and from nginx (Debian's nginx-light)
# with the same certificate (ECDSA P-256), on the same cores, both with 2
# workers. Rounds alternate between the two servers.
#   keep-alive: wrk -t1 -c64 --latency             -> req/s, p99, server CPU µs per request
#   handshakes: wrk -t1 -c16 -H 'Connection: close' -> one full handshake per request
#               (wrk keeps no session: no resumption) -> handshakes/s, server CPU µs each
# Prints a table with shoal / nginx for each figure.
#   bench/net/https_compare.sh [build dir]   (default build/release; ROUNDS=3 SECONDS_PER_RUN=8)
# Installs wrk and nginx-light with apt-get when missing. Talks to 127.0.0.1 only.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build/release}
rounds=${ROUNDS:-3}
secs=${SECONDS_PER_RUN:-8}
server_bin=$build/examples/http_server
[[ -x $server_bin ]] || { echo "https_compare: $server_bin is missing (cmake --build --preset release)" >&2; exit 1; }
missing=()
command -v wrk >/dev/null || missing+=(wrk)
command -v nginx >/dev/null || [[ -x /usr/sbin/nginx ]] || missing+=(nginx-light)
if ((${#missing[@]})); then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null
  # The package starts a system nginx on port 80; it is not what is measured.
  systemctl stop nginx 2>/dev/null || service nginx stop 2>/dev/null || true
fi
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)

dir=$(mktemp -d /tmp/shoal-https-XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=localhost \
  -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" -keyout "$dir/key.pem" -out "$dir/cert.pem" 2>/dev/null

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
shoal_port=$(free_port)
nginx_port=$(free_port)

mkdir -p "$dir/nginx/tmp"
cat >"$dir/nginx/nginx.conf" <<CONF
worker_processes 2;
daemon off;
pid $dir/nginx/nginx.pid;
error_log $dir/nginx/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $dir/nginx/tmp;
  proxy_temp_path $dir/nginx/tmp;
  fastcgi_temp_path $dir/nginx/tmp;
  uwsgi_temp_path $dir/nginx/tmp;
  scgi_temp_path $dir/nginx/tmp;
  keepalive_requests 10000000;
  keepalive_timeout 60s;
  ssl_protocols TLSv1.2 TLSv1.3;
  server {
    listen 127.0.0.1:$nginx_port ssl;
    ssl_certificate $dir/cert.pem;
    ssl_certificate_key $dir/key.pem;
    location / { default_type text/plain; return 200 "Hello, world!"; }
  }
}
CONF

SHOAL_THREADS=2 "$server_bin" "127.0.0.1:$shoal_port" 100000 --tls "$dir/cert.pem" "$dir/key.pem" >"$dir/shoal.log" 2>&1 &
shoal_pid=$!
pids+=("$shoal_pid")
"$nginx_bin" -p "$dir/nginx" -c "$dir/nginx/nginx.conf" -e "$dir/nginx/error.log" &
nginx_pid=$!
pids+=("$nginx_pid")
for port in "$shoal_port" "$nginx_port"; do
  for _ in $(seq 100); do curl -skf "https://127.0.0.1:$port/" >/dev/null 2>&1 && break; sleep 0.1; done
  curl -skf "https://127.0.0.1:$port/" >/dev/null || { echo "https_compare: no server on port $port" >&2; cat "$dir"/*.log "$dir"/nginx/error.log >&2; exit 1; }
done

# CPU jiffies of a server: the process and its children (nginx's workers).
cpu_j() {
  local total=0 p s
  for p in "$1" $(pgrep -P "$1" || true); do
    s=$(cat "/proc/$p/stat" 2>/dev/null) || continue
    s=${s##*) }
    total=$((total + $(awk '{print $12+$13}' <<<"$s")))
  done
  echo "$total"
}
hz=$(getconf CLK_TCK)
to_ms() { awk -v v="$1" 'BEGIN{ if (v ~ /us$/) printf "%.3f", v/1000; else if (v ~ /ms$/) printf "%.3f", v+0; else printf "%.3f", v*1000 }'; }

declare -A R
run() {  # run <name> <pid> <port> <kind> <round>
  local name=$1 pid=$2 port=$3 kind=$4 r=$5 out c0 c1 rps
  out=$dir/$name.$kind.$r.txt
  c0=$(cpu_j "$pid")
  if [[ $kind == keepalive ]]; then
    timeout $((secs + 20)) wrk -t1 -c64 -d"${secs}s" --latency "https://127.0.0.1:$port/" >"$out"
  else
    timeout $((secs + 20)) wrk -t1 -c16 -d"${secs}s" -H "Connection: close" "https://127.0.0.1:$port/" >"$out"
  fi
  c1=$(cpu_j "$pid")
  rps=$(awk '/^Requests\/sec:/{print $2}' "$out")
  total=$(awk '/requests in/{print $1}' "$out")
  R[$name.$kind.rps.$r]=$rps
  R[$name.$kind.cpu.$r]=$(awk -v j=$((c1 - c0)) -v hz="$hz" -v n="$total" 'BEGIN{printf "%.1f", j / hz * 1e6 / n}')
  [[ $kind == keepalive ]] && R[$name.$kind.p99.$r]=$(to_ms "$(awk '$1=="99%"{print $2}' "$out")")
  echo "$name $kind round $r: $rps req/s, ${R[$name.$kind.cpu.$r]} µs CPU each$([[ $kind == keepalive ]] && echo ", p99 ${R[$name.$kind.p99.$r]} ms"), $(grep -c 'Socket errors\|Non-2xx' "$out" || true) error lines" >&2
}
for r in $(seq "$rounds"); do
  for kind in keepalive handshake; do
    if ((r % 2)); then order="shoal nginx"; else order="nginx shoal"; fi
    for name in $order; do
      if [[ $name == shoal ]]; then run shoal "$shoal_pid" "$shoal_port" "$kind" "$r"; else run nginx "$nginx_pid" "$nginx_port" "$kind" "$r"; fi
    done
  done
done

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END{print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
med() { local v=() r; for r in $(seq "$rounds"); do v+=("${R[$1.$r]}"); done; median "${v[@]}"; }
echo
echo "HTTPS hello, TLS 1.3, ECDSA P-256, 2 workers each; median of $rounds alternating rounds of ${secs} s"
echo "OpenSSL $(openssl version | awk '{print $2}'), $("$nginx_bin" -v 2>&1 | sed 's/.*: //'), $(wrk -v 2>&1 | head -1 | awk '{print $1, $2}')"
echo
echo "| figure | shoal | nginx | shoal / nginx |"
echo "|---|---:|---:|---:|"
row() {  # row <label> <key> <better: higher|lower>
  local s n
  s=$(med "shoal.$2"); n=$(med "nginx.$2")
  echo "| $1 | $s | $n | $(awk -v s="$s" -v n="$n" 'BEGIN{printf "%.2f", s/n}') |"
}
row "keep-alive c64 req/s (higher is better)" keepalive.rps
row "keep-alive c64 p99 ms" keepalive.p99
row "keep-alive server CPU µs/request" keepalive.cpu
row "handshakes/s, c16 (higher is better)" handshake.rps
row "server CPU µs/handshake" handshake.cpu
