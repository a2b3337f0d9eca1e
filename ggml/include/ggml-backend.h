// ggml-backend.h - the backend names llama.h's parameter structs use, so that programs written
// for ggml's backend API find them. This library has one backend, the CPU, built in: there are
// no devices to list or offload to, and no backend modules to load.
#pragma once

#include "ggml.h"

#ifdef __cplusplus
extern "C" {
#endif

// A compute device. Never defined here: a NULL-terminated list of them is always empty.
typedef struct ggml_backend_device * ggml_backend_dev_t;

// Called for graph nodes as a scheduler evaluates them (ask: whether the caller wants to see
// this node's data). No scheduler runs here; llama_context_params.cb_eval has this type.
typedef bool (*ggml_backend_sched_eval_callback)(struct ggml_tensor * t, bool ask, void * user_data);

// Loads the dynamically built backends. A no-op: the CPU backend is part of the library.
void ggml_backend_load_all(void);

#ifdef __cplusplus
}
#endif
