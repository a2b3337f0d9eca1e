// llama-cpp.h - C++ owners for the C API's objects: std::unique_ptr types that free a model,
// context, sampler or LoRA adapter with its llama_*_free call (the names are llama.cpp's).
#pragma once

#ifndef __cplusplus
#error "llama-cpp.h is a C++ header"
#endif

#include "llama.h"

#include <memory>

struct llama_model_deleter        { void operator()(llama_model * m)        const { llama_model_free(m); } };
struct llama_context_deleter      { void operator()(llama_context * c)      const { llama_free(c); } };
struct llama_sampler_deleter      { void operator()(llama_sampler * s)      const { llama_sampler_free(s); } };
struct llama_adapter_lora_deleter { void operator()(llama_adapter_lora * a) const { llama_adapter_lora_free(a); } };

using llama_model_ptr        = std::unique_ptr<llama_model, llama_model_deleter>;
using llama_context_ptr      = std::unique_ptr<llama_context, llama_context_deleter>;
using llama_sampler_ptr      = std::unique_ptr<llama_sampler, llama_sampler_deleter>;
using llama_adapter_lora_ptr = std::unique_ptr<llama_adapter_lora, llama_adapter_lora_deleter>;
