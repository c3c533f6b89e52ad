// Jinja failure modes: syntax errors name their line, unknown filters and
// tests fail at parse time, runtime errors (undefined values, type errors,
// raise_exception) carry their kind, resource limits stop runaway templates,
// and no input — however malformed — crashes or hangs the interpreter.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <random>
#include <string>

#include "template/jinja_interp.h"

namespace {

using rf::jinja::Limits;
using rf::jinja::RenderOptions;
using rf::jinja::Template;
using rf::jinja::TemplateError;
using Kind = TemplateError::Kind;

// Parses and renders; returns the error (or fails the test if none).
TemplateError render_error(const std::string& source, const nlohmann::ordered_json& context = nlohmann::ordered_json::object(),
                           const RenderOptions& options = {}) {
  try {
    Template t(source, options.limits);
    const std::string out = t.render(context.is_null() ? nlohmann::ordered_json::object() : context, options);
    ADD_FAILURE() << "no error for: " << source << "\noutput: " << out.substr(0, 200);
  } catch (const TemplateError& e) {
    return e;
  }
  return TemplateError(Kind::Runtime, "none");
}

TEST(JinjaErrors, SyntaxErrorsNameTheLine) {
  struct Case {
    const char* source;
    int line;
    const char* fragment;
  };
  const Case cases[] = {
      {"{% if %}", 1, "expected an expression"},
      {"a\nb\n{{ 1 + }}", 3, "unexpected end of print statement"},
      {"{% for x in [1] %}\n\n{% endif %}", 3, "endif"},
      {"{% if true %}\nnever closed\n", 2, "'endif' to close the block opened at line 1"},
      {"line\n{{ 'unterminated }}", 2, "unterminated string"},
      {"{#\n\n comment never ends", 1, "comment"},
      {"{% raw %}\nno end", 1, "raw"},
      {"\n\n\n{{ x | nosuchfilter }}", 4, "no filter named 'nosuchfilter'"},
      {"\n{{ x is nosuchtest }}", 2, "no test named 'nosuchtest'"},
      {"{% include 'other.jinja' %}", 1, "unknown or unsupported tag 'include'"},
      {"{% break %}", 1, "outside of a loop"},
      {"{{ [1, 2 }}", 1, "unexpected '}'"},
      {"{{ (1 }}", 1, "expected ')'"},
      {"{{ 1 ? 2 }}", 1, "unexpected character '?'"},
      {"{% macro m(1) %}{% endmacro %}", 1, "expected a name"},
      {"{% set %}", 1, "expected a name"},
      {"{% for x in xs recursive %}{% endfor %}", 1, "recursive"},
      {"{{ 99999999999999999999 }}", 1, "too large"},
      {"{{ '\\x4' }}", 1, "escape"},
      {"{% endfor %}", 1, "endfor"},
      {"{{ x is defined is none }}", 1, ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.source);
    try {
      Template t(c.source);
      ADD_FAILURE() << "parsed without error";
    } catch (const TemplateError& e) {
      EXPECT_EQ(e.kind(), Kind::Syntax) << e.what();
      EXPECT_EQ(e.line(), c.line) << e.what();
      EXPECT_NE(e.message().find(c.fragment), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("line " + std::to_string(c.line)), std::string::npos) << e.what();
    }
  }
}

TEST(JinjaErrors, RuntimeErrors) {
  struct Case {
    const char* source;
    const char* fragment;
  };
  const Case cases[] = {
      {"{{ x.y }}", "'x' is undefined"},
      {"{{ x['k'] }}", "'x' is undefined"},
      {"{{ x() }}", "'x' is undefined"},
      {"{{ x + 1 }}", "'x' is undefined"},
      {"{{ 'a' + 1 }}", "unsupported operand type(s) for +: 'str' and 'int'"},
      {"{{ 1 < 'a' }}", "'<' not supported"},
      {"{{ 1 / 0 }}", "division by zero"},
      {"{{ 5 // 0 }}", "division or modulo by zero"},
      {"{{ 'abc'() }}", "'str' object is not callable"},
      {"{{ 5|length }}", "has no len()"},
      {"{% for x in 5 %}{% endfor %}", "not iterable"},
      {"{% for a, b in [[1, 2, 3]] %}{% endfor %}", "too many values to unpack"},
      {"{{ x|tojson }}", "not JSON serializable"},
      {"{% set n = 1 %}{% set n.a = 2 %}", "non-namespace"},
      {"{{ 'x'.nomethod() }}", "'nomethod' is undefined"},
      {"{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", "takes not more than 1 argument"},
      {"{% macro m(a) %}{% endmacro %}{{ m(b=2) }}", "no keyword argument 'b'"},
      {"{{ 9223372036854775807 + 1 }}", "overflow"},
      {"{{ range(1, 2, 0) }}", "must not be zero"},
      {"{{ [1]|map('nosuch')|list }}", "no filter named 'nosuch'"},
      {"{{ [1]|select('nosuch')|list }}", "no test named 'nosuch'"},
      {"{{ '{0}'.format() }}", "out of range"},
      {"{{ '%d' % 'x' }}", "a number is required"},
      {"\n\n{{ {}|first + 1 }}", "undefined"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.source);
    const TemplateError e = render_error(c.source);
    EXPECT_EQ(e.kind(), Kind::Runtime) << e.what();
    EXPECT_NE(e.message().find(c.fragment), std::string::npos) << e.what();
    EXPECT_GT(e.line(), 0) << e.what();
  }
  EXPECT_EQ(render_error("\n\n{{ {}|first + 1 }}").line(), 3);
}

TEST(JinjaErrors, RaiseException) {
  const TemplateError e = render_error("ok {% if true %}{{ raise_exception('Bad role: ' ~ role) }}{% endif %}",
                                       {{"role", "tool"}});
  EXPECT_EQ(e.kind(), Kind::Raised);
  EXPECT_EQ(e.message(), "Bad role: tool");
  EXPECT_NE(std::string(e.what()).find("Bad role: tool"), std::string::npos);
}

TEST(JinjaErrors, StepLimitStopsHugeLoops) {
  // The default budget (10 M steps) stops a 10^10-iteration loop quickly.
  EXPECT_EQ(render_error("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}").kind(),
            Kind::Limit);
  RenderOptions small;
  small.limits.max_steps = 1'000'000;
  for (const char* source : {"{% macro f(n) %}{% for i in range(100000) %}{{ f(1) if n == 0 }}{% endfor %}{% endmacro %}{{ f(0) }}",
                             "{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = ns.l + [i] %}{% endfor %}",
                             "{{ [0] * 1000000000 }}"}) {
    SCOPED_TRACE(source);
    EXPECT_EQ(render_error(source, {}, small).kind(), Kind::Limit);
  }
  // range() refuses sizes beyond the sandbox's limit outright.
  EXPECT_NE(render_error("{% for i in range(10**9) %}{% endfor %}").message().find("range"), std::string::npos);
}

TEST(JinjaErrors, OutputAndStringLimits) {
  RenderOptions small;
  small.limits.max_output_bytes = 1000;
  EXPECT_EQ(render_error("{% for i in range(2000) %}x{% endfor %}", {}, small).kind(), Kind::Limit);
  EXPECT_EQ(render_error("{{ 'x' * 5000 }}", {}, small).kind(), Kind::Limit);
  EXPECT_EQ(render_error("{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}").kind(),
            Kind::Limit);
  EXPECT_EQ(render_error("{{ ('x' * 1000000)|center(100000000) }}").kind(), Kind::Limit);
  EXPECT_EQ(render_error("{{ 'ab'.replace('', 'x' * 100000) * 1 }}", {}, small).kind(), Kind::Limit);
}

TEST(JinjaErrors, NestingLimits) {
  const int n = 5000;
  for (const std::string& source :
       {"{{ " + std::string(n, '(') + "1" + std::string(n, ')') + " }}",
        "{{ " + std::string(n, '[') + "1" + std::string(n, ']') + " }}",
        "{{ " + std::string(n, '-') + "1 }}",
        [&] { std::string s = "{{ 1"; for (int i = 0; i < n; ++i) s += " + 1"; return s + " }}"; }(),
        [&] { std::string s = "{{ x"; for (int i = 0; i < n; ++i) s += ".a"; return s + " }}"; }(),
        [&] { std::string s = "{{ x"; for (int i = 0; i < n; ++i) s += "|trim"; return s + " }}"; }(),
        [&] { std::string s; for (int i = 0; i < n; ++i) s += "{% if true %}"; return s; }()}) {
    SCOPED_TRACE(source.substr(0, 40));
    EXPECT_EQ(render_error(source).kind(), Kind::Syntax);
  }
  // Runaway recursion and self-containing values are errors, not stack overflows.
  EXPECT_EQ(render_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}").kind(), Kind::Limit);
  EXPECT_EQ(render_error("{% set l = [] %}{{ l.append(l) }}{{ l }}").kind(), Kind::Limit);
  EXPECT_EQ(render_error("{% set l = [] %}{{ l.append(l) }}{{ l|tojson }}").kind(), Kind::Limit);
  // Deep JSON input is refused rather than recursed into without bound.
  nlohmann::ordered_json deep = 1;
  for (int i = 0; i < 1000; ++i) deep = nlohmann::ordered_json::array({deep});
  EXPECT_EQ(render_error("{{ x }}", {{"x", deep}}).kind(), Kind::Limit);
}

// Mutated real-world-style templates: any outcome but a crash or a hang.
TEST(JinjaErrors, MutatedTemplatesNeverCrash) {
  const std::string base =
      "{{ bos_token }}{% set ns = namespace(sys='', n=0) %}{% for m in messages %}"
      "{%- if m.role == 'system' %}{% set ns.sys = m.content|trim %}{% continue %}{% endif -%}\n"
      "  {% if (m.role == 'user') != (ns.n % 2 == 0) %}{{ raise_exception('alternate') }}{% endif %}\n"
      "{{ '<|' ~ m.role ~ '|>\\n' + (m.content if m.content is string else m.content|map(attribute='text')|join) }}"
      "{% set ns.n = ns.n + 1 %}{% if loop.last and add_generation_prompt %}<|assistant|>{% endif %}{% endfor %}"
      "{# comment #}{% macro t(x, y=2) -%} {{ x|tojson(indent=2) }}{{ y }} {%- endmacro %}{{ t(messages[0]) }}"
      "{{ messages[1:]|selectattr('role', 'equalto', 'user')|list|length }}{% raw %}{{ raw }}{% endraw %}";
  const auto context = nlohmann::ordered_json::parse(R"({"bos_token": "<s>", "add_generation_prompt": true,
      "messages": [{"role": "system", "content": " S "}, {"role": "user", "content": [{"type": "text", "text": "hi"}]},
                   {"role": "assistant", "content": "yo"}]})");
  RenderOptions options;
  options.limits.max_steps = 200000;
  {
    Template t(base);
    EXPECT_FALSE(t.render(context, options).empty());
  }
  const std::string alphabet = "{}%#-+|.,:()[]'\"\\ \n=<>!~*/abcdefgijklmnoprstuvxyz0123456789_";
  std::mt19937 rng(12345);
  int parsed = 0, rendered = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string s = base;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < edits; ++k) {
      const size_t pos = rng() % (s.size() + 1);
      switch (rng() % 4) {
        case 0: s.insert(pos, 1, alphabet[rng() % alphabet.size()]); break;
        case 1: if (pos < s.size()) s.erase(pos, 1 + rng() % 8); break;
        case 2: if (pos < s.size()) s[pos] = alphabet[rng() % alphabet.size()]; break;
        default: s.insert(pos, s.substr(rng() % s.size(), rng() % 24)); break;
      }
    }
    try {
      Template t(s, options.limits);
      ++parsed;
      t.render(context, options);
      ++rendered;
    } catch (const rf::Error&) {
    }
  }
  EXPECT_GT(parsed, 100);
  EXPECT_GT(rendered, 50);
}

}  // namespace
