#!/usr/bin/env bash
# Installs a build tree into a scratch prefix, then builds consumers with
# find_package(shoal) (shoal::shoal, shoal::testing, shoal::tls) and with
# pkg-config (shoal, shoal-tls), and runs them.
#   scripts/check-install.sh [build dir]   (default build/release: the static library)
# For a shared build (-DBUILD_SHARED_LIBS=ON) it also checks the soname, that
# the consumers load the installed libshoal.so, and that the library exports
# shoal's own symbols only.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$prefix/lib
[[ -d $libdir ]] || libdir=$(dirname "$(find "$prefix" -name 'libshoal.*' | head -1)")
cmake -S tests/install -B "$prefix/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$prefix/consumer" >/dev/null
"$prefix/consumer/consumer"
"$prefix/consumer/testing_consumer"
"$prefix/consumer/tls_consumer"
export PKG_CONFIG_PATH=$libdir/pkgconfig
g++ tests/install/main.cpp -o "$prefix/pc_consumer" $(pkg-config --cflags --libs shoal)
g++ tests/install/tls_main.cpp -o "$prefix/pc_tls_consumer" $(pkg-config --cflags --libs shoal-tls)
LD_LIBRARY_PATH=$libdir "$prefix/pc_consumer"
LD_LIBRARY_PATH=$libdir "$prefix/pc_tls_consumer"

if [[ -e $libdir/libshoal.so ]] && ! [[ -e $libdir/libshoal.a ]]; then
  soname=$(readelf -d "$libdir/libshoal.so" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
  [[ $soname == libshoal.so.[0-9]*.[0-9]* ]] || { echo "check-install: libshoal.so's soname is '$soname', not libshoal.so.MAJOR.MINOR" >&2; exit 1; }
  ldd "$prefix/consumer/consumer" | grep -q "$libdir/$soname" ||
    { echo "check-install: the consumer does not load the installed $soname" >&2; ldd "$prefix/consumer/consumer" >&2; exit 1; }
  for lib in libshoal.so libshoal_tls.so; do
    foreign=$(nm -D --defined-only -C "$libdir/$lib" | awk '{ $1=""; $2=""; print }' | grep -v 'shoal::' || true)
    [[ -z $foreign ]] || { echo "check-install: $lib exports symbols that are not shoal's:" >&2; echo "$foreign" | head >&2; exit 1; }
  done
  echo "installed shared libshoal: soname $soname, $(nm -D --defined-only "$libdir/libshoal.so" | wc -l) symbols exported, all shoal's"
fi
