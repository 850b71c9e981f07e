#!/usr/bin/env bash
# Builds libkqueue (a user-space kqueue for Linux) from the pinned snapshot
# into build/libkqueue-prefix, for the kqueue preset. The snapshot is
# outside the repository (nothing can be downloaded here): by default
# ../shared/third_party/libkqueue beside the checkout, or $SHOAL_LIBKQUEUE_SRC.
# Idempotent: an existing install is kept.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
src=${SHOAL_LIBKQUEUE_SRC:-$root/../shared/third_party/libkqueue}
prefix=$root/build/libkqueue-prefix
if [ -f "$prefix/lib/libkqueue.a" ] && [ -f "$prefix/include/kqueue/sys/event.h" ]; then
  exit 0
fi
if [ ! -f "$src/CMakeLists.txt" ]; then
  echo "build-libkqueue.sh: no libkqueue source at $src (set SHOAL_LIBKQUEUE_SRC to the snapshot)" >&2
  exit 1
fi
mkdir -p "$root/build"
log=$root/build/libkqueue-build.log
{
  cmake -S "$src" -B "$root/build/libkqueue" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_POSITION_INDEPENDENT_CODE=ON &&
    cmake --build "$root/build/libkqueue" && cmake --install "$root/build/libkqueue"
} >"$log" 2>&1 || { cat "$log" >&2; echo "build-libkqueue.sh: the libkqueue build failed (log above)" >&2; exit 1; }
echo "libkqueue $(cat "$src/SNAPSHOT.md" 2>/dev/null | grep -o 'Commit: [0-9a-f]*' | head -1) installed in $prefix"
