// Builds against an installed shoal::tls: a client context from the system
// store, and a server context whose missing certificate is named.
#include <shoal/http/https.hpp>
#include <shoal/tls/tls.hpp>

#include <cstdio>
#include <string>

int main() {
  const auto client = shoal::tls::Context::client();
  try {
    shoal::tls::ServerOptions options;
    options.certificate_chain_file = "/nonexistent/cert.pem";
    options.private_key_file = "k";
    (void)shoal::tls::Context::server(options);
  } catch (const shoal::tls::Error& e) {
    const bool named = std::string(e.what()).find("/nonexistent/cert.pem") != std::string::npos;
    std::printf("installed shoal::tls works: %s\n", named ? "yes" : e.what());
    return client.native() != nullptr && named ? 0 : 1;
  }
  return 1;
}
