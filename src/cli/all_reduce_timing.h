// Timing the tensor-parallel all-reduce on a command's ranks, in the shape a
// step reduces ([rows, n_embd] activations, 2 per layer plus the
// embedding's): what `rocmforge bench` reports beside decode speed.
#pragma once

#include <cstdint>

#include "cli/backend_factory.h"

namespace rf::cli {

struct AllReduceTiming {
  int rows = 0;
  double us_per_call = 0;  // median over repeated calls (replayed from a graph where the ranks have
                           // graphs, as in decode steps), rank 0's view
  double ms_per_step = 0;  // us_per_call * (2 * n_layer + 1) / 1000
};

// Requires backends.comms (tensor parallel).
AllReduceTiming time_all_reduce(const BackendSet& backends, int64_t n_embd, int rows, int n_layer);

}  // namespace rf::cli
