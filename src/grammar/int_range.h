// Integer ranges as grammar: a GBNF expression matching exactly the decimal
// integers in [lo, hi] written as JSON writes them (no leading zeros, no
// "+", no "-0"); either bound may be absent. Used by the JSON Schema
// converter for integer minimum / maximum / exclusiveMinimum /
// exclusiveMaximum.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace rf::grammar {

// Throws rf::Error when lo > hi (an empty range).
std::string int_range_gbnf(std::optional<int64_t> lo, std::optional<int64_t> hi);

}  // namespace rf::grammar
