// libFuzzer entry for the API-sequence fuzzer (built by the `fuzz` preset).
// Any byte string is a program; see api_program.cpp for the decoding and the model.
#include <cstddef>
#include <cstdint>

#include "fuzz/api_program.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  shoal::fuzz::run_api_input(data, size);
  return 0;
}
