// Real clients (curl, nghttp, h2load, node, python3, ab) run as child
// processes by the tests that drive shoal's servers with them. A client
// that is not installed skips its test (scripts/install-deps.sh installs
// them), except under SHOAL_REQUIRE_HTTP_CLIENTS=1, which CI sets: there
// it fails.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "shoal/process/process.hpp"
#include "shoal/scope/scope.hpp"
#include "shoal/scope/timeout.hpp"
#include "support/stream_io.hpp"

namespace shoal::test {

/// Skips the test for want of `what`, or fails it under SHOAL_REQUIRE_HTTP_CLIENTS=1.
inline void missing(const std::string& what) {
  const char* require = std::getenv("SHOAL_REQUIRE_HTTP_CLIENTS");
  if (require != nullptr && std::string(require) == "1") {
    ADD_FAILURE() << what << " is not installed (bash scripts/install-deps.sh installs it)";
  } else {
    [&] { GTEST_SKIP() << what << " is not installed (bash scripts/install-deps.sh installs it)"; }();
  }
}

/// True if `tool` is on PATH. If not, the test is skipped, or fails under
/// SHOAL_REQUIRE_HTTP_CLIENTS=1.
inline bool have(const std::string& tool) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (::access((dir + "/" + tool).c_str(), X_OK) == 0) return true;
  }
  missing(tool);
  return false;
}

struct Ran {
  process::ExitStatus status;
  std::string out, err;
};

/// Runs a client with `input` on its stdin; kills it after 60 s (a client
/// stalled by a server bug must fail the test, not hang it).
inline Task<Ran> run_client(std::vector<std::string> argv, std::string input = {}) {
  using namespace std::chrono_literals;
  namespace process = shoal::process;
  process::Options opts;
  opts.in = process::Stdio::pipe;
  opts.out = process::Stdio::pipe;
  opts.err = process::Stdio::pipe;
  auto child = process::spawn(argv, opts);
  Ran ran;
  const bool finished = co_await shoal::move_on_after(60s, shoal::scope([&](shoal::Scope& s) -> Task<void> {
    s.spawn([&]() -> Task<void> {
      co_await child.in().write_all(input);
      child.in().close();
    });
    s.spawn([&]() -> Task<void> { ran.err = co_await read_to_end(child.err()); });
    ran.out = co_await read_to_end(child.out());
  }));
  if (!finished) {
    child.kill(9);
    ADD_FAILURE() << argv[0] << " did not finish within 60 s; stdout so far: " << ran.out;
  }
  ran.status = co_await child.wait();
  co_return ran;
}

/// Debian's interpreter, the one its python3-* packages install into (a
/// python3 earlier on PATH, pyenv's say, does not see them).
inline constexpr const char* kDebianPython = "/usr/bin/python3";

/// True if kDebianPython can import `module` (a Debian python3-* package).
/// If not, as have().
inline Task<bool> have_python_module(std::string module) {
  if (::access(kDebianPython, X_OK) != 0) {
    missing(kDebianPython);
    co_return false;
  }
  const std::vector<std::string> argv{kDebianPython, "-c", "import " + module};
  const Ran r = co_await run_client(argv);
  if (r.status.success()) co_return true;
  missing("the Python module " + module);
  co_return false;
}

}  // namespace shoal::test
