// fuzz-gguf: GGUF parsing (gguf_init_from_file) of arbitrary bytes, with and without tensor data
// (metadata only, read into a ggml context, mapped), then every key, value, array element and
// tensor it reports is read back, and the parsed metadata is written out again and re-parsed.
// A malformed file must give NULL, never a crash, a hang or a leak.
#include "fuzz-common.h"

#include "ggml.h"
#include "gguf.h"

#include <algorithm>
#include <vector>

namespace {

void walk(gguf_context * g, ggml_context * ctx, bool have_data) {
    uint8_t acc = 0;
    FUZZ_CHECK(gguf_get_version(g) == 2 || gguf_get_version(g) == 3);
    const size_t align = gguf_get_alignment(g);
    FUZZ_CHECK(align > 0 && (align & (align - 1)) == 0);

    const int64_t n_kv = gguf_get_n_kv(g);
    FUZZ_CHECK(n_kv >= 0);
    for (int64_t i = 0; i < n_kv; i++) {
        const char * key = gguf_get_key(g, i);
        FUZZ_CHECK(key != nullptr);
        FUZZ_CHECK(gguf_find_key(g, key) == i);  // keys are unique
        const gguf_type type = gguf_get_kv_type(g, i);
        FUZZ_CHECK(gguf_type_name(type) != nullptr);
        switch (type) {
            case GGUF_TYPE_UINT8:   acc ^= gguf_get_val_u8(g, i); break;
            case GGUF_TYPE_INT8:    acc ^= (uint8_t) gguf_get_val_i8(g, i); break;
            case GGUF_TYPE_UINT16:  acc ^= (uint8_t) gguf_get_val_u16(g, i); break;
            case GGUF_TYPE_INT16:   acc ^= (uint8_t) gguf_get_val_i16(g, i); break;
            case GGUF_TYPE_UINT32:  acc ^= (uint8_t) gguf_get_val_u32(g, i); break;
            case GGUF_TYPE_INT32:   acc ^= (uint8_t) gguf_get_val_i32(g, i); break;
            case GGUF_TYPE_UINT64:  acc ^= (uint8_t) gguf_get_val_u64(g, i); break;
            case GGUF_TYPE_INT64:   acc ^= (uint8_t) gguf_get_val_i64(g, i); break;
            case GGUF_TYPE_FLOAT32: acc ^= gguf_get_val_f32(g, i) > 0; break;
            case GGUF_TYPE_FLOAT64: acc ^= gguf_get_val_f64(g, i) > 0; break;
            case GGUF_TYPE_BOOL:    acc ^= gguf_get_val_bool(g, i); break;
            case GGUF_TYPE_STRING: {
                const char * s = gguf_get_val_str(g, i);
                acc ^= fuzz::touch(s, strlen(s) + 1);
                break;
            }
            case GGUF_TYPE_ARRAY: {
                const gguf_type et = gguf_get_arr_type(g, i);
                FUZZ_CHECK(et != GGUF_TYPE_ARRAY && gguf_type_name(et) != nullptr);
                const size_t n = gguf_get_arr_n(g, i);
                if (et == GGUF_TYPE_STRING) {
                    for (size_t j = 0; j < n; j++) {
                        const char * s = gguf_get_arr_str(g, i, j);
                        acc ^= fuzz::touch(s, strlen(s) + 1);
                    }
                } else {
                    size_t es = 0;
                    switch (et) {
                        case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_BOOL: es = 1; break;
                        case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16: es = 2; break;
                        case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_FLOAT32: es = 4; break;
                        default: es = 8; break;
                    }
                    const void * d = gguf_get_arr_data(g, i);
                    if (n > 0) acc ^= fuzz::touch(d, n * es);
                }
                break;
            }
            default:
                FUZZ_CHECK(!"unknown value type");
        }
        if (type != GGUF_TYPE_STRING && type != GGUF_TYPE_ARRAY) FUZZ_CHECK(gguf_get_val_data(g, i) != nullptr);
    }

    const int64_t n_tensors = gguf_get_n_tensors(g);
    FUZZ_CHECK(n_tensors >= 0);
    const char * data = (const char *) gguf_get_data(g);
    if (!have_data) FUZZ_CHECK(data == nullptr);
    for (int64_t i = 0; i < n_tensors; i++) {
        const char * name = gguf_get_tensor_name(g, i);
        FUZZ_CHECK(name != nullptr && strlen(name) < GGML_MAX_NAME);
        FUZZ_CHECK(gguf_find_tensor(g, name) == i);
        const ggml_type type = gguf_get_tensor_type(g, i);
        FUZZ_CHECK(ggml_type_name(type) != nullptr);
        const size_t offset = gguf_get_tensor_offset(g, i);
        const size_t size = gguf_get_tensor_size(g, i);
        FUZZ_CHECK(offset % align == 0);
        if (data && size > 0) {
            acc ^= fuzz::touch(data + offset, 1);
            acc ^= fuzz::touch(data + offset + size - 1, 1);
        }
        if (ctx) {
            ggml_tensor * t = ggml_get_tensor(ctx, name);
            FUZZ_CHECK(t != nullptr);
            FUZZ_CHECK(t->type == type);
            FUZZ_CHECK(ggml_nbytes(t) == size);
            if (data) {
                FUZZ_CHECK(t->data == data + offset);
            }
            if (t->data && size > 0) acc ^= fuzz::touch(t->data, size);
        }
    }
    (void) acc;
}

// The metadata written by the library's own writer, followed by zeros standing for the data
// section, must parse again and describe the same keys and tensors.
void check_rewrite(gguf_context * g) {
    const size_t meta_size = gguf_get_meta_size(g);
    uint64_t data_size = 0;
    for (int64_t i = 0; i < gguf_get_n_tensors(g); i++) {
        data_size = std::max<uint64_t>(data_size, gguf_get_tensor_offset(g, i) + gguf_get_tensor_size(g, i));
    }
    if (data_size > (64u << 20)) return;
    std::vector<uint8_t> buf(meta_size + (size_t) data_size);
    gguf_get_meta_data(g, buf.data());
    fuzz::mem_file f(buf.data(), buf.size());
    gguf_init_params p = {};
    p.no_alloc = true;
    gguf_context * g2 = gguf_init_from_file(f.path.c_str(), p);
    FUZZ_CHECK(g2 != nullptr);
    FUZZ_CHECK(gguf_get_n_kv(g2) == gguf_get_n_kv(g));
    FUZZ_CHECK(gguf_get_n_tensors(g2) == gguf_get_n_tensors(g));
    for (int64_t i = 0; i < gguf_get_n_kv(g); i++) {
        FUZZ_CHECK(strcmp(gguf_get_key(g, i), gguf_get_key(g2, i)) == 0);
        FUZZ_CHECK(gguf_get_kv_type(g, i) == gguf_get_kv_type(g2, i));
    }
    for (int64_t i = 0; i < gguf_get_n_tensors(g); i++) {
        FUZZ_CHECK(strcmp(gguf_get_tensor_name(g, i), gguf_get_tensor_name(g2, i)) == 0);
        FUZZ_CHECK(gguf_get_tensor_type(g, i) == gguf_get_tensor_type(g2, i));
        FUZZ_CHECK(gguf_get_tensor_size(g, i) == gguf_get_tensor_size(g2, i));
        FUZZ_CHECK(gguf_get_tensor_offset(g, i) == gguf_get_tensor_offset(g2, i));
    }
    gguf_free(g2);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    fuzz::mem_file f(data, size);
    struct mode { bool no_alloc, with_ctx, use_mmap; };
    static const mode modes[] = {
        { true, false, false },  // metadata only
        { true, true, false },   // metadata and tensor structs without data
        { false, true, false },  // data read into the ggml context
        { false, true, true },   // data mapped
        { false, false, true },  // mapped, no ggml context
    };
    bool parsed = false;
    for (const mode & m : modes) {
        ggml_context * ctx = nullptr;
        gguf_init_params p = {};
        p.no_alloc = m.no_alloc;
        p.ctx = m.with_ctx ? &ctx : nullptr;
        p.use_mmap = m.use_mmap;
        gguf_context * g = gguf_init_from_file(f.path.c_str(), p);
        // The same bytes parse the same way whatever is asked of the data.
        if (&m == &modes[0]) parsed = g != nullptr;
        else FUZZ_CHECK(parsed == (g != nullptr));
        if (g) {
            FUZZ_CHECK(!m.with_ctx || ctx != nullptr);
            walk(g, ctx, !m.no_alloc);
            if (&m == &modes[0]) check_rewrite(g);
        } else {
            FUZZ_CHECK(ctx == nullptr);
        }
        gguf_free(g);
        ggml_free(ctx);
    }
    return 0;
}
