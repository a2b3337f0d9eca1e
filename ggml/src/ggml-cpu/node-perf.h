// node-perf.h - time per kind of node, on request (GGML_PERF=1); see node-perf.cpp.
#pragma once

#include "../ggml-impl.h"

#include <stdint.h>

bool ggml_node_perf_enabled(void);  // GGML_PERF set and not "0" (read once)
void ggml_node_perf_add(const struct ggml_tensor * node, int64_t ns);
