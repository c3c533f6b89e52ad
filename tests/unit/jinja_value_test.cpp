// Jinja values and text helpers against Python's own behaviour: float
// repr, str repr quoting, json.dumps string escapes, str.strip's notion of
// whitespace, UTF-8 handling (invalid bytes pass through unchanged), and
// dict lookups both below and above the size where dicts get an index.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>

#include "core/json_text.h"
#include "template/jinja_interp.h"
#include "template/jinja_text.h"

namespace {

using namespace rf::jinja;

TEST(JinjaText, FloatReprMatchesPython) {
  // Expected strings are Python 3's repr(float).
  const std::pair<double, const char*> cases[] = {
      {1.0, "1.0"}, {0.1, "0.1"}, {-2.5, "-2.5"}, {100.0, "100.0"}, {1e15, "1000000000000000.0"},
      {1e16, "1e+16"}, {1.5e-5, "1.5e-05"}, {0.0001, "0.0001"}, {0.1 + 0.2, "0.30000000000000004"},
      {123456789012345678.0, "1.2345678901234568e+17"}, {1e100, "1e+100"}, {-0.0, "-0.0"}, {0.0, "0.0"},
      {5e-324, "5e-324"}, {1.7976931348623157e308, "1.7976931348623157e+308"}, {2.0 / 3.0, "0.6666666666666666"},
      {std::numeric_limits<double>::infinity(), "inf"}, {-std::numeric_limits<double>::infinity(), "-inf"},
      {std::nan(""), "nan"}};
  for (const auto& [value, expected] : cases) EXPECT_EQ(float_repr(value), expected) << expected;
}

TEST(JinjaText, ReprQuotesLikePython) {
  auto repr = [](std::string_view s) {
    std::string out;
    append_py_repr(out, s);
    return out;
  };
  EXPECT_EQ(repr("abc"), "'abc'");
  EXPECT_EQ(repr("it's"), "\"it's\"");
  EXPECT_EQ(repr("say \"x\""), "'say \"x\"'");
  EXPECT_EQ(repr("both ' and \""), "'both \\' and \"'");
  EXPECT_EQ(repr("a\nb\tc\\"), "'a\\nb\\tc\\\\'");
  EXPECT_EQ(repr(std::string("\x01\x7f", 2)), "'\\x01\\x7f'");
  EXPECT_EQ(repr("\xc2\xa0\xe2\x80\x8b"), "'\\xa0\\u200b'");  // NBSP, zero-width space
  EXPECT_EQ(repr("日本 é 🦙"), "'日本 é 🦙'");
}

TEST(JinjaText, JsonStringsLikeJsonDumps) {
  auto json = [](std::string_view s, bool ascii) {
    std::string out;
    rf::append_json_string(out, s, rf::JsonStringOptions::python(ascii));
    return out;
  };
  EXPECT_EQ(json("a\"b\\c\n\r\t\b\f", false), "\"a\\\"b\\\\c\\n\\r\\t\\b\\f\"");
  EXPECT_EQ(json(std::string("\x01\x1f\x7f", 3), false), "\"\\u0001\\u001f\x7f\"");
  EXPECT_EQ(json("é🦙</script>", false), "\"é🦙</script>\"");
  EXPECT_EQ(json("é🦙", true), "\"\\u00e9\\ud83e\\udd99\"");
}

TEST(JinjaText, StripUsesPythonWhitespace) {
  EXPECT_EQ(py_strip(" \t\n\r\x0b\x0cx\x1c\x1d\x1e\x1f ", nullptr, true, true), "x");
  EXPECT_EQ(py_strip("\xc2\xa0\xe3\x80\x80x\xe2\x80\x83\xc2\x85", nullptr, true, true), "x");  // NBSP, ideographic, em space, NEL
  EXPECT_EQ(py_strip("\xe2\x80\x8bx", nullptr, true, true), "\xe2\x80\x8bx");  // zero-width space is not whitespace
  const std::string chars = "xé";
  EXPECT_EQ(py_strip("éxaéx", &chars, true, true), "a");
  EXPECT_EQ(py_strip("  a  ", nullptr, true, false), "a  ");
  EXPECT_EQ(py_strip("  a  ", nullptr, false, true), "  a");
}

TEST(JinjaText, InvalidUtf8PassesThrough) {
  const std::string bad = "a\xff\xc3(b\xe2\x82";
  EXPECT_EQ(utf8_length(bad), 7u);
  std::string round;
  for (size_t p = 0; p < bad.size();) rf::utf8::append_escaped(round, rf::utf8::next_escaped(bad, p));
  EXPECT_EQ(round, bad);
  Template t("{{ s|upper }}|{{ s|length }}|{{ s[::-1]|length }}|{{ s|trim }}|{{ s|tojson|length }}");
  EXPECT_EQ(t.render(nlohmann::ordered_json{{"s", bad}}, {}), "A\xff\xc3(B\xe2\x82|7|7|" + bad + "|9");
}

TEST(JinjaValue, LargeDictsAreIndexed) {
  nlohmann::ordered_json big = nlohmann::ordered_json::object();
  for (int i = 0; i < 40; ++i) big[std::string(1, 'k').append(std::to_string(i))] = i;
  Template t(
      "{{ d.k0 }},{{ d.k8 }},{{ d['k9'] }},{{ d.k39 }},{{ d.missing is defined }},{{ 'k20' in d }},{{ d|length }}"
      "{% set d2 = dict(d) %}{% set _ = d2.update({'k5': 'x', 'new': 1}) %},{{ d2.k5 }},{{ d2.new }},{{ d2|length }}"
      ",{{ d2.pop('k0') }},{{ d2.k0 is defined }},{{ d2.k1 }},{{ d2|length }},{{ (d2.keys()|list)[:3] }}");
  EXPECT_EQ(t.render(nlohmann::ordered_json{{"d", big}}, {}),
            "0,8,9,39,False,True,40,x,1,41,0,False,1,40,['k1', 'k2', 'k3']");
}

TEST(JinjaValue, NumericKeysFollowPythonEquality) {
  Template t("{% set d = {1: 'a', 2.5: 'b', true: 'c', none: 'n'} %}{{ d[1] }}{{ d[1.0] }}{{ d[2.5] }}{{ d[none] }}{{ d|length }}");
  EXPECT_EQ(t.render(nlohmann::ordered_json::object(), {}), "cc" "bn3");
  EXPECT_THROW(Template("{{ {[1]: 2} }}").render(nlohmann::ordered_json::object(), {}), TemplateError);
}

TEST(JinjaValue, JsonInputTypes) {
  const auto ctx = nlohmann::ordered_json::parse(
      R"({"i": -7, "u": 18446744073709551615, "f": 2.0, "b": false, "n": null, "s": "x", "a": [1, [2]], "o": {"z": {}, "a": []}})");
  Template t("{{ i }} {{ u }} {{ f }} {{ b }} {{ n }} {{ s }} {{ a }} {{ o }} {{ o|tojson }} {{ i is integer }} {{ f is float }}");
  EXPECT_EQ(t.render(ctx, {}),
            "-7 1.8446744073709552e+19 2.0 False None x [1, [2]] {'z': {}, 'a': []} {\"z\": {}, \"a\": []} True True");
}

}  // namespace
