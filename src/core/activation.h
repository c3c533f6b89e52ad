// Activation: the gated FFN's activation, act(gate) * up — a data type shared
// by the model's configuration (which family uses which) and the backends'
// fused gate*up op.
#pragma once

namespace rf {

enum class Activation { SiLU, GeluTanh };  // SwiGLU; GeGLU with the tanh approximation of GELU

}  // namespace rf
