// Integer ranges as grammar (see int_range.h). Non-negative ranges split by
// digit count; within one digit count the range [x, y] splits on the first
// digit where they differ (x's tail up to 9s, the digits between with any
// tail, y's tail from 0s). Negative ranges are "-" and the range of their
// magnitudes.
#include "grammar/int_range.h"

#include <vector>

#include "core/error.h"

namespace rf::grammar {
namespace {

std::string digits_class(char a, char b) { return a == b ? str("\"", a, "\"") : str("[", a, "-", b, "]"); }

std::string any_digits(size_t n) { return n == 0 ? "" : n == 1 ? "[0-9]" : str("[0-9]{", n, "}"); }

std::string seq(const std::string& a, const std::string& b) { return a.empty() ? b : b.empty() ? a : a + " " + b; }

// Strings of digits of one length from x to y (x <= y, equal lengths).
std::string same_length(const std::string& x, const std::string& y) {
  if (x.empty()) return "";
  if (x[0] == y[0]) return seq(digits_class(x[0], x[0]), same_length(x.substr(1), y.substr(1)));
  const size_t rest = x.size() - 1;
  const std::string nines(rest, '9'), zeros(rest, '0');
  if (x.substr(1) == zeros && y.substr(1) == nines) return seq(digits_class(x[0], y[0]), any_digits(rest));
  std::vector<std::string> alts;
  alts.push_back(seq(digits_class(x[0], x[0]), same_length(x.substr(1), nines)));
  if (x[0] + 1 <= y[0] - 1) alts.push_back(seq(digits_class(char(x[0] + 1), char(y[0] - 1)), any_digits(rest)));
  alts.push_back(seq(digits_class(y[0], y[0]), same_length(zeros, y.substr(1))));
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

// Naturals in [a, b] (b absent: unbounded), as alternatives.
void naturals(uint64_t a, std::optional<uint64_t> b, std::vector<std::string>& alts) {
  const std::string sa = std::to_string(a);
  const size_t la = sa.size(), lb = b ? std::to_string(*b).size() : la;
  for (size_t len = la; len <= lb; ++len) {
    const std::string lo = len == la ? sa : "1" + std::string(len - 1, '0');
    std::string hi = std::string(len, '9');
    if (b && len == lb) hi = std::to_string(*b);
    alts.push_back(same_length(lo, hi));
  }
  if (!b) alts.push_back(str("[1-9] [0-9]{", la, ",}"));  // every longer number
}

}  // namespace

std::string int_range_gbnf(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  if (lo && hi && *lo > *hi) fail("integer range is empty: minimum ", *lo, " > maximum ", *hi);
  std::vector<std::string> alts;
  // Negative part: "-" and magnitudes in [max(1, -hi), -lo].
  if (!lo || *lo < 0) {
    const uint64_t mag_lo = hi && *hi < 0 ? uint64_t(-(*hi + 1)) + 1 : 1;
    std::optional<uint64_t> mag_hi;
    if (lo) mag_hi = uint64_t(-(*lo + 1)) + 1;  // -lo without overflow at INT64_MIN
    std::vector<std::string> mags;
    naturals(mag_lo, mag_hi, mags);
    std::string m = mags.size() == 1 ? mags[0] : "(";
    if (mags.size() > 1)
      for (size_t i = 0; i < mags.size(); ++i) m += (i ? " | " : "") + mags[i] + (i + 1 == mags.size() ? ")" : "");
    alts.push_back("\"-\" " + m);
  }
  // Non-negative part: [max(0, lo), hi].
  if (!hi || *hi >= 0) naturals(lo && *lo > 0 ? uint64_t(*lo) : 0, hi ? std::optional<uint64_t>(uint64_t(*hi)) : std::nullopt, alts);
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

}  // namespace rf::grammar
