#!/usr/bin/env bash
# Installs what shoal's build and tests need that a fresh machine may lack.
# Idempotent and quiet when everything is present. --aarch64 adds the
# cross build's tools.
set -euo pipefail
need=()
command -v cmake >/dev/null || need+=(cmake)
command -v ninja >/dev/null || need+=(ninja-build)
command -v g++ >/dev/null || need+=(g++)
command -v clang++ >/dev/null || need+=(clang)
command -v pkg-config >/dev/null || need+=(pkg-config)
[ -f /usr/include/gtest/gtest.h ] || need+=(libgtest-dev libgmock-dev)
[ -f /usr/include/benchmark/benchmark.h ] || need+=(libbenchmark-dev)
# OpenSSL for shoal::tls, and its command line for the TLS tests' certificates and peers.
[ -f /usr/include/openssl/ssl.h ] || need+=(libssl-dev)
command -v openssl >/dev/null || need+=(openssl)
# Real HTTP clients that drive shoal::http in tests/http/http_clients_test.cpp.
command -v curl >/dev/null || need+=(curl)
command -v ab >/dev/null || need+=(apache2-utils)
command -v python3 >/dev/null || need+=(python3)
# http-parser, the other side of the HTTP parser's differential fuzzer (tests/fuzz/http_diff_fuzz.cpp).
[ -f /usr/include/http_parser.h ] || need+=(libhttp-parser-dev)
# libnghttp2 (the HTTP/2 state machine and HPACK) for shoal::http2, its
# clients (nghttp, h2load) that drive it in tests/http2, and its server
# (nghttpd), which shoal's own client talks to there.
[ -f /usr/include/nghttp2/nghttp2.h ] || need+=(libnghttp2-dev)
command -v nghttp >/dev/null || need+=(nghttp2-client)
[ -x /usr/sbin/nghttpd ] || need+=(nghttp2-server)
# Python's h2 (hyper-h2), a third HTTP/2 client implementation for tests/http2.
# (Debian's interpreter: a python3 earlier on PATH does not see Debian's modules.)
/usr/bin/python3 -c 'import h2' 2>/dev/null || need+=(python3-h2)
# Relacy, the C++ memory-model checker of tests/relacy (header-only).
[ -f /usr/include/relacy/relacy.hpp ] || need+=(relacy-dev)
# --aarch64: the cross compiler and qemu-user for `cmake --preset aarch64`
# (cmake/aarch64-linux-gnu.cmake; GoogleTest is built from its sources).
if [ "${1:-}" = --aarch64 ]; then
  command -v aarch64-linux-gnu-g++ >/dev/null || need+=(g++-aarch64-linux-gnu)
  command -v qemu-aarch64 >/dev/null || need+=(qemu-user)
  [ -f /usr/src/googletest/CMakeLists.txt ] || need+=(googletest)
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
fi
