// String formatting as Python does it: str.format() with its format-spec
// mini-language ([[fill]align][sign][#][0][width][,][.precision][type]) and
// the printf-style "fmt % args" operator (also the `format` filter).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "template/jinja_builtins.h"
#include "template/jinja_interp.h"
#include "template/jinja_text.h"

namespace rf::jinja {

namespace {

// Leading decimal digits of s, saturating (format widths and precisions).
size_t leading_number(const std::string& s) {
  size_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') break;
    v = std::min<size_t>(v * 10 + static_cast<size_t>(c - '0'), size_t(1) << 40);
  }
  return v;
}

// Python's format(value, spec): [[fill]align][sign][#][0][width][,|_][.precision][type].
std::string format_spec(Renderer& r, const Value& v, const std::string& spec) {
  size_t k = 0;
  std::string fill = " ";
  char align = 0;
  auto is_align = [](char c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  size_t first_len = 0;
  if (!spec.empty()) {
    size_t p = 0;
    utf8::next_escaped(spec, p);
    first_len = p;
  }
  if (first_len && first_len < spec.size() && is_align(spec[first_len])) {
    fill = spec.substr(0, first_len);
    align = spec[first_len];
    k = first_len + 1;
  } else if (!spec.empty() && is_align(spec[0])) {
    align = spec[0];
    k = 1;
  }
  char sign = '-';
  if (k < spec.size() && (spec[k] == '+' || spec[k] == '-' || spec[k] == ' ')) sign = spec[k++];
  const bool alt = k < spec.size() && spec[k] == '#' ? (++k, true) : false;
  if (k < spec.size() && spec[k] == '0') {
    if (!align) fill = "0", align = '=';
    ++k;
  }
  size_t width = 0;
  while (k < spec.size() && spec[k] >= '0' && spec[k] <= '9') width = std::min<size_t>(width * 10 + static_cast<size_t>(spec[k++] - '0'), 1u << 20);
  char group = 0;
  if (k < spec.size() && (spec[k] == ',' || spec[k] == '_')) group = spec[k++];
  int precision = -1;
  if (k < spec.size() && spec[k] == '.') {
    precision = 0;
    ++k;
    while (k < spec.size() && spec[k] >= '0' && spec[k] <= '9') precision = std::min(precision * 10 + (spec[k++] - '0'), 100);
  }
  char type = k < spec.size() ? spec[k++] : 0;
  if (k != spec.size()) runtime_error(str("invalid format specifier '", spec, "'"));

  std::string body, prefix;
  bool numeric = false;
  if (v.is_string() || (!v.is_number() && (type == 0 || type == 's'))) {
    if (type != 0 && type != 's') runtime_error(str("unknown format code '", type, "' for a string"));
    body = r.to_str(v);
    if (precision >= 0) {
      const std::vector<size_t> offs = utf8_offsets(body);
      if (static_cast<size_t>(precision) + 1 < offs.size()) body.resize(offs[static_cast<size_t>(precision)]);
    }
  } else if (v.is_number()) {
    numeric = true;
    const bool is_int = v.is_int() && (v.kind != Kind::Bool || type != 0);
    if (type == 0 && v.kind == Kind::Bool) {
      body = v.b ? "True" : "False";
      numeric = false;
    } else if (is_int && (type == 0 || type == 'd' || type == 'x' || type == 'X' || type == 'o' || type == 'b')) {
      const int64_t i = v.as_int();
      uint64_t u = i < 0 ? 0 - static_cast<uint64_t>(i) : static_cast<uint64_t>(i);
      const int base = type == 'x' || type == 'X' ? 16 : type == 'o' ? 8 : type == 'b' ? 2 : 10;
      const char* digits = type == 'X' ? "0123456789ABCDEF" : "0123456789abcdef";
      do { body.insert(body.begin(), digits[u % static_cast<uint64_t>(base)]); u /= static_cast<uint64_t>(base); } while (u);
      if (alt && base != 10) prefix = base == 16 ? (type == 'X' ? "0X" : "0x") : base == 8 ? "0o" : "0b";
      if (i < 0) prefix.insert(0, "-");
    } else {
      if (type == 'd' || type == 'x' || type == 'X' || type == 'o' || type == 'b')
        runtime_error(str("unknown format code '", type, "' for a float"));
      double d = v.as_double();
      const bool pct = type == '%';
      if (pct) d *= 100;
      char buf[512];
      if (type == 0 && precision < 0) {
        std::string rep = float_repr(std::fabs(d));
        body = rep;
      } else {
        const char conv = type == 0 ? 'g' : pct ? 'f' : type;
        if (std::string_view("fFeEgG").find(conv) == std::string_view::npos) runtime_error(str("unknown format code '", type, "'"));
        std::snprintf(buf, sizeof buf, (std::string("%") + (alt ? "#" : "") + ".*" + conv).c_str(), precision < 0 ? 6 : precision, std::fabs(d));
        body = buf;
        if (pct) body += '%';
      }
      if (std::signbit(d) && !std::isnan(d)) prefix = "-";
    }
    if (group) {
      const size_t dot = body.find_first_not_of("0123456789");
      const size_t int_end = dot == std::string::npos ? body.size() : dot;
      std::string grouped;
      for (size_t i = 0; i < int_end; ++i) {
        if (i > 0 && (int_end - i) % 3 == 0) grouped.push_back(group);
        grouped.push_back(body[i]);
      }
      body = grouped + body.substr(int_end);
    }
    if (prefix.empty() || prefix[0] != '-') {
      if (sign == '+') prefix.insert(0, "+");
      else if (sign == ' ') prefix.insert(0, " ");
    }
  } else {
    runtime_error(str("unsupported format string passed to ", type_name(v), ".__format__"));
  }
  if (!align) align = numeric ? '>' : '<';
  const size_t len = utf8_length(prefix) + utf8_length(body);
  if (len >= width) return prefix + body;
  const size_t pad = width - len;
  auto fills = [&](size_t n) {
    std::string out;
    for (size_t i = 0; i < n; ++i) out += fill;
    return out;
  };
  switch (align) {
    case '<': return prefix + body + fills(pad);
    case '^': return fills(pad / 2) + prefix + body + fills(pad - pad / 2);
    case '=': return prefix + fills(pad) + body;
    default: return fills(pad) + prefix + body;
  }
}

// str.format: {} {0} {name} with an optional !conversion and :spec; {{ and }} escape braces.
Value format_string_impl(Renderer& r, const std::string& fmt, const CallArgs& a) {
  std::string out;
  size_t auto_index = 0;
  for (size_t k = 0; k < fmt.size(); ++k) {
    const char c = fmt[k];
    if (c == '}' ) {
      if (k + 1 < fmt.size() && fmt[k + 1] == '}') ++k;
      else runtime_error("single '}' encountered in format string");
      out.push_back('}');
      continue;
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    if (k + 1 < fmt.size() && fmt[k + 1] == '{') {
      out.push_back('{');
      ++k;
      continue;
    }
    const size_t close = fmt.find('}', k);
    if (close == std::string::npos) runtime_error("single '{' encountered in format string");
    std::string field = fmt.substr(k + 1, close - k - 1);
    std::string spec;
    if (const size_t colon = field.find(':'); colon != std::string::npos) spec = field.substr(colon + 1), field.resize(colon);
    char conversion = 0;
    if (const size_t bang = field.find('!'); bang != std::string::npos) {
      conversion = bang + 1 < field.size() ? field[bang + 1] : 0;
      field.resize(bang);
    }
    Value v;
    if (field.empty()) {
      if (auto_index >= a.positional.size()) runtime_error("format(): not enough positional arguments");
      v = a.positional[auto_index++];
    } else if (std::all_of(field.begin(), field.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
      const size_t i = field.size() < 9 ? std::stoul(field) : SIZE_MAX;
      if (i >= a.positional.size()) runtime_error("format(): positional argument index out of range");
      v = a.positional[i];
    } else {
      const Value* kv = a.find(SIZE_MAX, field);
      if (!kv) runtime_error(str("format(): missing keyword argument '", field, "'"));
      v = *kv;
    }
    if (conversion == 'r') {
      std::string rep;
      append_repr(rep, v, r.max_string());
      v = r.make_string(std::move(rep));
    } else if (conversion == 's') {
      v = r.make_string(r.to_str(v));
    }
    if (spec.empty()) append_str(out, v, r.max_string());
    else out += format_spec(r, v, spec);
    r.budget().check_string_size(out.size());
    k = close;
  }
  return r.make_string(std::move(out));
}

}  // namespace

Value format_string(Renderer& r, const std::string& fmt, const CallArgs& args) {
  return format_string_impl(r, fmt, args);
}

Value Renderer::percent_format(const std::string& fmt, const Value& args) {
  std::vector<Value> values;
  const DictObj* mapping = nullptr;
  if (args.is_list() && args.list->is_tuple) values = args.list->items;
  else if (args.is_dict() && args.dict->kind == DictKind::Plain) mapping = args.dict;
  else values.push_back(args);
  size_t next = 0;
  std::string out;
  for (size_t k = 0; k < fmt.size(); ++k) {
    if (fmt[k] != '%') {
      out.push_back(fmt[k]);
      continue;
    }
    if (++k >= fmt.size()) runtime_error("incomplete format");
    Value v;
    if (fmt[k] == '(') {  // %(name)s
      const size_t close = fmt.find(')', k);
      if (close == std::string::npos || !mapping) runtime_error("format requires a mapping");
      const Value* found = mapping->find(std::string_view(fmt).substr(k + 1, close - k - 1));
      if (!found) runtime_error(str("format key '", fmt.substr(k + 1, close - k - 1), "' not found"));
      v = *found;
      k = close + 1;
    }
    const size_t spec_start = k;
    while (k < fmt.size() && std::string_view("-+ #0123456789.").find(fmt[k]) != std::string_view::npos) ++k;
    if (k >= fmt.size()) runtime_error("incomplete format");
    const std::string spec = fmt.substr(spec_start, k - spec_start);
    const char conv = fmt[k];
    if (conv == '%') {
      out.push_back('%');
      continue;
    }
    if (v.is_undefined() && !mapping) {
      if (next >= values.size()) runtime_error("not enough arguments for format string");
      v = values[next++];
    }
    char buf[512];
    if (spec.size() > 20) runtime_error("format specification too long");
    switch (conv) {
      case 's':
      case 'r': {
        std::string text;
        if (conv == 's') append_str(text, v, max_string());
        else append_repr(text, v, max_string());
        const size_t dot = spec.find('.');
        const std::string flags_width = spec.substr(0, dot);
        const size_t digits = flags_width.find_first_of("123456789");
        const size_t width = digits == std::string::npos ? 0 : leading_number(flags_width.substr(digits));
        if (dot != std::string::npos) {
          const std::string prec = spec.substr(dot + 1);
          const size_t keep = leading_number(prec);
          const std::vector<size_t> offs = utf8_offsets(text);
          if (keep + 1 < offs.size()) text.resize(offs[keep]);
        }
        if (width > max_string()) runtime_error("format width too large");
        const size_t len = utf8_length(text);
        if (len < width) {
          if (spec.find('-') != std::string::npos) text.append(width - len, ' ');
          else text.insert(0, width - len, ' ');
        }
        out += text;
        break;
      }
      case 'd':
      case 'i':
      case 'x':
      case 'X':
      case 'o':
        if (!v.is_number()) runtime_error(str("%", conv, " format: a number is required, not ", type_name(v)));
        if (v.kind == Kind::Float && !(std::fabs(v.f) < 9.2e18)) runtime_error("number too large to format");
        std::snprintf(buf, sizeof buf, ("%" + spec + "ll" + (conv == 'i' ? 'd' : conv)).c_str(),
                      v.kind == Kind::Float ? static_cast<long long>(v.f) : static_cast<long long>(v.as_int()));
        out += buf;
        break;
      case 'f':
      case 'F':
      case 'e':
      case 'E':
      case 'g':
      case 'G':
        if (!v.is_number()) runtime_error(str("%", conv, " format: a real number is required, not ", type_name(v)));
        std::snprintf(buf, sizeof buf, ("%" + spec + conv).c_str(), v.as_double());
        out += buf;
        break;
      default: runtime_error(str("unsupported format character '", conv, "'"));
    }
    budget_.check_string_size(out.size());
  }
  if (!mapping && next < values.size()) runtime_error("not all arguments converted during string formatting");
  return make_string(std::move(out));
}

}  // namespace rf::jinja
