// Properties the HTTP/1.1 parser (examples/http) and net::Address::parse
// must hold for any input. Shared by the libFuzzer targets and the corpus
// replay test; a violation aborts with a message.
#pragma once

#include <cstddef>
#include <cstdint>

namespace shoal::fuzz {
void check_http_parser(const std::uint8_t* data, std::size_t size);
void check_address_parser(const std::uint8_t* data, std::size_t size);
}  // namespace shoal::fuzz
