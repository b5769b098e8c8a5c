// io::parse_json_text: JSON from outside, with its nesting bounded and every nlohmann error as one type.
#include <gtest/gtest.h>

#include <string>

#include "io/json_text.h"

namespace {

using mpverify::io::JsonTextError;
using mpverify::io::parse_json_text;
using mpverify::io::try_parse_json_text;

std::string nested(std::size_t depth) { return std::string(depth, '[') + "1" + std::string(depth, ']'); }

TEST(JsonText, NestingUpToTheLimitParsesOneDeeperIsRefused) {
  EXPECT_EQ(parse_json_text(nested(64)).dump(), nested(64));
  try {
    parse_json_text(nested(65));
    ADD_FAILURE() << "no error";
  } catch (const JsonTextError& e) {
    EXPECT_EQ(e.byte(), 64u);  // the 65th '[' is at byte 64
    EXPECT_NE(std::string(e.what()).find("nested deeper than 64 levels"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(parse_json_text(nested(3), 3));
  EXPECT_THROW(parse_json_text(nested(4), 3), JsonTextError);
  // Objects count as arrays do.
  EXPECT_THROW(parse_json_text(R"({"a":{"b":{"c":1}}})", 2), JsonTextError);
}

TEST(JsonText, BracketsInsideStringsAreText) {
  // 100 brackets inside a string, an escaped quote before them, and an escaped backslash that ends one.
  const std::string text = R"({"k":"\"[[)" + std::string(100, '[') + R"(\\","m":[1]})";
  const auto j = parse_json_text(text, 2);
  EXPECT_EQ(j.at("m").at(0), 1);
  EXPECT_EQ(j.at("k").get<std::string>().size(), 1u + 2u + 100u + 1u);
}

TEST(JsonText, EveryParserErrorIsAJsonTextError) {
  try {
    parse_json_text(R"({"a": [1, 2,)");
    ADD_FAILURE() << "no error";
  } catch (const JsonTextError& e) {
    EXPECT_EQ(e.byte(), 12u);  // the end of the text, where a value was expected
  }
  // nlohmann raises out_of_range (not parse_error) for a number beyond double's range.
  EXPECT_THROW(parse_json_text(R"({"x": 1e999})"), JsonTextError);
  std::string why;
  EXPECT_FALSE(try_parse_json_text("[1e999]", &why).has_value());
  EXPECT_NE(why.find("1e999"), std::string::npos) << why;
  EXPECT_EQ(try_parse_json_text("[1e300]")->at(0).get<double>(), 1e300);
}

}  // namespace
