// bench-output.cpp - llama-bench's results and printers. Field names, their order, the number
// formats and the markdown columns follow llama.cpp's llama-bench, so that scripts reading its
// csv / json output and eyes reading its tables see the same thing; fields for what this engine
// does not have (GPU split modes, CPU masks...) are left out rather than faked.
#include "bench.h"

#include "ggml-backend.h"

#include <cctype>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>

// ---- results -------------------------------------------------------------------------------
std::string bench_result::test_name() const {
    std::string s;
    if (inst.n_prompt > 0 && inst.n_gen == 0) {
        s = "pp" + std::to_string(inst.n_prompt);
    } else if (inst.n_gen > 0 && inst.n_prompt == 0) {
        s = "tg" + std::to_string(inst.n_gen);
    } else {
        s = "pp" + std::to_string(inst.n_prompt) + "+tg" + std::to_string(inst.n_gen);
    }
    if (inst.n_depth > 0) s += " @ d" + std::to_string(inst.n_depth);
    return s;
}

std::vector<double> bench_result::samples_ts() const {
    std::vector<double> ts;
    const double n_tokens = inst.n_prompt + inst.n_gen;
    for (uint64_t ns : samples_ns) ts.push_back(ns > 0 ? 1e9 * n_tokens / (double) ns : 0.0);
    return ts;
}

namespace {

double mean(const std::vector<double> & v) {
    if (v.empty()) return 0;
    double s = 0;
    for (double x : v) s += x;
    return s / (double) v.size();
}

// Sample standard deviation (n - 1), 0 for fewer than two samples, as llama.cpp reports it.
double stddev(const std::vector<double> & v) {
    if (v.size() < 2) return 0;
    const double m = mean(v);
    double s = 0;
    for (double x : v) s += (x - m) * (x - m);
    return std::sqrt(s / (double) (v.size() - 1));
}

std::vector<double> as_double(const std::vector<uint64_t> & v) { return std::vector<double>(v.begin(), v.end()); }

}  // namespace

uint64_t bench_result::avg_ns() const { return (uint64_t) std::llround(mean(as_double(samples_ns))); }
uint64_t bench_result::stddev_ns() const { return (uint64_t) std::llround(stddev(as_double(samples_ns))); }
double bench_result::avg_ts() const { return mean(samples_ts()); }
double bench_result::stddev_ts() const { return stddev(samples_ts()); }

double bench_result::ceiling_pct() const {
    const uint64_t bytes = token_bytes ? token_bytes : model_size;
    if (ceiling_gbps <= 0 || inst.n_prompt != 0 || inst.n_gen <= 0 || bytes == 0) return -1;
    const double ceiling_ts = ceiling_gbps / ((double) bytes / 1e9);
    return 100.0 * avg_ts() / ceiling_ts;
}

namespace {

// ---- fields --------------------------------------------------------------------------------
std::string fmt(const char * f, double x) {
    char buf[64];
    snprintf(buf, sizeof(buf), f, x);
    return buf;
}

template <class T> std::string join(const std::vector<T> & v, const std::string & sep, const std::function<std::string(T)> & f) {
    std::string s;
    for (size_t i = 0; i < v.size(); i++) s += (i ? sep : "") + f(v[i]);
    return s;
}

// The GPU devices' descriptions, and the backends as llama.cpp names them ("CUDA", or "CPU").
std::string gpu_info() {
    std::string s;
    for (size_t i = 0; i < ggml_backend_dev_count(); i++) {
        ggml_backend_dev_t d = ggml_backend_dev_get(i);
        if (ggml_backend_dev_type(d) == GGML_BACKEND_DEVICE_TYPE_CPU) continue;
        s += (s.empty() ? "" : ", ") + std::string(ggml_backend_dev_description(d));
    }
    return s;
}

std::string backends_of(const bench_instance & i) {
    std::string s;
    for (size_t k = 0; k < ggml_backend_dev_count() && i.n_gpu_layers != 0; k++) {
        ggml_backend_dev_t d = ggml_backend_dev_get(k);
        if (ggml_backend_dev_type(d) == GGML_BACKEND_DEVICE_TYPE_CPU) continue;
        std::string name = ggml_backend_dev_name(d);
        while (!name.empty() && isdigit((unsigned char) name.back())) name.pop_back();  // CUDA0 -> CUDA
        if (s.find(name) == std::string::npos) s += (s.empty() ? "" : ",") + name;
    }
    return s.empty() ? "CPU" : s;
}

std::string cpu_info() {
    static const std::string info = [] {
        std::ifstream in("/proc/cpuinfo");
        std::string line;
        while (std::getline(in, line)) {
            if (line.rfind("model name", 0) != 0) continue;
            const size_t c = line.find(':');
            if (c == std::string::npos) break;
            const size_t b = line.find_first_not_of(" \t", c + 1);
            const size_t e = line.find_last_not_of(" \t\r");
            return b == std::string::npos ? std::string() : line.substr(b, e - b + 1);
        }
        return std::string();
    }();
    return info;
}

enum class kind { str, num, boolean };

struct field {
    const char * name;
    kind k;
    std::string value;  // empty for a number: no value (null in json)
};

// Every field of a result in llama.cpp's order; the ceiling fields only with --ceiling.
std::vector<field> fields_of(const bench_result & r) {
    const bench_instance & i = r.inst;
    std::vector<field> f = {
        { "build_commit", kind::str, "unknown" },
        { "build_number", kind::num, "0" },
        { "cpu_info", kind::str, cpu_info() },
        { "gpu_info", kind::str, gpu_info() },
        { "backends", kind::str, backends_of(i) },
        { "model_filename", kind::str, i.model },
        { "model_type", kind::str, r.model_type },
        { "model_size", kind::num, std::to_string(r.model_size) },
        { "model_n_params", kind::num, std::to_string(r.model_n_params) },
        { "n_batch", kind::num, std::to_string(i.n_batch) },
        { "n_ubatch", kind::num, std::to_string(i.n_ubatch) },
        { "n_threads", kind::num, std::to_string(i.n_threads) },
        // llama.cpp's thread placement fields, at its defaults (threads are not pinned here)
        { "cpu_mask", kind::str, "0x0" },
        { "cpu_strict", kind::boolean, "0" },
        { "poll", kind::num, "50" },
        { "type_k", kind::str, ggml_type_name(i.type_k) },
        { "type_v", kind::str, ggml_type_name(i.type_v) },
        { "n_gpu_layers", kind::num, std::to_string(i.n_gpu_layers) },
        { "split_mode", kind::str, i.split_mode == LLAMA_SPLIT_MODE_NONE ? "none" : i.split_mode == LLAMA_SPLIT_MODE_ROW ? "row" : "layer" },
        { "main_gpu", kind::num, std::to_string(i.main_gpu) },
        { "no_kv_offload", kind::boolean, i.no_kv_offload ? "1" : "0" },
        { "flash_attn", kind::boolean, i.flash_attn ? "1" : "0" },
        { "tensor_split", kind::str, "0.00" },  // one GPU takes the offloaded layers
        { "use_mmap", kind::boolean, i.use_mmap ? "1" : "0" },
        { "embeddings", kind::boolean, "0" },
        { "n_prompt", kind::num, std::to_string(i.n_prompt) },
        { "n_gen", kind::num, std::to_string(i.n_gen) },
        { "n_depth", kind::num, std::to_string(i.n_depth) },
        { "test_time", kind::str, r.test_time },
        { "avg_ns", kind::num, std::to_string(r.avg_ns()) },
        { "stddev_ns", kind::num, std::to_string(r.stddev_ns()) },
        { "avg_ts", kind::num, fmt("%f", r.avg_ts()) },
        { "stddev_ts", kind::num, fmt("%f", r.stddev_ts()) },
    };
    if (r.ceiling_fields) {
        const double pct = r.ceiling_pct();
        f.push_back({ "ceiling_gbps", kind::num, r.ceiling_gbps > 0 ? fmt("%f", r.ceiling_gbps) : "" });
        f.push_back({ "ceiling_pct", kind::num, pct >= 0 ? fmt("%f", pct) : "" });
    }
    return f;
}

std::string samples_ns_str(const bench_result & r) {
    return join<uint64_t>(r.samples_ns, ", ", [](uint64_t x) { return std::to_string(x); });
}
std::string samples_ts_str(const bench_result & r) {
    return join<double>(r.samples_ts(), ", ", [](double x) { return fmt("%g", x); });
}

// ---- csv -----------------------------------------------------------------------------------
std::string csv_quote(const std::string & s) {
    std::string q = "\"";
    for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
}

class csv_printer : public bench_printer {
public:
    using bench_printer::bench_printer;
    void header(const bench_params & p) override {
        bench_result shape;
        shape.ceiling_gbps = p.ceiling_gbps;
        shape.ceiling_fields = p.ceiling();
        fprintf(out_, "%s\n", join<field>(fields_of(shape), ",", [](field f) { return std::string(f.name); }).c_str());
    }
    void row(const bench_result & r) override {
        fprintf(out_, "%s\n", join<field>(fields_of(r), ",", [](field f) { return csv_quote(f.value); }).c_str());
    }
};

// ---- json, jsonl ---------------------------------------------------------------------------
std::string json_string(const std::string & s) {
    std::string e = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            e += '\\';
            e += (char) c;
        } else if (c < 0x20) {
            char buf[8];
            snprintf(buf, sizeof(buf), "\\u%04x", c);
            e += buf;
        } else {
            e += (char) c;
        }
    }
    return e + "\"";
}

std::string json_value(const field & f) {
    switch (f.k) {
        case kind::str:     return json_string(f.value);
        case kind::boolean: return f.value == "0" ? "false" : "true";
        case kind::num:     return f.value.empty() ? "null" : f.value;
    }
    return "null";
}

class json_printer : public bench_printer {
public:
    using bench_printer::bench_printer;
    void header(const bench_params &) override { fprintf(out_, "[\n"); }
    void row(const bench_result & r) override {
        fprintf(out_, "%s  {\n", first_ ? "" : ",\n");
        first_ = false;
        for (const field & f : fields_of(r)) fprintf(out_, "    \"%s\": %s,\n", f.name, json_value(f).c_str());
        fprintf(out_, "    \"samples_ns\": [ %s ],\n", samples_ns_str(r).c_str());
        fprintf(out_, "    \"samples_ts\": [ %s ]\n", samples_ts_str(r).c_str());
        fprintf(out_, "  }");
    }
    void footer() override { fprintf(out_, "\n]\n"); }

private:
    bool first_ = true;
};

class jsonl_printer : public bench_printer {
public:
    using bench_printer::bench_printer;
    void row(const bench_result & r) override {
        fprintf(out_, "{");
        for (const field & f : fields_of(r)) fprintf(out_, "\"%s\": %s, ", f.name, json_value(f).c_str());
        fprintf(out_, "\"samples_ns\": [ %s ], \"samples_ts\": [ %s ]}\n", samples_ns_str(r).c_str(), samples_ts_str(r).c_str());
    }
};

// ---- sql -----------------------------------------------------------------------------------
class sql_printer : public bench_printer {
public:
    using bench_printer::bench_printer;
    void header(const bench_params & p) override {
        bench_result shape;
        shape.ceiling_gbps = p.ceiling_gbps;
        shape.ceiling_fields = p.ceiling();
        const std::vector<field> fs = fields_of(shape);
        fprintf(out_, "CREATE TABLE IF NOT EXISTS llama_bench (\n");
        for (size_t i = 0; i < fs.size(); i++) {
            const bool real = !strcmp(fs[i].name, "avg_ts") || !strcmp(fs[i].name, "stddev_ts") ||
                              !strncmp(fs[i].name, "ceiling_", 8);
            const char * type = fs[i].k == kind::str ? "TEXT" : real ? "REAL" : "INTEGER";
            fprintf(out_, "  %s %s%s\n", fs[i].name, type, i + 1 < fs.size() ? "," : "");
        }
        fprintf(out_, ");\n\n");
    }
    void row(const bench_result & r) override {
        const std::vector<field> fs = fields_of(r);
        fprintf(out_, "INSERT INTO llama_bench (%s) VALUES (%s);\n",
                join<field>(fs, ", ", [](field f) { return std::string(f.name); }).c_str(),
                join<field>(fs, ", ", [](field f) {
                    if (f.k == kind::num && f.value.empty()) return std::string("NULL");
                    std::string q = "'";
                    for (char c : f.value) q += c == '\'' ? std::string("''") : std::string(1, c);
                    return q + "'";
                }).c_str());
    }
};

// ---- markdown ------------------------------------------------------------------------------
struct md_column {
    std::string title;
    int width;  // negative: left-aligned
    std::function<std::string(const bench_result &)> value;
};

// Bytes beyond one per character ("±" is two bytes): printf pads by bytes, the table by characters.
int utf8_extra(const std::string & s) {
    int n = 0;
    for (unsigned char c : s) n += (c & 0xC0) == 0x80;
    return n;
}

template <class T> bool differs(const std::vector<T> & v, T def) { return v.size() > 1 || (v.size() == 1 && v[0] != def); }

class md_printer : public bench_printer {
public:
    using bench_printer::bench_printer;

    // The columns llama.cpp shows on a CPU backend: a parameter gets a column when it was given
    // several values or one other than the default.
    void header(const bench_params & p) override {
        cols_.push_back({ "model", -30, [](const bench_result & r) { return r.model_type; } });
        cols_.push_back({ "size", 10, [](const bench_result & r) {
                              const double mib = (double) r.model_size / (1024.0 * 1024.0);
                              return mib < 1024.0 ? fmt("%.2f MiB", mib) : fmt("%.2f GiB", mib / 1024.0);
                          } });
        cols_.push_back({ "params", 10, [](const bench_result & r) {
                              const double n = (double) r.model_n_params;
                              return n < 1e9 ? fmt("%.2f M", n / 1e6) : fmt("%.2f B", n / 1e9);
                          } });
        cols_.push_back({ "backend", -10, [](const bench_result & r) { return backends_of(r.inst); } });
        cols_.push_back({ "threads", 7, [](const bench_result & r) { return std::to_string(r.inst.n_threads); } });
        if (differs(p.n_batch, bench_defaults::n_batch)) {
            cols_.push_back({ "n_batch", 7, [](const bench_result & r) { return std::to_string(r.inst.n_batch); } });
        }
        if (differs(p.n_ubatch, bench_defaults::n_ubatch)) {
            cols_.push_back({ "n_ubatch", 8, [](const bench_result & r) { return std::to_string(r.inst.n_ubatch); } });
        }
        if (differs(p.type_k, bench_defaults::type_k)) {
            cols_.push_back({ "type_k", 6, [](const bench_result & r) { return std::string(ggml_type_name(r.inst.type_k)); } });
        }
        if (differs(p.type_v, bench_defaults::type_v)) {
            cols_.push_back({ "type_v", 6, [](const bench_result & r) { return std::string(ggml_type_name(r.inst.type_v)); } });
        }
        if (differs(p.flash_attn, bench_defaults::flash_attn)) {
            cols_.push_back({ "fa", 2, [](const bench_result & r) { return std::string(r.inst.flash_attn ? "1" : "0"); } });
        }
        if (differs(p.use_mmap, bench_defaults::use_mmap)) {
            cols_.push_back({ "mmap", 4, [](const bench_result & r) { return std::string(r.inst.use_mmap ? "1" : "0"); } });
        }
        cols_.push_back({ "test", 15, [](const bench_result & r) { return r.test_name(); } });
        cols_.push_back({ "t/s", 20, [](const bench_result & r) {
                              return fmt("%.2f", r.avg_ts()) + " ± " + fmt("%.2f", r.stddev_ts());
                          } });
        ceiling_gbps_ = p.ceiling_gbps;
        ceiling_auto_ = p.ceiling_auto;
        if (ceiling_auto_) {
            cols_.push_back({ "ceiling GB/s", 12, [](const bench_result & r) {
                                  return r.ceiling_gbps > 0 ? fmt("%.1f", r.ceiling_gbps) : std::string();
                              } });
        }
        if (p.ceiling()) {
            cols_.push_back({ "% of ceiling", 12, [](const bench_result & r) {
                                  const double pct = r.ceiling_pct();
                                  return pct >= 0 ? fmt("%.1f", pct) : std::string();
                              } });
        }

        fprintf(out_, "|");
        for (const md_column & c : cols_) fprintf(out_, " %*s |", c.width, c.title.c_str());
        fprintf(out_, "\n|");
        for (const md_column & c : cols_) {
            fprintf(out_, " %s%s |", std::string((size_t) std::abs(c.width) - 1, '-').c_str(), c.width > 0 ? ":" : "-");
        }
        fprintf(out_, "\n");
    }

    void row(const bench_result & r) override {
        fprintf(out_, "|");
        for (const md_column & c : cols_) {
            const std::string v = c.value(r);
            const int extra = utf8_extra(v);
            fprintf(out_, " %*s |", c.width < 0 ? c.width - extra : c.width + extra, v.c_str());
        }
        fprintf(out_, "\n");
    }

    void footer() override {
        if (ceiling_auto_) {
            fprintf(out_, "\n%% of ceiling: tg t/s against the read bandwidth measured beside the test (the higher of "
                          "before and after) / the weight bytes a token reads (the model size; of a mixture's experts, the share chosen)\n");
        } else if (ceiling_gbps_ > 0) {
            fprintf(out_, "\n%% of ceiling: tg t/s against %.1f GB/s / the weight bytes a token reads (the model size; of a mixture's experts, the share chosen)\n",
                    ceiling_gbps_);
        }
        fprintf(out_, "\nbuild: unknown (0)\n");
    }

private:
    std::vector<md_column> cols_;
    double ceiling_gbps_ = 0;
    bool ceiling_auto_ = false;
};

}  // namespace

std::unique_ptr<bench_printer> bench_make_printer(bench_format format, FILE * out) {
    switch (format) {
        case bench_format::md:    return std::make_unique<md_printer>(out);
        case bench_format::csv:   return std::make_unique<csv_printer>(out);
        case bench_format::json:  return std::make_unique<json_printer>(out);
        case bench_format::jsonl: return std::make_unique<jsonl_printer>(out);
        case bench_format::sql:   return std::make_unique<sql_printer>(out);
        case bench_format::none:  break;
    }
    return nullptr;
}
