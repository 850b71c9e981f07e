#!/usr/bin/env bash
# Installs build/release into a scratch prefix, then builds a consumer with
# find_package(shoal) (shoal::shoal, shoal::testing, shoal::tls) and others
# with pkg-config (shoal, shoal-tls), and runs them.
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install build/release --prefix "$prefix" >/dev/null
cmake -S tests/install -B "$prefix/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$prefix/consumer" >/dev/null
"$prefix/consumer/consumer"
"$prefix/consumer/testing_consumer"
"$prefix/consumer/tls_consumer"
PKG_CONFIG_PATH="$prefix/lib/pkgconfig" g++ tests/install/main.cpp -o "$prefix/pc_consumer" \
  $(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs shoal)
"$prefix/pc_consumer"
PKG_CONFIG_PATH="$prefix/lib/pkgconfig" g++ tests/install/tls_main.cpp -o "$prefix/pc_tls_consumer" \
  $(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs shoal-tls)
"$prefix/pc_tls_consumer"
