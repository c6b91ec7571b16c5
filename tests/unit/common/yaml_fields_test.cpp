// The strict YAML field readers: each value type, both spellings of booleans and durations, and
// errors that carry the dotted key, its line and the offending text.
#include "common/yaml_fields.h"

#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace vigil::yaml_fields {
namespace {

// The error a reader throws on the value of `key: text` (line 1 of its document).
ConfigKeyError error_of(const std::function<void(const YAML::Node&)>& read, const std::string& text) {
  YAML::Node doc = YAML::Load("key: " + text);
  try {
    read(doc["key"]);
  } catch (const ConfigKeyError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for '" << text << "'";
  return ConfigKeyError("", 0, "");
}

YAML::Node value(const std::string& text) { return YAML::Load("key: " + text)["key"]; }

TEST(YamlFields, Scalar) {
  EXPECT_EQ(scalar("k", value("hello")), "hello");
  auto e = error_of([](const YAML::Node& v) { scalar("a.b", v); }, "[1, 2]");
  EXPECT_EQ(e.key(), "a.b");
  EXPECT_EQ(e.line(), 1);
  EXPECT_STREQ(e.what(), "expected a scalar value");
}

TEST(YamlFields, IntegerIsWholeAndInRange) {
  EXPECT_EQ(integer("k", value("-7"), -10, 10), -7);
  EXPECT_EQ(integer("k", value("1099511627776"), 0, 1LL << 40), 1LL << 40);
  EXPECT_EQ(int_in("k", value("3"), 1, 3), 3);
  for (const char* bad : {"11", "1.5", "12abc", "abc", "\"\"", "99999999999999999999999"}) {
    auto e = error_of([](const YAML::Node& v) { integer("n", v, -10, 10); }, bad);
    EXPECT_EQ(e.key(), "n") << bad;
    EXPECT_NE(std::string(e.what()).find("expected an integer in [-10, 10], got '"), std::string::npos) << e.what();
  }
}

TEST(YamlFields, NumberIsFiniteAndInRange) {
  EXPECT_DOUBLE_EQ(number("k", value("2.5"), 0.0, 10.0), 2.5);
  for (const char* bad : {"-0.5", "10.5", "nan", "2.5x", "inf"}) {
    auto e = error_of([](const YAML::Node& v) { number("x", v, 0.0, 10.0); }, bad);
    EXPECT_NE(std::string(e.what()).find("expected a number in ["), std::string::npos) << bad;
  }
}

TEST(YamlFields, BooleanSpellings) {
  EXPECT_TRUE(boolean("k", value("true")));
  EXPECT_FALSE(boolean("k", value("false")));
  EXPECT_TRUE(boolean("k", value("yes"), BoolWords::kTrueFalseOnOffYesNo));
  EXPECT_TRUE(boolean("k", value("on"), BoolWords::kTrueFalseOnOffYesNo));
  EXPECT_FALSE(boolean("k", value("no"), BoolWords::kTrueFalseOnOffYesNo));
  EXPECT_FALSE(boolean("k", value("off"), BoolWords::kTrueFalseOnOffYesNo));
  auto e = error_of([](const YAML::Node& v) { boolean("b", v); }, "yes");
  EXPECT_STREQ(e.what(), "expected true or false, got 'yes'");
  e = error_of([](const YAML::Node& v) { boolean("b", v, BoolWords::kTrueFalseOnOffYesNo); }, "maybe");
  EXPECT_STREQ(e.what(), "expected true or false, got 'maybe'");
}

TEST(YamlFields, DurationUnits) {
  EXPECT_EQ(parse_duration("15", DurationUnits::kUpToMinutes).count(), 15000);
  EXPECT_EQ(parse_duration("15ms", DurationUnits::kUpToMinutes).count(), 15);
  EXPECT_EQ(parse_duration("2m", DurationUnits::kUpToMinutes).count(), 120000);
  EXPECT_EQ(parse_duration("2h", DurationUnits::kUpToHours).count(), 7200000);
  // The largest number of hours accepted still fits in milliseconds.
  EXPECT_EQ(parse_duration("999999999999h", DurationUnits::kUpToHours).count(), 999999999999LL * 3600000);
  EXPECT_THROW(parse_duration("2h", DurationUnits::kUpToMinutes), std::invalid_argument);
  EXPECT_THROW(parse_duration("1000000000000s", DurationUnits::kUpToHours), std::invalid_argument);
  EXPECT_THROW(parse_duration("ms", DurationUnits::kUpToHours), std::invalid_argument);
  EXPECT_THROW(parse_duration("-5s", DurationUnits::kUpToHours), std::invalid_argument);
}

TEST(YamlFields, DurationIsPositive) {
  EXPECT_EQ(duration("k", value("250ms")).count(), 250);
  auto e = error_of([](const YAML::Node& v) { duration("d", v); }, "0s");
  EXPECT_STREQ(e.what(), "must be positive, got '0s'");
  e = error_of([](const YAML::Node& v) { duration("d", v); }, "1h");
  EXPECT_STREQ(e.what(), "expected a duration like 500ms, 5s, 2m, got '1h'");
}

TEST(YamlFields, WalkDispatchesDottedKeysAndRejectsOthers) {
  YAML::Node doc = YAML::Load("outer:\n  a: 1\n  b: 2\n");
  std::vector<std::string> seen;
  walk("", doc, {{"outer", [&](const std::string& k, const YAML::Node& v) {
                    walk(k, v, {{"a", [&](const std::string& kk, const YAML::Node&) { seen.push_back(kk); }},
                                {"b", [&](const std::string& kk, const YAML::Node&) { seen.push_back(kk); }}});
                  }}});
  EXPECT_EQ(seen, (std::vector<std::string>{"outer.a", "outer.b"}));

  try {
    walk("", YAML::Load("outer:\n  a: 1\n  c: 3\n"),
         {{"outer", [&](const std::string& k, const YAML::Node& v) {
            walk(k, v, {{"a", [](const std::string&, const YAML::Node&) {}}});
          }}});
    FAIL() << "unknown key accepted";
  } catch (const ConfigKeyError& e) {
    EXPECT_EQ(e.key(), "outer.c");
    EXPECT_EQ(e.line(), 3);
    EXPECT_STREQ(e.what(), "unknown key");
  }
}

TEST(YamlFields, WalkNeedsAMapping) {
  try {
    walk("", YAML::Load("- a\n- b\n"), {});
    FAIL() << "a list accepted as a mapping";
  } catch (const ConfigKeyError& e) {
    EXPECT_EQ(e.key(), "<document>");
    EXPECT_STREQ(e.what(), "expected a mapping");
  }
}

TEST(YamlFields, WalkRejectsRepeatedAndNonStringKeys) {
  const std::map<std::string, Handler> handlers = {{"a", [](const std::string&, const YAML::Node&) {}}};
  try {
    walk("server", YAML::Load("a: 1\nb: 2\na: 3\n"), {{"a", handlers.at("a")}, {"b", handlers.at("a")}});
    FAIL() << "a repeated key silently overrode the first";
  } catch (const ConfigKeyError& e) {
    EXPECT_EQ(e.key(), "server.a");
    EXPECT_EQ(e.line(), 3);
    EXPECT_STREQ(e.what(), "duplicate key (first at line 1)");
  }
  try {
    walk("", YAML::Load("[a]: 1\n"), handlers);
    FAIL() << "a sequence accepted as a key";
  } catch (const ConfigKeyError& e) {
    EXPECT_EQ(e.key(), "<document>");
    EXPECT_EQ(e.line(), 1);
    EXPECT_STREQ(e.what(), "keys must be plain strings");
  }
}

TEST(YamlFields, LoadDocumentNamesTheSyntaxErrorLine) {
  try {
    load_document("a: 1\nb: [1, 2\n");
    FAIL() << "syntax error accepted";
  } catch (const ConfigKeyError& e) {
    EXPECT_EQ(e.key(), "<document>");
    EXPECT_GT(e.line(), 1);
    EXPECT_EQ(std::string(e.what()).rfind("YAML syntax error: ", 0), 0u) << e.what();
  }
}

TEST(YamlFields, UnreadableFileIsKeyFileLineZero) {
  try {
    read_config_file("/nonexistent/vigil.yaml");
    FAIL() << "missing file read";
  } catch (const ConfigKeyError& e) {
    EXPECT_EQ(e.key(), "file");
    EXPECT_EQ(e.line(), 0);
    EXPECT_STREQ(e.what(), "cannot read config file '/nonexistent/vigil.yaml'");
  }
}

}  // namespace
}  // namespace vigil::yaml_fields
