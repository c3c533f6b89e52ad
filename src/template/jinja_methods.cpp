// Methods that templates call on values (str.strip, dict.items, list.append,
// ...) with Python's semantics, the global functions (range, namespace,
// dict, raise_exception, strftime_now) and CallArgs.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>

#include "template/jinja_builtins.h"
#include "template/jinja_interp.h"
#include "template/jinja_text.h"

namespace rf::jinja {

// ---- CallArgs ----

const Value* CallArgs::find(size_t index, std::string_view name) const {
  if (index < positional.size()) return &positional[index];
  for (const auto& [k, v] : keyword)
    if (k == name) return &v;
  return nullptr;
}

Value CallArgs::get(size_t index, std::string_view name, Value fallback) const {
  const Value* v = find(index, name);
  return v ? *v : fallback;
}

void CallArgs::check(std::string_view what, size_t max_positional, std::initializer_list<std::string_view> names) const {
  if (positional.size() > max_positional)
    runtime_error(str(what, "() takes at most ", max_positional, " positional argument(s) (", positional.size(), " given)"));
  for (const auto& [k, v] : keyword)
    if (std::find(names.begin(), names.end(), k) == names.end())
      runtime_error(str(what, "() got an unexpected keyword argument '", k, "'"));
}

namespace {

constexpr std::string_view kStringMethods[] = {
    "capitalize", "center", "count", "endswith", "find", "format", "index", "isalnum", "isalpha", "isdigit",
    "islower", "isspace", "isupper", "join", "ljust", "lower", "lstrip", "partition", "removeprefix",
    "removesuffix", "replace", "rfind", "rjust", "rsplit", "rstrip", "split", "splitlines", "startswith",
    "strip", "swapcase", "title", "upper", "zfill", "casefold"};
constexpr std::string_view kDictMethods[] = {"get", "items", "keys", "values", "copy", "update", "pop", "setdefault"};
constexpr std::string_view kListMethods[] = {"append", "extend", "insert", "pop", "index", "count", "copy", "remove"};

template <size_t N>
bool in(const std::string_view (&names)[N], std::string_view name) {
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

const std::string& str_arg(const CallArgs& a, size_t i, std::string_view name, std::string_view method) {
  const Value* v = a.find(i, name);
  if (!v || !v->is_string()) runtime_error(str(method, "() argument '", name, "' must be a string"));
  return v->str();
}

Value list_of(Renderer& r, std::vector<Value> items) {
  ListObj* l = r.heap().make_list(items.size());
  l->items = std::move(items);
  return Value::of(l);
}

// Python str.split / rsplit.
Value split(Renderer& r, const std::string& s, const CallArgs& a, bool from_right) {
  const Value sep = a.get(0, "sep", Value::none());
  const Value maxv = a.get(1, "maxsplit", Value::integer(-1));
  int64_t maxsplit = maxv.is_int() ? maxv.as_int() : -1;
  std::vector<std::string> parts;
  if (sep.is_none() || sep.is_undefined()) {  // runs of whitespace; no empty parts
    std::vector<std::pair<size_t, size_t>> words;  // [begin, end) byte ranges
    size_t p = 0, start = std::string::npos;
    while (p < s.size()) {
      const size_t at = p;
      const bool space = py_isspace(utf8::next_escaped(s, p));
      if (!space && start == std::string::npos) start = at;
      if (space && start != std::string::npos) words.emplace_back(start, at), start = std::string::npos;
    }
    if (start != std::string::npos) words.emplace_back(start, s.size());
    if (maxsplit < 0 || static_cast<size_t>(maxsplit) >= words.size()) {
      for (auto [b, e] : words) parts.push_back(s.substr(b, e - b));
    } else if (!from_right) {
      for (int64_t k = 0; k < maxsplit; ++k) parts.push_back(s.substr(words[k].first, words[k].second - words[k].first));
      parts.push_back(py_strip(s.substr(words[static_cast<size_t>(maxsplit)].first), nullptr, false, true));
    } else {
      const size_t first_kept = words.size() - static_cast<size_t>(maxsplit);
      parts.push_back(py_strip(s.substr(0, words[first_kept - 1].second), nullptr, true, false));
      for (size_t k = first_kept; k < words.size(); ++k) parts.push_back(s.substr(words[k].first, words[k].second - words[k].first));
    }
  } else {
    if (!sep.is_string()) runtime_error("split() separator must be a string");
    const std::string& d = sep.str();
    if (d.empty()) runtime_error("empty separator");
    if (!from_right) {
      size_t start = 0;
      while (maxsplit-- != 0) {
        const size_t hit = s.find(d, start);
        if (hit == std::string::npos) break;
        parts.push_back(s.substr(start, hit - start));
        start = hit + d.size();
      }
      parts.push_back(s.substr(start));
    } else {
      size_t end = s.size();
      std::vector<std::string> rev;
      while (maxsplit-- != 0 && end >= d.size()) {
        const size_t hit = s.rfind(d, end - d.size());
        if (hit == std::string::npos) break;
        rev.push_back(s.substr(hit + d.size(), end - hit - d.size()));
        end = hit;
      }
      rev.push_back(s.substr(0, end));
      parts.assign(rev.rbegin(), rev.rend());
    }
  }
  std::vector<Value> out;
  out.reserve(parts.size());
  for (auto& p : parts) out.push_back(r.make_string(std::move(p)));
  return list_of(r, std::move(out));
}

bool affix_match(Renderer& r, const std::string& s, const Value& affix, bool at_start) {
  auto one = [&](const Value& v) {
    if (!v.is_string()) runtime_error("startswith/endswith need a string or a tuple of strings");
    const std::string& x = v.str();
    if (x.size() > s.size()) return false;
    return at_start ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  if (affix.is_list()) {
    for (const Value& v : affix.list->items)
      if (one(v)) return true;
    return false;
  }
  return one(affix);
}

Value pad(Renderer& r, const std::string& s, const CallArgs& a, char how) {
  const Value w = a.get(0, "width");
  if (!w.is_int()) runtime_error("width must be an integer");
  const Value fill_v = a.get(1, "fillchar", Value::undefined());
  const std::string fill = fill_v.is_string() ? fill_v.str() : " ";
  const auto len = static_cast<int64_t>(utf8_length(s));
  const int64_t width = w.as_int();
  if (width <= len) return r.make_string(s);
  r.budget().check_string_size(static_cast<size_t>(width) * fill.size());
  const int64_t total = width - len;
  int64_t left = how == 'l' ? 0 : how == 'r' ? total : total / 2 + (total & width & 1);
  std::string out;
  for (int64_t k = 0; k < left; ++k) out += fill;
  out += s;
  for (int64_t k = 0; k < total - left; ++k) out += fill;
  return r.make_string(std::move(out));
}

Value string_method(Renderer& r, const Value& self, std::string_view m, const CallArgs& a) {
  const std::string& s = self.str();
  auto chars = [&]() -> const std::string* {
    const Value* c = a.find(0, "chars");
    return c && c->is_string() ? &c->str() : nullptr;
  };
  if (m == "strip") return r.make_string(py_strip(s, chars(), true, true));
  if (m == "lstrip") return r.make_string(py_strip(s, chars(), true, false));
  if (m == "rstrip") return r.make_string(py_strip(s, chars(), false, true));
  if (m == "upper") return r.make_string(py_upper(s));
  if (m == "lower" || m == "casefold") return r.make_string(py_lower(s));
  if (m == "title") return r.make_string(py_title(s));
  if (m == "capitalize") return r.make_string(py_capitalize(s));
  if (m == "swapcase") {
    std::string out;
    for (size_t p = 0; p < s.size();) {
      const uint32_t cp = utf8::next_escaped(s, p);
      utf8::append_escaped(out, cp_upper(cp) != cp ? cp_upper(cp) : cp_lower(cp));
    }
    return r.make_string(std::move(out));
  }
  if (m == "split" || m == "rsplit") return split(r, s, a, m == "rsplit");
  if (m == "splitlines") {
    std::vector<Value> out;
    size_t start = 0;
    for (size_t k = 0; k < s.size(); ++k) {
      if (s[k] == '\n' || s[k] == '\r') {
        out.push_back(r.make_string(s.substr(start, k - start)));
        if (s[k] == '\r' && k + 1 < s.size() && s[k + 1] == '\n') ++k;
        start = k + 1;
      }
    }
    if (start < s.size()) out.push_back(r.make_string(s.substr(start)));
    return list_of(r, std::move(out));
  }
  if (m == "startswith" || m == "endswith") return Value::boolean(affix_match(r, s, a.get(0, "prefix"), m == "startswith"));
  if (m == "replace") {
    const std::string& from = str_arg(a, 0, "old", m);
    const std::string& to = str_arg(a, 1, "new", m);
    const Value count_v = a.get(2, "count", Value::integer(-1));
    int64_t count = count_v.is_int() ? count_v.as_int() : -1;
    std::string out;
    if (from.empty()) {  // inserts `to` around every character
      size_t p = 0;
      while (p <= s.size()) {
        if (count-- != 0) out += to;
        else { out.append(s, p, std::string::npos); break; }
        if (p == s.size()) break;
        const size_t start = p;
        utf8::next_escaped(s, p);
        out.append(s, start, p - start);
        r.budget().check_string_size(out.size());
      }
      return r.make_string(std::move(out));
    }
    size_t start = 0;
    while (count-- != 0) {
      const size_t hit = s.find(from, start);
      if (hit == std::string::npos) break;
      out.append(s, start, hit - start);
      out += to;
      start = hit + from.size();
      r.budget().check_string_size(out.size());
    }
    out.append(s, start, std::string::npos);
    return r.make_string(std::move(out));
  }
  if (m == "find" || m == "rfind" || m == "index" || m == "rindex" || m == "count") {
    const std::string& sub = str_arg(a, 0, "sub", m);
    if (m == "count") {
      if (sub.empty()) return Value::integer(static_cast<int64_t>(utf8_length(s)) + 1);
      int64_t n = 0;
      for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
      return Value::integer(n);
    }
    const size_t hit = (m == "find" || m == "index") ? s.find(sub) : s.rfind(sub);
    if (hit == std::string::npos) {
      if (m == "index" || m == "rindex") runtime_error("substring not found");
      return Value::integer(-1);
    }
    return Value::integer(static_cast<int64_t>(utf8_length(std::string_view(s).substr(0, hit))));
  }
  if (m == "join") {
    std::string out;
    bool first = true;
    for (const Value& item : r.iterate(a.get(0, "iterable"))) {
      if (!item.is_string()) runtime_error(str("sequence item: expected str instance, ", type_name(item), " found"));
      if (!first) out += s;
      first = false;
      out += item.str();
      r.budget().check_string_size(out.size());
    }
    return r.make_string(std::move(out));
  }
  if (m == "format") return format_string(r, s, a);
  auto all_cps = [&](auto pred) {
    if (s.empty()) return false;
    for (size_t p = 0; p < s.size();)
      if (!pred(utf8::next_escaped(s, p))) return false;
    return true;
  };
  if (m == "isdigit") return Value::boolean(all_cps(cp_is_digit));
  if (m == "isalpha") return Value::boolean(all_cps(cp_is_alpha));
  if (m == "isalnum") return Value::boolean(all_cps([](uint32_t c) { return cp_is_alpha(c) || cp_is_digit(c); }));
  if (m == "isspace") return Value::boolean(all_cps(py_isspace));
  if (m == "islower") return Value::boolean(py_lower(s) == s && py_upper(s) != s);
  if (m == "isupper") return Value::boolean(py_upper(s) == s && py_lower(s) != s);
  if (m == "center") return pad(r, s, a, 'c');
  if (m == "ljust") return pad(r, s, a, 'l');
  if (m == "rjust") return pad(r, s, a, 'r');
  if (m == "zfill") {
    const Value w = a.get(0, "width");
    if (!w.is_int()) runtime_error("zfill() width must be an integer");
    const auto len = static_cast<int64_t>(utf8_length(s));
    if (w.as_int() <= len) return r.make_string(s);
    r.budget().check_string_size(static_cast<size_t>(w.as_int()));
    const size_t sign = (!s.empty() && (s[0] == '+' || s[0] == '-')) ? 1 : 0;
    return r.make_string(s.substr(0, sign) + std::string(static_cast<size_t>(w.as_int() - len), '0') + s.substr(sign));
  }
  if (m == "partition") {
    const std::string& sep = str_arg(a, 0, "sep", m);
    const size_t hit = sep.empty() ? std::string::npos : s.find(sep);
    if (sep.empty()) runtime_error("empty separator");
    if (hit == std::string::npos) return r.heap().make_tuple({self, r.make_string(""), r.make_string("")});
    return r.heap().make_tuple({r.make_string(s.substr(0, hit)), r.make_string(sep), r.make_string(s.substr(hit + sep.size()))});
  }
  if (m == "removeprefix" || m == "removesuffix") {
    const std::string& x = str_arg(a, 0, "prefix", m);
    if (m == "removeprefix" && s.compare(0, x.size(), x) == 0) return r.make_string(s.substr(x.size()));
    if (m == "removesuffix" && !x.empty() && s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0)
      return r.make_string(s.substr(0, s.size() - x.size()));
    return self;
  }
  runtime_error(str("'str' object has no method '", m, "'"));
}

Value dict_method(Renderer& r, const Value& self, std::string_view m, const CallArgs& a) {
  DictObj& d = *self.dict;
  if (m == "get") {
    const Value* v = d.find(a.get(0, "key"));
    return v ? *v : a.get(1, "default", Value::none());
  }
  if (m == "items" || m == "keys" || m == "values") {
    std::vector<Value> out;
    out.reserve(d.entries.size());
    for (const auto& [k, v] : d.entries)
      out.push_back(m == "items" ? r.heap().make_tuple({k, v}) : m == "keys" ? k : v);
    Value view = list_of(r, std::move(out));
    view.list->seq = m == "items" ? SeqKind::ItemsView : m == "keys" ? SeqKind::KeysView : SeqKind::ValuesView;
    return view;
  }
  if (m == "copy") {
    DictObj* c = r.heap().make_dict();
    r.budget().charge(d.entries.size());
    for (const auto& [k, v] : d.entries) c->set(k, v);
    return Value::of(c);
  }
  if (m == "update") {
    const Value other = a.get(0, "other", Value::undefined());
    if (other.is_dict())
      for (const auto& [k, v] : other.dict->entries) d.set(k, v);
    for (const auto& [k, v] : a.keyword) d.set(r.make_string(std::string(k)), v);
    return Value::none();
  }
  if (m == "setdefault") {
    const Value key = a.get(0, "key");
    if (const Value* v = d.find(key)) return *v;
    d.set(key, a.get(1, "default", Value::none()));
    return *d.find(key);
  }
  if (m == "pop") {
    const Value key = a.get(0, "key");
    for (size_t k = 0; k < d.entries.size(); ++k) {
      if (!equals(d.entries[k].first, key)) continue;
      const Value v = d.entries[k].second;
      std::vector<std::pair<Value, Value>> rest = std::move(d.entries);
      rest.erase(rest.begin() + static_cast<long>(k));
      d = DictObj();
      for (const auto& [kk, vv] : rest) d.set(kk, vv);
      return v;
    }
    if (const Value* fallback = a.find(1, "default")) return *fallback;
    runtime_error("dict.pop(): key not found");
  }
  runtime_error(str("'dict' object has no method '", m, "'"));
}

Value list_method(Renderer& r, const Value& self, std::string_view m, const CallArgs& a) {
  ListObj& l = *self.list;
  if (m == "index" || m == "count") {
    const Value x = a.get(0, "value");
    int64_t n = 0;
    for (size_t k = 0; k < l.items.size(); ++k) {
      if (!equals(l.items[k], x)) continue;
      if (m == "index") return Value::integer(static_cast<int64_t>(k));
      ++n;
    }
    if (m == "index") runtime_error("list.index(x): x not in list");
    return Value::integer(n);
  }
  if (m == "copy") return list_of(r, l.items);
  if (l.is_tuple) runtime_error(str("'tuple' object has no method '", m, "'"));
  if (m == "append") {
    r.budget().charge(1);
    l.items.push_back(a.get(0, "object"));
    return Value::none();
  }
  if (m == "extend") {
    for (const Value& v : r.iterate(a.get(0, "iterable"))) l.items.push_back(v);
    return Value::none();
  }
  if (m == "insert") {
    const Value i = a.get(0, "index");
    if (!i.is_int()) runtime_error("list.insert() index must be an integer");
    const auto n = static_cast<int64_t>(l.items.size());
    int64_t at = i.as_int() < 0 ? std::max<int64_t>(0, i.as_int() + n) : std::min(i.as_int(), n);
    r.budget().charge(1);
    l.items.insert(l.items.begin() + at, a.get(1, "object"));
    return Value::none();
  }
  if (m == "pop") {
    if (l.items.empty()) runtime_error("pop from empty list");
    const auto n = static_cast<int64_t>(l.items.size());
    const Value index = a.get(0, "index", Value::integer(-1));
    if (!index.is_int()) runtime_error("list.pop() index must be an integer");
    int64_t i = index.as_int();
    if (i < 0) i += n;
    if (i < 0 || i >= n) runtime_error("pop index out of range");
    const Value v = l.items[static_cast<size_t>(i)];
    l.items.erase(l.items.begin() + i);
    return v;
  }
  if (m == "remove") {
    for (size_t k = 0; k < l.items.size(); ++k)
      if (equals(l.items[k], a.get(0, "value"))) {
        l.items.erase(l.items.begin() + static_cast<long>(k));
        return Value::none();
      }
    runtime_error("list.remove(x): x not in list");
  }
  runtime_error(str("'list' object has no method '", m, "'"));
}

// ---- globals ----

std::tm render_time(const RenderOptions& options) {
  std::tm tm{};
  if (!options.date) {
    const std::time_t now = std::time(nullptr);
    localtime_r(&now, &tm);
    return tm;
  }
  const std::string& d = *options.date;
  int y = 0, mo = 0, day = 0;
  char tail = 0;
  if (d.size() != 10 || std::sscanf(d.c_str(), "%4d-%2d-%2d%c", &y, &mo, &day, &tail) != 3 || d[4] != '-' || d[7] != '-')
    runtime_error(str("invalid date '", d, "' (expected YYYY-MM-DD)"));
  const std::chrono::year_month_day ymd{std::chrono::year(y), std::chrono::month(static_cast<unsigned>(mo)),
                                        std::chrono::day(static_cast<unsigned>(day))};
  if (!ymd.ok()) runtime_error(str("invalid date '", d, "'"));
  const std::chrono::sys_days days{ymd};
  const std::chrono::year_month_day jan1{ymd.year(), std::chrono::January, std::chrono::day(1)};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = day;
  tm.tm_wday = static_cast<int>(std::chrono::weekday(days).c_encoding());
  tm.tm_yday = static_cast<int>((days - std::chrono::sys_days{jan1}).count());
  tm.tm_isdst = 0;
  return tm;
}

Value range_of(Renderer& r, const CallArgs& a) {
  std::vector<int64_t> nums;
  for (const Value& v : a.positional) {
    if (!v.is_int()) runtime_error(str("range() arguments must be integers, not ", type_name(v)));
    nums.push_back(v.as_int());
  }
  if (nums.empty() || nums.size() > 3) runtime_error("range() takes 1 to 3 arguments");
  const int64_t start = nums.size() == 1 ? 0 : nums[0];
  const int64_t stop = nums.size() == 1 ? nums[0] : nums[1];
  const int64_t step = nums.size() == 3 ? nums[2] : 1;
  if (step == 0) runtime_error("range() arg 3 must not be zero");
  const __int128 span = step > 0 ? static_cast<__int128>(stop) - start : static_cast<__int128>(start) - stop;
  const __int128 count = span <= 0 ? 0 : (span + (step > 0 ? step : -static_cast<__int128>(step)) - 1) / (step > 0 ? step : -static_cast<__int128>(step));
  constexpr int64_t kMaxRange = 100000;  // as Jinja2's sandbox (MAX_RANGE)
  if (count > kMaxRange) runtime_error(str("range too big: the sandbox allows at most ", kMaxRange, " items"));
  ListObj* l = r.heap().make_list(static_cast<size_t>(count));
  for (int64_t k = 0; k < static_cast<int64_t>(count); ++k) l->items.push_back(Value::integer(start + k * step));
  return Value::of(l);
}

Value dict_from_args(Renderer& r, const CallArgs& a, DictKind kind) {
  DictObj* d = r.heap().make_dict(kind);
  if (!a.positional.empty()) {
    const Value& init = a.positional[0];
    if (init.is_dict()) {
      for (const auto& [k, v] : init.dict->entries) d->set(k, v);
    } else {
      for (const Value& pair : r.iterate(init)) {
        if (!pair.is_list() || pair.list->items.size() != 2) runtime_error("dict() needs pairs of key and value");
        d->set(pair.list->items[0], pair.list->items[1]);
      }
    }
  }
  for (const auto& [k, v] : a.keyword) d->set(r.make_string(std::string(k)), v);
  return Value::of(d);
}

}  // namespace

bool has_method(const Value& self, std::string_view name) {
  switch (self.kind) {
    case Kind::String: return in(kStringMethods, name);
    case Kind::List: return self.list->seq == SeqKind::List && in(kListMethods, name);
    case Kind::Dict: return self.dict->kind == DictKind::Plain && in(kDictMethods, name);
    default: return false;
  }
}

Value call_method(Renderer& r, const Value& self, std::string_view name, const CallArgs& args) {
  r.budget().charge(1);
  switch (self.kind) {
    case Kind::String: return string_method(r, self, name, args);
    case Kind::List: return list_method(r, self, name, args);
    case Kind::Dict: return dict_method(r, self, name, args);
    default: runtime_error(str("'", type_name(self), "' object has no method '", name, "'"));
  }
}

const std::vector<std::string_view>& global_function_names() {
  static const std::vector<std::string_view> names = {"range", "namespace", "dict", "raise_exception", "strftime_now"};
  return names;
}

Value call_global(Renderer& r, std::string_view name, const CallArgs& a) {
  if (name == "range") return range_of(r, a);
  if (name == "namespace") return dict_from_args(r, a, DictKind::Namespace);
  if (name == "dict") return dict_from_args(r, a, DictKind::Plain);
  if (name == "raise_exception") {
    const Value msg = a.get(0, "message", Value::undefined());
    throw TemplateError(TemplateError::Kind::Raised, r.to_str(msg));
  }
  if (name == "strftime_now") {
    const Value fmt = a.get(0, "format", Value::undefined());
    if (!fmt.is_string()) runtime_error("strftime_now() needs a format string");
    if (fmt.str().size() > 1024) runtime_error("strftime_now() format too long");
    const std::tm tm = render_time(r.options());
    std::string buf(fmt.str().size() * 32 + 64, '\0');
    const size_t n = fmt.str().empty() ? 0 : std::strftime(buf.data(), buf.size(), fmt.str().c_str(), &tm);
    buf.resize(n);
    return r.make_string(std::move(buf));
  }
  runtime_error(str("unknown function '", name, "'"));
}

}  // namespace rf::jinja
