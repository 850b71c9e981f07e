// Replays the checked-in HTTP and address fuzz corpora through the same
// property checks as the fuzz targets (every CI leg runs this).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "parser_checks.hpp"

namespace {

template <class Check>
int replay(const char* dir, Check check) {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    check(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
    ++n;
  }
  return n;
}

TEST(ParserCorpus, HttpInputsKeepTheParserProperties) {
  EXPECT_GT(replay(SHOAL_HTTP_CORPUS_DIR, shoal::fuzz::check_http_parser), 0);
}

TEST(ParserCorpus, AddressInputsKeepTheParserProperties) {
  EXPECT_GT(replay(SHOAL_ADDRESS_CORPUS_DIR, shoal::fuzz::check_address_parser), 0);
}

}  // namespace
