// The gateway's JSON: what it accepts as a message, how it finds the
// members routing needs, and how it reads strings.
#include "mcp_gateway/json.hpp"

#include <gtest/gtest.h>

#include "mcp_gateway/session.hpp"

namespace {

namespace json = mcp_gateway::json;

TEST(McpJson, AcceptsEveryKindOfValueWithSurroundingSpace) {
  for (const char* ok : {"{}", "[]", " {\"a\":[1,-2.5e+3,true,false,null,\"x\"]} ", "\"\\u00e9\\n\"", "0", "-0.0E1",
                         "{\"a\":{\"b\":{}}}", "\"h\xc3\xa9llo \xe2\x9c\x93\""}) {
    EXPECT_FALSE(json::validate(ok).has_value()) << ok;
  }
}

TEST(McpJson, RefusesWhatIsNotJsonNamingWhereAndWhy) {
  const auto e = json::validate(R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{)");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->offset, 56u);
  EXPECT_EQ(e->what, "a member name (a string) was expected");
  for (const char* bad : {"", "{", "[1,]", "{\"a\" 1}", "01", "1.", "tru", "\"\x01\"", "\"\\x\"", "{} {}", "'a'",
                          "\"\xc3\x28\"", "\"\xed\xa0\x80\"", "[1 2]"}) {
    EXPECT_TRUE(json::validate(bad).has_value()) << bad;
  }
}

TEST(McpJson, RefusesNestingPastTheLimit) {
  const std::string deep(100, '[');
  const auto e = json::validate(deep + std::string(100, ']'));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->what, "nested deeper than 64");
  EXPECT_FALSE(json::validate(std::string(64, '[') + std::string(64, ']')).has_value());
}

TEST(McpJson, FindsATopLevelMemberAsItsRawText) {
  const std::string_view m = R"({"params":{"id":9},"id":"a\"b","method":"tools/call","n":[1,{"x":2}]})";
  EXPECT_EQ(json::member(m, "id"), R"("a\"b")");
  EXPECT_EQ(json::member(m, "method"), R"("tools/call")");
  EXPECT_EQ(json::member(m, "n"), R"([1,{"x":2}])");
  EXPECT_EQ(json::member(*json::member(m, "params"), "id"), "9");
  EXPECT_FALSE(json::member(m, "result").has_value());
  EXPECT_FALSE(json::member("[1]", "id").has_value());
}

TEST(McpJson, ListsABatchsElements) {
  const auto e = json::elements(R"([ {"id":1} , {"id":2},3 ])");
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[0], R"({"id":1})");
  EXPECT_EQ(e[2], "3");
  EXPECT_TRUE(json::elements("[]").empty());
  EXPECT_TRUE(json::is_array(" [1]"));
  EXPECT_FALSE(json::is_array("{}"));
}

TEST(McpJson, DecodesStringsAndQuotesThemBack) {
  EXPECT_EQ(json::string_value(R"("a\"\\\/\n\u00e9\ud83d\ude00")"), "a\"\\/\n\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_EQ(json::string_value(R"("\ud800")"), "\xef\xbf\xbd") << "a lone surrogate";
  EXPECT_FALSE(json::string_value("7").has_value());
  EXPECT_EQ(json::quote("a\"b\\\n\x01"), R"("a\"b\\\n\u0001")");
}

TEST(McpMessage, ClassifiesRequestsNotificationsAndResponses) {
  const auto req = mcp_gateway::classify(R"({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"_meta":{"progressToken":3}}})");
  ASSERT_TRUE(req.has_value());
  EXPECT_TRUE(req->is_request());
  EXPECT_EQ(req->progress_token, "3");
  const auto note = mcp_gateway::classify(R"({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":3,"progress":1}})");
  ASSERT_TRUE(note.has_value());
  EXPECT_TRUE(note->is_notification());
  EXPECT_EQ(note->progress_token, "3");
  const auto res = mcp_gateway::classify(R"({"jsonrpc":"2.0","id":"x","result":{}})");
  ASSERT_TRUE(res.has_value());
  EXPECT_TRUE(res->is_response());
  EXPECT_FALSE(mcp_gateway::classify(R"({"jsonrpc":"2.0"})").has_value());
  EXPECT_FALSE(mcp_gateway::classify(R"({"method":7})").has_value());
  EXPECT_FALSE(mcp_gateway::classify("[]").has_value());
}

}  // namespace
