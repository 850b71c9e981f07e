#!/usr/bin/env bash
# Installs shoal and builds consumers against it: find_package(shoal)
# (shoal::shoal, shoal::testing, shoal::tls, shoal::http2) and pkg-config
# (shoal, shoal-tls, shoal-http2), then runs them.
#   scripts/check-install.sh [build dir]         into a scratch prefix (default build/release)
#   scripts/check-install.sh --deb [build dir]   the Debian package: CPack builds it, dpkg
#                                                installs it into /usr (root), the consumers
#                                                find it with no search path, dpkg removes it
# It also checks that the package asks for C++20 without forcing it: the
# pkg-config consumer builds at -std=c++20 and at a later standard, and a
# build at -std=c++17 stops with shoal's own message. For a shared build
# (-DBUILD_SHARED_LIBS=ON) it checks the soname, that the consumers load the
# installed libshoal.so, and that the library exports shoal's own symbols only.
set -euo pipefail
cd "$(dirname "$0")/.."
deb=0
if [[ ${1:-} == --deb ]]; then deb=1; shift; fi
build=${1:-build/release}
work=$(mktemp -d)
cleanup() {
  if ((deb)) && dpkg -s libshoal-dev >/dev/null 2>&1; then dpkg -r libshoal-dev >/dev/null; fi
  rm -rf "$work"
}
trap cleanup EXIT

if ((deb)); then
  [[ $(id -u) == 0 ]] || { echo "check-install --deb: installing a package needs root" >&2; exit 1; }
  if dpkg -s libshoal-dev >/dev/null 2>&1; then
    echo "check-install --deb: libshoal-dev is already installed; remove it first (dpkg -r libshoal-dev)" >&2
    exit 1
  fi
  (cd "$build" && cpack -G DEB -B "$work/deb" >/dev/null)
  package=$(ls "$work"/deb/libshoal-dev_*.deb)
  echo "built $(basename "$package"): $(dpkg-deb -f "$package" Version), depends: $(dpkg-deb -f "$package" Depends)"
  dpkg -i "$package" >/dev/null
  libdir=/usr/$(dpkg -L libshoal-dev | sed -n 's|^/usr/\(.*\)/libshoal\.[as].*|\1|p' | head -1)
  find_args=(-DCMAKE_CXX_STANDARD=23)  # a consumer on a later standard than shoal's minimum
else
  prefix=$work/prefix
  cmake --install "$build" --prefix "$prefix" >/dev/null
  libdir=$(dirname "$(find "$prefix" -name 'libshoal.*' | head -1)")
  find_args=(-DCMAKE_PREFIX_PATH="$prefix")
  export PKG_CONFIG_PATH=$libdir/pkgconfig
fi

cmake -S tests/install -B "$work/consumer" -G Ninja "${find_args[@]}" >/dev/null
cmake --build "$work/consumer" >/dev/null
run() { LD_LIBRARY_PATH=$libdir "$@"; }
run "$work/consumer/consumer"
run "$work/consumer/testing_consumer"
run "$work/consumer/tls_consumer"
run "$work/consumer/http2_consumer"
# Only the tls component needs OpenSSL, and only http2 libnghttp2 (through
# pkg-config): a consumer that asks for neither configures without them.
cmake -S tests/install -B "$work/consumer_no_tls" -G Ninja "${find_args[@]}" -DWITH_TLS=OFF \
  -DCMAKE_DISABLE_FIND_PACKAGE_OpenSSL=ON -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON >"$work/no_tls.txt" 2>&1 ||
  { echo "check-install: a consumer without COMPONENTS tls failed without OpenSSL:" >&2; cat "$work/no_tls.txt" >&2; exit 1; }
cmake --build "$work/consumer_no_tls" >/dev/null
run "$work/consumer_no_tls/consumer"
echo "a consumer without COMPONENTS tls http2 configures and runs without OpenSSL and pkg-config"

for std in c++20 c++2b; do
  g++ -std=$std tests/install/main.cpp -o "$work/pc_consumer" $(pkg-config --cflags --libs shoal)
  run "$work/pc_consumer"
done
g++ -std=c++20 tests/install/tls_main.cpp -o "$work/pc_tls_consumer" $(pkg-config --cflags --libs shoal-tls)
run "$work/pc_tls_consumer"
g++ -std=c++20 tests/install/http2_main.cpp -o "$work/pc_http2_consumer" $(pkg-config --cflags --libs shoal-http2)
run "$work/pc_http2_consumer"
if g++ -std=c++17 -fsyntax-only tests/install/main.cpp $(pkg-config --cflags shoal) >"$work/cxx17.txt" 2>&1 ||
    ! grep -q "shoal needs C++20 or later" "$work/cxx17.txt"; then
  echo "check-install: a -std=c++17 build did not stop with shoal's C++20 message:" >&2
  head -5 "$work/cxx17.txt" >&2
  exit 1
fi
echo "a -std=c++17 consumer stops with: $(grep -o 'shoal needs C++20[^"]*' "$work/cxx17.txt" | head -1)"

if [[ -e $libdir/libshoal.so ]] && ! [[ -e $libdir/libshoal.a ]]; then
  soname=$(readelf -d "$libdir/libshoal.so" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
  [[ $soname == libshoal.so.[0-9]*.[0-9]* ]] || { echo "check-install: libshoal.so's soname is '$soname', not libshoal.so.MAJOR.MINOR" >&2; exit 1; }
  run ldd "$work/consumer/consumer" | grep -q "$libdir/$soname" ||
    { echo "check-install: the consumer does not load the installed $soname" >&2; run ldd "$work/consumer/consumer" >&2; exit 1; }
  for lib in libshoal.so libshoal_tls.so libshoal_http2.so; do
    # shoal's own: its namespace, and any C symbol it prefixes
    foreign=$(nm -D --defined-only -C "$libdir/$lib" | awk '{ $1=""; $2=""; print }' | grep -v 'shoal::' |
      grep -vE '^ *shoal_[a-z_]+$' || true)
    [[ -z $foreign ]] || { echo "check-install: $lib exports symbols that are not shoal's:" >&2; echo "$foreign" | head >&2; exit 1; }
  done
  echo "installed shared libshoal: soname $soname, $(nm -D --defined-only "$libdir/libshoal.so" | wc -l) symbols exported, all shoal's"
fi
