// llama-convert: llama2.c checkpoints and Hugging Face Llama models to GGUF, and PEFT LoRA
// adapters to GGUF adapters, without Python.
//
//   llama-convert --llama2c MODEL.bin --tokenizer TOKENIZER.bin -o OUT.gguf [--outtype T]
//   llama-convert --hf DIR -o OUT.gguf [--outtype T]
//   llama-convert --lora PEFT_DIR --base BASE.gguf -o ADAPTER.gguf [--outtype T]
//
// Inputs are memory-mapped; tensors are produced, converted and written one at a time into a
// temporary file renamed into place when complete, so memory stays near the largest tensor and
// a failed run leaves no output.
#include "arg.h"
#include "convert.h"
#include "llama-gguf-stream.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace {

// The type a tensor is written as.
ggml_type choose_type(const source_tensor & t, const std::string & outtype) {
    if (t.ne.size() < 2) return GGML_TYPE_F32;
    if (outtype.empty()) return t.src_type;
    if (outtype == "f32") return GGML_TYPE_F32;
    if (outtype == "f16") return GGML_TYPE_F16;
    if (outtype == "bf16") return GGML_TYPE_BF16;
    // q8_0: rows whose length is not a multiple of the block fall back to F16.
    return t.ne[0] % ggml_blck_size(GGML_TYPE_Q8_0) == 0 ? GGML_TYPE_Q8_0 : GGML_TYPE_F16;
}

int run(int argc, char ** argv) {
    // The options: common/arg.cpp's table (LLAMA_EXAMPLE_CONVERT).
    common_params params;
    if (!common_params_parse(argc, argv, params, LLAMA_EXAMPLE_CONVERT)) return 1;
    const std::string & llama2c = params.convert_llama2c, & tokenizer = params.convert_tokenizer, & hf = params.convert_hf;
    const std::string & lora = params.convert_lora, & base = params.convert_base, & outtype = params.out_type;
    const std::string & out = params.out_file;
    if (out.empty()) throw convert_error("no output file (-o OUT.gguf)");
    if (!lora.empty()) {
        if (!llama2c.empty() || !hf.empty() || !tokenizer.empty()) {
            throw convert_error("--lora does not go with --llama2c, --tokenizer or --hf");
        }
        if (base.empty()) throw convert_error("--lora needs --base BASE.gguf (the model the adapter is for)");
        convert_lora(lora, base, out, outtype);
        return 0;
    }
    if (!base.empty()) throw convert_error("--base is only for --lora");
    if (llama2c.empty() == hf.empty()) throw convert_error("give exactly one of --llama2c and --hf");
    if (!llama2c.empty() && tokenizer.empty()) throw convert_error("--llama2c needs --tokenizer TOKENIZER.bin");
    if (!hf.empty() && !tokenizer.empty()) throw convert_error("--tokenizer is only for --llama2c");

    model_plan plan = !llama2c.empty() ? load_llama2c(llama2c, tokenizer) : load_hf(hf);
    std::unique_ptr<gguf_context, void (*)(gguf_context *)> meta(plan.meta, gguf_free);

    // Tensor infos need ggml tensors: metadata only, in a no_alloc context.
    ggml_init_params ip = {};
    ip.mem_size = (plan.tensors.size() + 1) * ggml_tensor_overhead();
    ip.mem_buffer = nullptr;
    ip.no_alloc = true;
    std::unique_ptr<ggml_context, void (*)(ggml_context *)> gctx(ggml_init(ip), ggml_free);
    if (!gctx) throw convert_error("out of memory");

    std::vector<gguf_stream_tensor> stream;
    std::vector<ggml_type> out_types;
    for (const auto & t : plan.tensors) {
        if (t.ne.empty() || t.ne.size() > 4) throw convert_error("internal error: bad rank for " + t.name);
        ggml_tensor * gt = ggml_new_tensor(gctx.get(), t.src_type, (int) t.ne.size(), t.ne.data());
        ggml_set_name(gt, t.name.c_str());
        gguf_add_tensor(plan.meta, gt);
        const ggml_type type = choose_type(t, outtype);
        if (type != t.src_type) gguf_set_tensor_type(plan.meta, t.name.c_str(), type);
        out_types.push_back(type);
    }
    if (!outtype.empty()) {
        const int ft = outtype == "f32" ? 0 : outtype == "f16" ? 1 : outtype == "bf16" ? 32 : 7;
        gguf_set_val_u32(plan.meta, "general.file_type", (uint32_t) ft);
        if (outtype == "q8_0") gguf_set_val_u32(plan.meta, "general.quantization_version", 2);
    }

    const size_t n = plan.tensors.size();
    for (size_t i = 0; i < n; i++) {
        const source_tensor * t = &plan.tensors[i];
        const ggml_type type = out_types[i];
        const int64_t row = t->ne[0];
        int64_t rows = 1;
        for (size_t k = 1; k < t->ne.size(); k++) rows *= t->ne[k];
        const size_t nbytes = ggml_row_size(type, row) * (size_t) rows;
        stream.push_back({t->name.c_str(), nbytes, [t, type, row, rows, nbytes, i, n](std::vector<uint8_t> & buf) {
                              std::vector<uint8_t> src;
                              t->read(src);
                              if (src.size() != ggml_row_size(t->src_type, row) * (size_t) rows) {
                                  throw convert_error("internal error: reader of " + t->name + " gave the wrong size");
                              }
                              if (type == t->src_type) {
                                  buf.swap(src);
                              } else {
                                  std::vector<float> f((size_t) (row * rows));
                                  if (t->src_type == GGML_TYPE_F32) memcpy(f.data(), src.data(), f.size() * 4);
                                  else ggml_get_type_traits(t->src_type)->to_float(src.data(), f.data(), (int64_t) f.size());
                                  buf.resize(nbytes);
                                  ggml_quantize_chunk(type, f.data(), buf.data(), 0, rows, row, nullptr);
                              }
                              std::string shape;
                              for (int64_t x : t->ne) shape += (shape.empty() ? "" : " x ") + std::to_string(x);
                              fprintf(stderr, "[%4zu/%4zu] %-32s %-16s %-5s -> %-5s %9.2f MiB\n", i + 1, n,
                                      t->name.c_str(), shape.c_str(), ggml_type_name(t->src_type), ggml_type_name(type),
                                      nbytes / 1048576.0);
                          }});
    }
    fprintf(stderr, "llama-convert: writing %zu tensors to %s\n", n, out.c_str());
    gguf_stream_write(plan.meta, stream, out);
    fprintf(stderr, "llama-convert: wrote %s\n", out.c_str());
    return 0;
}

}  // namespace

int main(int argc, char ** argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception & e) {
        fprintf(stderr, "llama-convert: error: %s\n", e.what());
        return 1;
    }
}
