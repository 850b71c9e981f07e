#!/usr/bin/env bash
# Every example in a public header still compiles, as the guide's samples do
# (scripts/check-guide.sh), so a header cannot show an API that is gone.
#
# An example is a run of `//   ` lines (three spaces after the slashes) in the
# comment that opens a header under include/shoal (detail/ excluded); a line
# that starts with `...` stands for code left out and is skipped. Each run
# becomes the body of `shoal::Task<void> example_N(<parameters>)`, after the
# header, <shoal/shoal.hpp> and `using namespace std::chrono_literals;`. What
# an example takes as given (`listener`, `conn`, `handle(...)`) is declared
# per header in CONTEXT below: a new example that needs a name adds it there.
# Each line ends in a comment naming its header line, which a compiler's
# message quotes. (Not `#line`: code that seems to come from a header makes
# g++ warn that a lambda has no linkage, -Wsubobject-linkage.)
# Compiled with g++ and clang++, -Wall -Wextra -Werror, syntax only.
#   scripts/check-header-examples.sh
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

python3 - "$work" <<'PY'
import pathlib, sys

# header (under include/) -> what its examples take as given: "include", an
# extra header; "decls", placeholders at namespace scope; "params", example_N's;
# "toplevel", examples that are declarations themselves (a test's macros).
CONTEXT = {
    "shoal/channel/broadcast.hpp": {
        "decls": "void warn(std::uint64_t missed);\nvoid deliver(const std::string& message);"},
    "shoal/channel/oneshot.hpp": {"decls": "void use(int value);", "params": "shoal::Scope& s"},
    "shoal/channel/select.hpp": {
        "decls": "void use(int value);\nvoid numbers_closed();",
        "params": "shoal::Channel<int>& numbers, shoal::Channel<std::string>& out, shoal::Notify& stop"},
    "shoal/channel/watch.hpp": {
        "decls": "struct Config { int port = 80; };\nConfig load();\nvoid apply(const Config& config);"},
    "shoal/http/https.hpp": {
        "decls": "void handler(const shoal::http::Request& req, shoal::http::Response& res);",
        "params": "shoal::net::Listener& listener, shoal::net::ServeOptions serve_options"},
    "shoal/http/server.hpp": {"params": "shoal::net::Listener& listener, shoal::net::ServeOptions serve_options"},
    "shoal/http/stats.hpp": {"include": "shoal/http.hpp"},
    "shoal/http2/https.hpp": {
        "decls": "struct Handler { void operator()(const shoal::http::Request&, shoal::http::Response&) const {} };",
        "params": "shoal::net::Listener& listener, shoal::net::ServeOptions serve_options, Handler handler"},
    "shoal/http2/client.hpp": {"params": "shoal::net::Address address"},
    "shoal/http2/server.hpp": {
        "decls": "struct Handler { void operator()(const shoal::http::Request&, shoal::http::Response&) const {} };",
        "params": "shoal::net::Stream& conn, Handler& handler"},
    "shoal/testing/gtest.hpp": {"toplevel": True},
    "shoal/net/byte_stream.hpp": {"params": "shoal::net::Stream& conn"},
    "shoal/net/buffered_reader.hpp": {"decls": "void handle(std::string_view line);", "params": "shoal::net::Stream& conn"},
    "shoal/scope/cancel_scope.hpp": {
        "decls": "shoal::Task<std::string> download(std::string url);\nvoid save(const std::string& body);",
        "params": "shoal::Scope& s, shoal::Event& stop, std::string url"},
    "shoal/scope/completions.hpp": {
        "decls": "struct Page { std::string text; };\nshoal::Task<Page> fetch(std::string url);\nvoid index(const Page& page);",
        "params": "const std::vector<std::string>& urls"},
    "shoal/time/interval.hpp": {"decls": "void send_heartbeat();"},
    "shoal/tls/serve.hpp": {"params": "shoal::net::Listener& listener, shoal::net::ServeOptions options"},
    "shoal/tls/tls.hpp": {"params": "shoal::net::Address addr, std::string_view request"},
}

out = pathlib.Path(sys.argv[1])
root = pathlib.Path("include")
headers = examples = 0
for path in sorted(root.rglob("*.hpp")):
    rel = path.relative_to(root).as_posix()
    if "/detail/" in f"/{rel}":
        continue
    # The opening comment, and its runs of example lines: (line number, code).
    runs, run = [], []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.startswith("//"):
            break
        if line.startswith("//   "):
            if not line[2:].lstrip().startswith("..."):  # "... elsewhere: x" is prose, not code
                run.append((number, line[2:]))
        elif run:
            runs.append(run)
            run = []
    if run:
        runs.append(run)
    if not runs:
        continue
    context = CONTEXT.get(rel, {})
    decls, params = context.get("decls", ""), context.get("params", "")
    extra = ["#include <%s>" % context["include"]] if "include" in context else []
    tu = ["#include \"%s\"" % rel, "#include <shoal/shoal.hpp>", *extra, "#include <chrono>", "#include <cstdint>", "#include <string>", "#include <string_view>",
          "#include <utility>", "#include <vector>",
          "using namespace std::chrono_literals;",
          # A namespace of its own: placeholders such as index() must not meet ::index.
          "namespace header_example {", decls]
    for n, run in enumerate(runs, 1):
        if context.get("toplevel"):
            tu += [f"{code}  // {path.as_posix()}:{number}" for number, code in run]
            continue
        tu.append("shoal::Task<void> example_%d(%s) {" % (n, params))
        for number, code in run:
            tu.append(f"{code}  // {path.as_posix()}:{number}")
        tu.append("  co_return;  // a coroutine even if the example awaits nothing")
        tu.append("}")
    tu.append("}  // namespace header_example")
    (out / (rel.replace("/", "_") + ".cpp")).write_text("\n".join(tu) + "\n")
    (out / (rel.replace("/", "_") + ".count")).write_text(f"{rel} {len(runs)}\n")
    headers += 1
    examples += len(runs)
(out / "total").write_text(f"{headers} {examples}\n")
PY
read -r headers examples <"$work/total"
((headers > 0)) || { echo "check-header-examples: no header example found under include/shoal" >&2; exit 1; }

check() {  # check <example.cpp>: prints one line; exit status 1 on failure
  local src=$1 log=${1%.cpp}.log rel n compiler
  read -r rel n <"${src%.cpp}.count"
  for compiler in g++ clang++; do
    if ! "$compiler" -std=c++20 -Wall -Wextra -Werror -fsyntax-only -Iinclude "$src" >"$log" 2>&1; then
      echo "FAIL $rel: $compiler did not compile its example:"; head -30 "$log"; return 1
    fi
  done
  echo "ok   $rel ($n example$( ((n == 1)) || echo s))"
}
export -f check
# Two at a time: each compile is one process.
if find "$work" -name '*.cpp' -print0 | xargs -0 -P2 -I{} bash -c 'check "$@"' _ {}; then
  echo "check-header-examples: $headers headers, $examples examples compiled with g++ and clang++"
else
  echo "check-header-examples: a header example failed (each line of the example names its header line;" \
    "placeholders are in scripts/check-header-examples.sh)" >&2
  exit 1
fi
