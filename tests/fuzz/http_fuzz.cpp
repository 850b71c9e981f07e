// libFuzzer target: the HTTP/1.1 request-head parser of examples/http.
#include "parser_checks.hpp"

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, unsigned long size) {
  shoal::fuzz::check_http_parser(data, size);
  return 0;
}
