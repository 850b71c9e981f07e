// The API-sequence fuzz program: bytes decode into channels and a tree of
// scoped tasks, run on the deterministic executor and checked against a model.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace shoal::fuzz {

/// Decodes `data` into a program, runs it and checks every result against
/// the reference model. Any byte string is a valid input. On a violation it
/// prints what went wrong and the decoded program, then aborts.
/// SHOAL_FUZZ_TRACE=1 in the environment prints every step.
void run_api_input(const std::uint8_t* data, std::size_t size);

/// The decoded program in readable form (for reproducers and corpus notes).
std::string describe_api_input(const std::uint8_t* data, std::size_t size);

}  // namespace shoal::fuzz
