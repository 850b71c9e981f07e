// libFuzzer target: net::Address::parse.
#include "parser_checks.hpp"

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, unsigned long size) {
  shoal::fuzz::check_address_parser(data, size);
  return 0;
}
