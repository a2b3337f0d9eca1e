// llama-export-lora: merges LoRA adapters into a base model, W' = W + sum_i s_i * alpha_i / r_i *
// B_i A_i, and writes the result as a complete GGUF model (llama.cpp's program and flags).
//
//   llama-export-lora -m BASE.gguf --lora A.gguf [--lora-scaled B.gguf 0.5] ... -o OUT.gguf [--outtype T] [-t N]
//
// The base is memory-mapped and its tensors are written one at a time, in the file's order, to a
// temporary file renamed into place when complete (llama-gguf-stream): memory stays near one
// tensor (in F32) and a failed run leaves no output. Tensors no adapter touches are copied byte
// for byte; merged ones are dequantized, merged in F32 and converted back (see --help).
#include "arg.h"
#include "common.h"
#include "lora-merge.h"

#include "gguf.h"
#include "llama-adapter.h"
#include "llama-gguf-stream.h"
#include "llama-model.h"
#include "llama-safetensors.h"  // release_pages

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <strings.h>
#include <sys/stat.h>
#include <thread>
#include <vector>

namespace {

// The merge's notes, printed after the options by --help.
const char * const kHelpNotes =
    "\nMerges LoRA adapters into the base model: W' = W + sum_i scale_i * alpha_i / r_i * B_i A_i\n"
    "(scale_i alone when an adapter's alpha is 0), and writes a complete GGUF model: all metadata\n"
    "of the base (tokenizer included) and every tensor, in the base's order. -o is required\n"
    "(llama.cpp defaults to ggml-lora-merged-f16.gguf).\n"
    "\n"
    "Types: tensors no adapter touches are copied byte for byte. A merged tensor is computed in\n"
    "F32 (a quantized base tensor is dequantized first) and written in its own type, requantized\n"
    "without an importance matrix, unless --outtype gives another type. This differs from\n"
    "llama.cpp's export-lora, which has no --outtype and writes every merged tensor as F16 (F32\n"
    "for an F32 base): --outtype f16 gives its result for non-F32 bases. A merged tensor whose\n"
    "type cannot be produced (a type ggml does not quantize to, or rows that are not a multiple\n"
    "of the type's block) is written as F16, with a note. general.file_type is kept from the base.\n"
    "Adapters may cover different sets of tensors (llama.cpp requires the same set).\n";

bool same_file(const std::string & a, const std::string & b) {
    struct stat sa, sb;
    return stat(a.c_str(), &sa) == 0 && stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

// What happens to one base tensor.
struct plan_entry {
    const ggml_tensor * w;
    ggml_type type;                       // the output type
    std::vector<lora_merge_term> terms;   // empty: copied byte for byte
};

int run(int argc, char ** argv) {
    // The options: common/arg.cpp's table (LLAMA_EXAMPLE_EXPORT_LORA).
    common_params params;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help") || !strcmp(argv[i], "--usage")) {
            fputs((common_params_help(LLAMA_EXAMPLE_EXPORT_LORA) + kHelpNotes).c_str(), stdout);
            return 0;
        }
    }
    if (!common_params_parse(argc, argv, params, LLAMA_EXAMPLE_EXPORT_LORA)) return 1;
    if (params.model.empty()) throw std::runtime_error("no base model (-m BASE.gguf)");
    if (params.lora_adapters.empty()) throw std::runtime_error("no adapter (--lora FILE or --lora-scaled FILE SCALE)");
    if (params.out_file.empty()) throw std::runtime_error("no output file (-o OUT.gguf)");
    struct {
        std::string base, out;
        std::vector<common_adapter_lora_info> loras;
        int n_threads;
    } opt = {params.model, params.out_file, params.lora_adapters, params.n_threads > 0 ? params.n_threads : common_default_threads()};
    if (same_file(opt.base, opt.out)) throw std::runtime_error("the output must not be the base model file");
    for (const auto & l : opt.loras) {
        if (same_file(l.path, opt.out)) throw std::runtime_error("the output must not be the adapter '" + l.path + "'");
    }
    const ggml_type outtype = params.out_type.empty() ? GGML_TYPE_COUNT : common_parse_merge_type(params.out_type);

    // The base with the file's layouts (no repacking), mapped: tensors are read once, when written.
    llama_model model;
    llama_model_params mp = llama_model_default_params();
    mp.use_mmap = true;
    mp.use_repack = false;
    mp.n_gpu_layers = 0;  // the weights are read on the host
    std::string err;
    if (!llama_model_load(model, opt.base.c_str(), mp, err)) {
        throw std::runtime_error("cannot load the base model '" + opt.base + "': " + err);
    }

    // Adapters are checked against the base (architecture, tensor names and shapes) and held in F32.
    std::vector<std::unique_ptr<llama_adapter_lora>> adapters;
    for (const common_adapter_lora_info & l : opt.loras) {
        auto ad = std::make_unique<llama_adapter_lora>();
        if (!llama_adapter_lora_load(*ad, model, l.path, err)) {
            throw std::runtime_error("cannot load the LoRA adapter '" + l.path + "': " + err);
        }
        fprintf(stderr, "llama-export-lora: %s: %zu tensors adapted, rank %d, alpha %g, scale %g\n", l.path.c_str(),
                ad->weights.size(), ad->rank(), ad->alpha, l.scale);
        adapters.push_back(std::move(ad));
    }

    // The output: the base's metadata and tensor list; merged tensors may change type.
    gguf_context * g = gguf_init_empty();
    std::unique_ptr<gguf_context, void (*)(gguf_context *)> gout(g, gguf_free);
    gguf_set_kv(g, model.meta);
    std::vector<plan_entry> plan;
    const int64_t n_tensors = gguf_get_n_tensors(model.meta);
    size_t n_merged = 0;
    for (int64_t i = 0; i < n_tensors; i++) {
        const char * name = gguf_get_tensor_name(model.meta, i);
        const ggml_tensor * w = ggml_get_tensor(model.ctx_w, name);
        if (!w) throw std::runtime_error(std::string("internal error: tensor '") + name + "' was not loaded");
        plan_entry e{w, w->type, {}};
        for (size_t k = 0; k < adapters.size(); k++) {
            const llama_adapter_lora_weight * lw = adapters[k]->get(w);
            if (!lw) continue;
            const float s = adapters[k]->effective_scale(*lw, opt.loras[k].scale);
            if (s == 0.0f) continue;  // W + 0: the tensor stays as it is
            e.terms.push_back({(const float *) lw->a->data, (const float *) lw->b->data, lw->a->ne[1], s});
        }
        if (!e.terms.empty()) {
            n_merged++;
            if (!ggml_is_contiguous(w) || !ggml_get_type_traits(w->type)->to_float) {
                throw std::runtime_error(std::string("tensor '") + name + "' of type " + ggml_type_name(w->type) +
                                         " cannot be read for merging");
            }
            ggml_type type = outtype != GGML_TYPE_COUNT ? outtype : w->type;
            if (!common_type_is_merge_target(type)) {
                fprintf(stderr, "llama-export-lora: %s: %s cannot be produced: writing F16\n", name, ggml_type_name(type));
                type = GGML_TYPE_F16;
            } else if (w->ne[0] % ggml_blck_size(type) != 0) {
                fprintf(stderr, "llama-export-lora: %s: rows of %lld are not a multiple of the %s block: writing F16\n",
                        name, (long long) w->ne[0], ggml_type_name(type));
                type = GGML_TYPE_F16;
            }
            e.type = type;
        }
        gguf_add_tensor(g, w);
        if (e.type != w->type) gguf_set_tensor_type(g, name, e.type);
        plan.push_back(std::move(e));
    }
    if (n_merged == 0) {
        fprintf(stderr, "llama-export-lora: warning: no tensor is changed (all scales are 0): writing a copy of the base\n");
    }

    std::vector<gguf_stream_tensor> stream;
    const size_t n = plan.size();
    for (size_t i = 0; i < n; i++) {
        const plan_entry * e = &plan[i];
        const ggml_tensor * w = e->w;
        const size_t nbytes = ggml_row_size(e->type, w->ne[0]) * (size_t) ggml_nrows(w);
        const int n_threads = opt.n_threads;
        stream.push_back({w->name, nbytes, [e, w, nbytes, i, n, n_threads](std::vector<uint8_t> & buf) {
                              if (e->terms.empty()) {
                                  buf.assign((const uint8_t *) w->data, (const uint8_t *) w->data + nbytes);
                              } else {
                                  buf.resize(nbytes);
                                  lora_merge_tensor(w, e->terms, e->type, buf.data(), n_threads);
                              }
                              release_pages(w->data, ggml_nbytes(w));  // the mapped base is not read again
                              fprintf(stderr, "[%4zu/%4zu] %-32s [%6lld %6lld] %-6s -> %-6s %s\n", i + 1, n, w->name,
                                      (long long) w->ne[0], (long long) w->ne[1], ggml_type_name(w->type),
                                      ggml_type_name(e->type),
                                      e->terms.empty() ? "copied"
                                                       : ("merged (" + std::to_string(e->terms.size()) + " adapter" +
                                                          (e->terms.size() > 1 ? "s)" : ")")).c_str());
                          }});
    }
    fprintf(stderr, "llama-export-lora: writing %zu tensors (%zu merged) to %s with %d threads\n", n, n_merged,
            opt.out.c_str(), opt.n_threads);
    gguf_stream_write(g, stream, opt.out);
    fprintf(stderr, "llama-export-lora: merged %zu tensors with LoRA adapters\n", n_merged);
    fprintf(stderr, "llama-export-lora: wrote %zu tensors to %s\n", n, opt.out.c_str());
    return 0;
}

}  // namespace

int main(int argc, char ** argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception & e) {
        fprintf(stderr, "llama-export-lora: error: %s\n", e.what());
        return 1;
    }
}
