// Test certificates for the TLS suites (a CA, a server certificate for
// localhost and 127.0.0.1, an expired one), made once per process with the
// openssl command line (scripts/install-deps.sh installs it).
#pragma once

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

#include <gtest/gtest.h>

namespace shoal::test {

/// The test certificates, made once per process.
struct Certs {
  std::string dir, ca, cert, key, expired;
};

inline const Certs& certs() {
  static const Certs c = [] {
    Certs k;
    char tmpl[] = "/tmp/shoal-tls-XXXXXX";
    k.dir = ::mkdtemp(tmpl);
    // Removed at exit: ctest runs each test in its own process, so one directory per test otherwise.
    static const struct RemoveAtExit {
      std::string dir;
      ~RemoveAtExit() {
        std::error_code ignored;
        std::filesystem::remove_all(dir, ignored);
      }
    } remove_at_exit{k.dir};
    k.ca = k.dir + "/ca.pem";
    k.cert = k.dir + "/server.pem";
    k.key = k.dir + "/server.key";
    k.expired = k.dir + "/expired.pem";
    const std::string script =
        "set -e; cd " + k.dir +
        "; ec='-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes'"
        "; openssl req -x509 $ec -days 2 -subj /CN=shoal-test-ca -keyout ca.key -out ca.pem"
        "; openssl req $ec -subj /CN=localhost -keyout server.key -out server.csr"
        "; printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > san"
        "; openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile san -out server.pem"
        "; openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days -1 -extfile san -out expired.pem";
    if (std::system(("(" + script + ") >" + k.dir + "/openssl.log 2>&1").c_str()) != 0) {
      ADD_FAILURE() << "making the test certificates with the openssl command line failed; see " << k.dir
                    << "/openssl.log (bash scripts/install-deps.sh installs openssl)";
    }
    return k;
  }();
  return c;
}

}  // namespace shoal::test
