// ggml-cpp.h - C++ owners for ggml's objects: std::unique_ptr types that release a context,
// a GGUF context, a graph allocator, a backend, a buffer or a scheduler with its *_free call
// (the names are ggml's).
#pragma once

#ifndef __cplusplus
#error "ggml-cpp.h is a C++ header"
#endif

#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "gguf.h"

#include <memory>

struct ggml_context_deleter        { void operator()(ggml_context * c)          const { ggml_free(c); } };
struct gguf_context_deleter        { void operator()(gguf_context * c)          const { gguf_free(c); } };
struct ggml_gallocr_deleter        { void operator()(ggml_gallocr_t g)          const { ggml_gallocr_free(g); } };
struct ggml_backend_deleter        { void operator()(ggml_backend_t b)          const { ggml_backend_free(b); } };
struct ggml_backend_buffer_deleter { void operator()(ggml_backend_buffer_t b)   const { ggml_backend_buffer_free(b); } };
struct ggml_backend_sched_deleter  { void operator()(ggml_backend_sched_t s)    const { ggml_backend_sched_free(s); } };

using ggml_context_ptr        = std::unique_ptr<ggml_context, ggml_context_deleter>;
using gguf_context_ptr        = std::unique_ptr<gguf_context, gguf_context_deleter>;
using ggml_gallocr_ptr        = std::unique_ptr<struct ggml_gallocr, ggml_gallocr_deleter>;
using ggml_backend_ptr        = std::unique_ptr<ggml_backend, ggml_backend_deleter>;
using ggml_backend_buffer_ptr = std::unique_ptr<ggml_backend_buffer, ggml_backend_buffer_deleter>;
using ggml_backend_sched_ptr  = std::unique_ptr<ggml_backend_sched, ggml_backend_sched_deleter>;
