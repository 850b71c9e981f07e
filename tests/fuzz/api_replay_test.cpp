// Replays every checked-in API fuzz input (tests/fuzz/corpus/api) through the
// fuzzer's own program runner, so regressions are caught without libFuzzer.
// A violation aborts with a message; the file being replayed is printed first.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz/api_program.hpp"

namespace {

namespace fs = std::filesystem;

std::vector<fs::path> corpus_files() {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(SHOAL_FUZZ_CORPUS_DIR)) {
    if (e.is_regular_file()) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST(ApiFuzzCorpus, EveryInputReplaysWithoutAViolation) {
  const std::vector<fs::path> files = corpus_files();
  ASSERT_FALSE(files.empty()) << "no inputs in " << SHOAL_FUZZ_CORPUS_DIR;
  for (const fs::path& f : files) {
    std::ifstream in(f, std::ios::binary);
    const std::vector<char> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    std::fprintf(stderr, "replaying %s\n", f.filename().c_str());
    shoal::fuzz::run_api_input(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  }
}

}  // namespace
