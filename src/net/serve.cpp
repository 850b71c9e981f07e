// serve's default handler-fault report.
#include "shoal/net/serve.hpp"

#include <cstdio>
#include <system_error>

namespace shoal::detail {

void report_held_at_cap(const net::ServeOptions& o) noexcept {
  try {
    o.on_held_at_cap();
  } catch (...) {
    std::fputs("shoal::net::serve: on_held_at_cap threw; ignored\n", stderr);
  }
}

void report_handler_fault(const net::ServeOptions& o, std::exception_ptr e, const net::Address& peer) noexcept {
  if (o.on_handler_fault) {
    try {
      o.on_handler_fault(e, peer);
    } catch (...) {
      std::fputs("shoal::net::serve: on_handler_fault threw; ignored\n", stderr);
    }
    return;
  }
  char prefix[192];
  try {
    std::snprintf(prefix, sizeof prefix, "shoal::net::serve: handler for %s failed: ", peer.to_string().c_str());
  } catch (...) {  // out of memory for the address text: report without it
    std::snprintf(prefix, sizeof prefix, "shoal::net::serve: a handler failed: ");
  }
  print_fault(prefix, e);
}

void PeerLabel::write(const TaskDescriber& self, std::string& out) {
  out.assign("connection from ");  // appended: g++ 12 -O3 warns falsely on literal + string&& (-Wrestrict)
  out.append(static_cast<const PeerLabel&>(self).peer->address().to_string());
}

bool is_disconnect(const std::exception_ptr& e) noexcept {
  try {
    std::rethrow_exception(e);
  } catch (const std::system_error& err) {
    return err.code() == std::errc::connection_reset || err.code() == std::errc::broken_pipe;
  } catch (...) {
    return false;
  }
}

}  // namespace shoal::detail
