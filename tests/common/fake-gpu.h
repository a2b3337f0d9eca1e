// fake-gpu.h - a simulated GPU device for tests of the backend interface and of layer offload.
//
// Its buffers hand out addresses in a range the process never maps (a kernel that reads one
// directly crashes); set/get translate them to the real memory behind. Its backend computes a
// graph by translating every pointer of the graph to real memory, running the CPU kernels and
// translating back, and checks that every tensor it touches lives in its own buffers. It records
// the ops it ran. Which ops it supports is the test's choice. A test may give it other kernels
// (set_kernels: the CUDA backend's, emulated on the host) and the ops they cover.
#pragma once

#include "ggml-backend.h"

#include <stdint.h>

#include <functional>
#include <vector>

namespace fake_gpu {

ggml_backend_dev_t         device();       // type GPU, named "FAKE"
ggml_backend_buffer_type_t buffer_type();  // not host memory
// (ggml_backend_dev_host_buffer_type: host memory of a type named "FAKE_Host")
ggml_backend_t             init();         // a backend of the device

// The ops the device claims (default: all of them; with set_kernels, those of kernels_supports).
void set_supports(std::function<bool(const ggml_tensor *)> f);
bool supports(const ggml_tensor * op);

// The device's kernels: compute(graph) runs a graph whose tensors point at real memory
// (GGML_STATUS_SUCCESS or an error), kernels_supports what it can run. nullptr: the CPU's.
void set_kernels(std::function<ggml_status(ggml_cgraph *)> compute, std::function<bool(const ggml_tensor *)> kernels_supports);

std::vector<ggml_op> & ran();  // every op computed on the device, in order (the test clears it)
int graphs_computed();
// The key (ggml_graph_key) of every graph computed on the device, in order (the test clears it):
// equal keys are what would let a GPU replay its recorded kernels.
std::vector<std::vector<uint64_t>> & graph_keys();

}  // namespace fake_gpu
