#!/usr/bin/env bash
# Every full sample in the guide (a ```cpp block with `int main(`) still
# builds and runs: g++ compiles, links against the build tree's libshoal and
# runs it (30 s limit, exit status 0); clang++ compiles it too (syntax only,
# which is where the two differ). So the guide cannot drift from the API.
# A sample that includes a shoal/tls/ header or shoal/http/https.hpp links
# libshoal_tls and OpenSSL too. Samples run in a scratch directory where the
# guide's setup blocks ran first (12-tls.md's makes a throwaway CA and a
# certificate for localhost with `openssl`: ca.pem, cert.pem, key.pem).
#   scripts/check-guide.sh [build dir]   (default build/release)
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(realpath "${1:-build/release}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
[[ -e $build/libshoal.a || -e $build/libshoal.so ]] || { echo "check-guide: no libshoal in $build" >&2; exit 1; }

# Extract: docs/guide/07-sync.md's 2nd full sample becomes 07-sync.2.cpp. A
# sample that runs until it is stopped (a server waiting for Ctrl-C) has the
# line `<!-- check-guide: build only -->` just before its block: it is built,
# not run. A ```sh block with `<!-- check-guide: setup -->` just before it
# goes into setup.sh, run once before the samples, in their directory: so
# the commands the guide gives the reader are the ones the samples run with.
python3 - "$work" docs/guide/*.md <<'PY'
import pathlib, re, sys
out = pathlib.Path(sys.argv[1])
for md in sys.argv[2:]:
    n = 0
    text = pathlib.Path(md).read_text()
    for m in re.finditer(r"^```(cpp|sh)\n(.*?)^```", text, re.S | re.M):
        lang, block = m.group(1), m.group(2)
        before = text[:m.start()].rstrip().splitlines()
        marker = before[-1].strip() if before else ""
        if lang == "sh":
            if marker == "<!-- check-guide: setup -->":
                with open(out / "setup.sh", "a") as setup:
                    setup.write(f"# from {md}\n{block}")
            continue
        if "int main(" in block:
            n += 1
            src = out / f"{pathlib.Path(md).stem}.{n}.cpp"
            src.write_text(block)
            if marker == "<!-- check-guide: build only -->":
                src.with_suffix(".buildonly").touch()
PY
count=$(ls "$work"/*.cpp | wc -l)
((count > 0)) || { echo "check-guide: no full sample found in docs/guide" >&2; exit 1; }
if [[ -e $work/setup.sh ]] && ! (cd "$work" && bash -e setup.sh >setup.log 2>&1); then
  echo "check-guide: a setup block in docs/guide failed (openssl missing? bash scripts/install-deps.sh):" >&2
  tail -20 "$work/setup.log" >&2
  exit 1
fi

check() {  # check <sample.cpp>: prints one line; exit status 1 on failure
  local src=$1 bin=${1%.cpp} name libs=(-lshoal)
  name=$(basename "$src")
  if grep -qE '#include <shoal/(tls/|http/https\.hpp)' "$src"; then
    [[ -e $build/libshoal_tls.a || -e $build/libshoal_tls.so ]] ||
      { echo "FAIL $name: it uses TLS, and $build has no libshoal_tls (was OpenSSL 3 found?)"; return 1; }
    libs=(-lshoal_tls -lshoal -lssl -lcrypto)
  fi
  if ! g++ -std=c++20 -Wall -Wextra -Werror -Iinclude "$src" -o "$bin" -L"$build" "${libs[@]}" -pthread >"$bin.log" 2>&1; then
    echo "FAIL $name: g++ did not build it:"; head -20 "$bin.log"; return 1
  fi
  if ! clang++ -std=c++20 -Wall -Wextra -Werror -Iinclude -fsyntax-only "$src" >"$bin.log" 2>&1; then
    echo "FAIL $name: clang++ did not compile it:"; head -20 "$bin.log"; return 1
  fi
  if [[ -e ${src%.cpp}.buildonly ]]; then echo "ok   $name (built; it runs until stopped)"; return 0; fi
  if ! (cd "$(dirname "$src")" && LD_LIBRARY_PATH=$build timeout 30 "$bin" </dev/null >"$bin.out" 2>&1); then
    echo "FAIL $name: the program failed (exit status or 30 s limit); its output:"; tail -20 "$bin.out"; return 1
  fi
  echo "ok   $name"
}
export -f check
export build
# Two at a time: a sample's build is one compiler process.
if ls "$work"/*.cpp | xargs -P2 -I{} bash -c 'check "$@"' _ {}; then
  echo "check-guide: all $count full samples in docs/guide built with g++ and clang++ and ran"
else
  echo "check-guide: a guide sample failed (it is extracted from docs/guide/<chapter>.md, the Nth full sample)" >&2
  exit 1
fi
