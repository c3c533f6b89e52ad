// A stable merge sort for template values that stays memory-safe whatever
// the comparison does (inconsistent orders, NaN, exceptions), unlike
// std::sort; each comparison is charged to the render's budget. `reverse`
// flips the order but keeps equal elements in their original order, as
// Python's sorted(reverse=True) does.
#pragma once

#include <vector>

#include "template/jinja_interp.h"

namespace rf::jinja {

template <typename Less>
void stable_sort_values(Renderer& r, std::vector<Value>& items, Less less, bool reverse) {
  const size_t n = items.size();
  std::vector<Value> buf(n);
  for (size_t width = 1; width < n; width *= 2) {
    for (size_t lo = 0; lo < n; lo += 2 * width) {
      const size_t mid = std::min(lo + width, n), hi = std::min(lo + 2 * width, n);
      size_t i = lo, j = mid, k = lo;
      while (i < mid && j < hi) {
        r.budget().charge(1);
        // Take from the right run only when it is strictly before the left one.
        const bool right_first = reverse ? less(items[i], items[j]) : less(items[j], items[i]);
        buf[k++] = right_first ? items[j++] : items[i++];
      }
      while (i < mid) buf[k++] = items[i++];
      while (j < hi) buf[k++] = items[j++];
    }
    items.swap(buf);
  }
}

}  // namespace rf::jinja
