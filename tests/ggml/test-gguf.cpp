// test-gguf.cpp - GGUF read/write: round trips of every value type and tensor layout, the API's
// semantics, malformed files (each must be rejected with a message, never crash) and the real
// model files of the shared test models.
#include "gguf.h"
#include "test-util.h"

#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>

namespace {

// ---- files ---------------------------------------------------------------------------------
// A private directory per test process, removed (with what the test left in it) at exit.
class TempDir : public testing::Environment {
public:
    static std::string path;
    void SetUp() override {
        std::string tmpl = testing::TempDir() + "test-gguf-XXXXXX";
        ASSERT_NE(mkdtemp(&tmpl[0]), nullptr);
        path = tmpl;
    }
    void TearDown() override {
        for (const std::string & f : list()) unlink((path + "/" + f).c_str());
        rmdir(path.c_str());
    }
    static std::vector<std::string> list() {
        std::vector<std::string> names;
        if (DIR * d = opendir(path.c_str())) {
            while (dirent * e = readdir(d)) {
                if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) names.push_back(e->d_name);
            }
            closedir(d);
        }
        std::sort(names.begin(), names.end());
        return names;
    }
};
std::string TempDir::path;
const testing::Environment * const temp_dir_env = testing::AddGlobalTestEnvironment(new TempDir);

std::string temp_path(const std::string & name) { return TempDir::path + "/" + name; }

std::vector<uint8_t> read_bytes(const std::string & path) {
    std::ifstream f(path, std::ios::binary | std::ios::ate);
    std::vector<uint8_t> bytes(f ? (size_t) f.tellg() : 0);
    f.seekg(0);
    f.read((char *) bytes.data(), (std::streamsize) bytes.size());
    return bytes;
}

void write_bytes(const std::string & path, const std::vector<uint8_t> & bytes) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write((const char *) bytes.data(), (std::streamsize) bytes.size());
}

// ---- loading modes -------------------------------------------------------------------------
enum class Mode { META, NO_ALLOC, READ, MMAP };
const Mode ALL_MODES[] = { Mode::META, Mode::NO_ALLOC, Mode::READ, Mode::MMAP };

const char * mode_name(Mode m) {
    switch (m) {
        case Mode::META:     return "metadata only";
        case Mode::NO_ALLOC: return "no_alloc with ggml context";
        case Mode::READ:     return "read";
        default:             return "mmap";
    }
}

// A loaded file: the gguf context and (unless META) the ggml context, both freed at scope exit.
struct Loaded {
    gguf_context * gguf = nullptr;
    ggml_context * ggml = nullptr;
    Loaded(const std::string & path, Mode mode) {
        gguf_init_params p = { mode == Mode::META || mode == Mode::NO_ALLOC, mode == Mode::META ? nullptr : &ggml,
                               mode == Mode::MMAP };
        gguf = gguf_init_from_file(path.c_str(), p);
    }
    ~Loaded() {
        gguf_free(gguf);
        ggml_free(ggml);
    }
    Loaded(const Loaded &) = delete;
    Loaded & operator=(const Loaded &) = delete;
};

// ---- a byte-level GGUF builder, for files broken on purpose --------------------------------
struct Bytes {
    std::vector<uint8_t> b;
    Bytes & raw(const void * p, size_t n) {
        b.insert(b.end(), (const uint8_t *) p, (const uint8_t *) p + n);
        return *this;
    }
    Bytes & u32(uint32_t v) { return raw(&v, 4); }
    Bytes & u64(uint64_t v) { return raw(&v, 8); }
    Bytes & str(const std::string & s) { return u64(s.size()).raw(s.data(), s.size()); }
};

struct TensorSpec {
    std::string name;
    std::vector<uint64_t> ne;
    uint32_t type;
    uint64_t offset;
};

// A small valid file: 3 key-value pairs, two F32 tensors of 32 bytes each, so the data section
// ends exactly at the end of the file (no trailing padding: every truncation breaks something).
struct FileSpec {
    char magic[4] = {'G', 'G', 'U', 'F'};
    uint32_t version = 3;
    std::vector<std::function<void(Bytes &)>> kvs;
    std::vector<TensorSpec> tensors;
    int64_t n_kv = -1;       // -1: kvs.size()
    int64_t n_tensors = -1;  // -1: tensors.size()
    uint64_t alignment = 32;
    int64_t data_size = -1;  // -1: up to the end of the last tensor

    FileSpec() {
        kvs.push_back(kv_str("general.architecture", "llama"));
        kvs.push_back(kv_u32("test.u32", 7));
        kvs.push_back([](Bytes & b) { b.str("test.arr").u32(GGUF_TYPE_ARRAY).u32(GGUF_TYPE_INT32).u64(3).u32(1).u32(2).u32(3); });
        tensors.push_back({"a", {8}, GGML_TYPE_F32, 0});
        tensors.push_back({"b", {4, 2}, GGML_TYPE_F32, 32});
    }

    static std::function<void(Bytes &)> kv_u32(const std::string & key, uint32_t v) {
        return [=](Bytes & b) { b.str(key).u32(GGUF_TYPE_UINT32).u32(v); };
    }
    static std::function<void(Bytes &)> kv_str(const std::string & key, const std::string & v) {
        return [=](Bytes & b) { b.str(key).u32(GGUF_TYPE_STRING).str(v); };
    }

    std::vector<uint8_t> build() const {
        Bytes b;
        b.raw(magic, 4).u32(version);
        b.u64(n_tensors >= 0 ? (uint64_t) n_tensors : tensors.size());
        b.u64(n_kv >= 0 ? (uint64_t) n_kv : kvs.size());
        for (const auto & kv : kvs) kv(b);
        uint64_t end = 0;
        for (const TensorSpec & t : tensors) {
            b.str(t.name).u32((uint32_t) t.ne.size());
            for (uint64_t n : t.ne) b.u64(n);
            b.u32(t.type).u64(t.offset);
            if (ggml_type_is_valid((int) t.type) && data_size < 0) {
                uint64_t n = 1;
                for (uint64_t x : t.ne) n *= x;
                end = std::max(end, t.offset + n / ggml_blck_size((ggml_type) t.type) * ggml_type_size((ggml_type) t.type));
            }
        }
        b.b.resize((b.b.size() + alignment - 1) / alignment * alignment, 0);
        const uint64_t n_data = data_size >= 0 ? (uint64_t) data_size : end;
        for (uint64_t i = 0; i < n_data; i++) b.b.push_back((uint8_t) (i * 7 + 1));
        return b.b;
    }
};

// Every loading mode returns NULL, sets no ggml context, and prints a message containing `msg`.
void expect_rejected(const std::vector<uint8_t> & bytes, const std::string & msg) {
    const std::string path = temp_path("bad.gguf");
    write_bytes(path, bytes);
    for (Mode mode : ALL_MODES) {
        testing::internal::CaptureStderr();
        Loaded f(path, mode);
        const std::string err = testing::internal::GetCapturedStderr();
        EXPECT_EQ(f.gguf, nullptr) << mode_name(mode);
        EXPECT_EQ(f.ggml, nullptr) << mode_name(mode);
        EXPECT_NE(err.find(msg), std::string::npos) << mode_name(mode) << ": expected a message with '" << msg
                                                    << "', got: " << err;
        EXPECT_NE(err.find(path), std::string::npos) << "the message names the file: " << err;
    }
    unlink(path.c_str());
}

// ---- the round-trip fixture ----------------------------------------------------------------
template <typename T> std::vector<uint8_t> as_bytes(const std::vector<T> & v) {
    return std::vector<uint8_t>((const uint8_t *) v.data(), (const uint8_t *) (v.data() + v.size()));
}

const std::vector<uint8_t>  ARR_U8   = {1, 2, 255};
const std::vector<int8_t>   ARR_I8   = {-128, 0, 127, 5};
const std::vector<uint16_t> ARR_U16  = {0, 65535};
const std::vector<int16_t>  ARR_I16  = {-32768, 32767, 1};
const std::vector<uint32_t> ARR_U32  = {4000000000u, 1, 2, 3, 4};
const std::vector<int32_t>  ARR_I32  = {-2000000000, 2000000000};
const std::vector<float>    ARR_F32  = {1.5f, -0.0f, 3.0e38f};
const std::vector<uint8_t>  ARR_BOOL = {1, 0, 1};
const std::vector<uint64_t> ARR_U64  = {UINT64_MAX, 0};
const std::vector<int64_t>  ARR_I64  = {INT64_MIN, INT64_MAX, -1};
const std::vector<double>   ARR_F64  = {1e-300, -2.5};
const std::vector<const char *> ARR_STR = {"alpha", "", "\xc3\xbc" "n" "\xc3\xaf" "c" "\xc3\xb6" "de", "a much longer string value"};

struct ArrCase { const char * key; gguf_type type; std::vector<uint8_t> bytes; };
std::vector<ArrCase> arr_cases() {
    return {
        {"arr.u8", GGUF_TYPE_UINT8, as_bytes(ARR_U8)},       {"arr.i8", GGUF_TYPE_INT8, as_bytes(ARR_I8)},
        {"arr.u16", GGUF_TYPE_UINT16, as_bytes(ARR_U16)},    {"arr.i16", GGUF_TYPE_INT16, as_bytes(ARR_I16)},
        {"arr.u32", GGUF_TYPE_UINT32, as_bytes(ARR_U32)},    {"arr.i32", GGUF_TYPE_INT32, as_bytes(ARR_I32)},
        {"arr.f32", GGUF_TYPE_FLOAT32, as_bytes(ARR_F32)},   {"arr.bool", GGUF_TYPE_BOOL, as_bytes(ARR_BOOL)},
        {"arr.u64", GGUF_TYPE_UINT64, as_bytes(ARR_U64)},    {"arr.i64", GGUF_TYPE_INT64, as_bytes(ARR_I64)},
        {"arr.f64", GGUF_TYPE_FLOAT64, as_bytes(ARR_F64)},   {"arr.empty", GGUF_TYPE_INT32, {}},
    };
}
size_t elem_size(gguf_type t) {
    switch (t) {
        case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16: return 2;
        case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_FLOAT32: return 4;
        case GGUF_TYPE_UINT64: case GGUF_TYPE_INT64: case GGUF_TYPE_FLOAT64: return 8;
        default: return 1;
    }
}

// Every value type, arrays of each (strings and an empty one too) and tensors of several types.
struct Model {
    tu::Ctx ctx{8u << 20};
    gguf_context * gguf = gguf_init_empty();
    std::map<std::string, std::vector<uint8_t>> data;  // tensor bytes by name

    explicit Model(uint32_t alignment) {
        if (alignment != GGUF_DEFAULT_ALIGNMENT) gguf_set_val_u32(gguf, GGUF_KEY_GENERAL_ALIGNMENT, alignment);
        gguf_set_val_u8(gguf, "val.u8", 200);
        gguf_set_val_i8(gguf, "val.i8", -100);
        gguf_set_val_u16(gguf, "val.u16", 60000);
        gguf_set_val_i16(gguf, "val.i16", -30000);
        gguf_set_val_u32(gguf, "val.u32", 4000000000u);
        gguf_set_val_i32(gguf, "val.i32", -2000000000);
        gguf_set_val_f32(gguf, "val.f32", 3.25f);
        gguf_set_val_bool(gguf, "val.bool", true);
        gguf_set_val_str(gguf, "val.str", "hello, w\xc3\xb6rld");
        gguf_set_val_str(gguf, "val.str_empty", "");
        gguf_set_val_u64(gguf, "val.u64", (1ull << 60) + 5);
        gguf_set_val_i64(gguf, "val.i64", -(1ll << 60));
        gguf_set_val_f64(gguf, "val.f64", -1.5e300);
        for (const ArrCase & a : arr_cases()) {
            gguf_set_arr_data(gguf, a.key, a.type, a.bytes.data(), a.bytes.size() / elem_size(a.type));
        }
        gguf_set_arr_str(gguf, "arr.str", const_cast<const char **>(ARR_STR.data()), ARR_STR.size());
        gguf_set_arr_str(gguf, "arr.str_empty", nullptr, 0);

        std::mt19937 rng(1234);
        add(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 7, 3), "t.f32", rng);
        add(ggml_new_tensor_3d(ctx, GGML_TYPE_F16, 5, 2, 3), "t.f16", rng);
        add(ggml_new_tensor_4d(ctx, GGML_TYPE_BF16, 4, 3, 2, 2), "t.bf16", rng);
        add(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 0, 4), "t.empty", rng);
        add(ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 9), "t.i32", rng);
        add(ggml_new_tensor_2d(ctx, GGML_TYPE_Q8_0, 64, 3), "t.q8_0", rng);
        add(ggml_new_tensor_2d(ctx, GGML_TYPE_Q4_K, 256, 2), "t.q4_K", rng);
    }
    ~Model() { gguf_free(gguf); }

    // Raw random bytes: a quantized tensor is just bytes of the right size here.
    void add(ggml_tensor * t, const char * name, std::mt19937 & rng) {
        ggml_set_name(t, name);
        std::vector<uint8_t> & d = data[name];
        d.resize(ggml_nbytes(t));
        for (uint8_t & x : d) x = (uint8_t) rng();
        if (!d.empty()) memcpy(t->data, d.data(), d.size());
        gguf_add_tensor(gguf, t);
    }
};

// The key-value pairs of `got` equal those of `want`, in order, through the typed getters.
void expect_same_kv(const gguf_context * want, const gguf_context * got) {
    ASSERT_EQ(gguf_get_n_kv(got), gguf_get_n_kv(want));
    for (int64_t i = 0; i < gguf_get_n_kv(want); i++) {
        const std::string key = gguf_get_key(want, i);
        SCOPED_TRACE(key);
        EXPECT_EQ(gguf_get_key(got, i), key);
        EXPECT_EQ(gguf_find_key(got, key.c_str()), i);
        const gguf_type type = gguf_get_kv_type(want, i);
        ASSERT_EQ(gguf_get_kv_type(got, i), type);
        switch (type) {
            case GGUF_TYPE_UINT8:   EXPECT_EQ(gguf_get_val_u8(got, i), gguf_get_val_u8(want, i)); break;
            case GGUF_TYPE_INT8:    EXPECT_EQ(gguf_get_val_i8(got, i), gguf_get_val_i8(want, i)); break;
            case GGUF_TYPE_UINT16:  EXPECT_EQ(gguf_get_val_u16(got, i), gguf_get_val_u16(want, i)); break;
            case GGUF_TYPE_INT16:   EXPECT_EQ(gguf_get_val_i16(got, i), gguf_get_val_i16(want, i)); break;
            case GGUF_TYPE_UINT32:  EXPECT_EQ(gguf_get_val_u32(got, i), gguf_get_val_u32(want, i)); break;
            case GGUF_TYPE_INT32:   EXPECT_EQ(gguf_get_val_i32(got, i), gguf_get_val_i32(want, i)); break;
            case GGUF_TYPE_FLOAT32: EXPECT_EQ(gguf_get_val_f32(got, i), gguf_get_val_f32(want, i)); break;
            case GGUF_TYPE_BOOL:    EXPECT_EQ(gguf_get_val_bool(got, i), gguf_get_val_bool(want, i)); break;
            case GGUF_TYPE_STRING:  EXPECT_STREQ(gguf_get_val_str(got, i), gguf_get_val_str(want, i)); break;
            case GGUF_TYPE_UINT64:  EXPECT_EQ(gguf_get_val_u64(got, i), gguf_get_val_u64(want, i)); break;
            case GGUF_TYPE_INT64:   EXPECT_EQ(gguf_get_val_i64(got, i), gguf_get_val_i64(want, i)); break;
            case GGUF_TYPE_FLOAT64: EXPECT_EQ(gguf_get_val_f64(got, i), gguf_get_val_f64(want, i)); break;
            case GGUF_TYPE_ARRAY: {
                const gguf_type at = gguf_get_arr_type(want, i);
                ASSERT_EQ(gguf_get_arr_type(got, i), at);
                const size_t n = gguf_get_arr_n(want, i);
                ASSERT_EQ(gguf_get_arr_n(got, i), n);
                if (at == GGUF_TYPE_STRING) {
                    for (size_t j = 0; j < n; j++) EXPECT_STREQ(gguf_get_arr_str(got, i, j), gguf_get_arr_str(want, i, j));
                } else if (n > 0) {
                    EXPECT_EQ(memcmp(gguf_get_arr_data(got, i), gguf_get_arr_data(want, i), n * elem_size(at)), 0);
                }
                break;
            }
            default: ADD_FAILURE() << "unexpected type " << type;
        }
        if (type != GGUF_TYPE_ARRAY && type != GGUF_TYPE_STRING) {
            EXPECT_EQ(memcmp(gguf_get_val_data(got, i), gguf_get_val_data(want, i), elem_size(type)), 0);
        }
    }
}

class RoundTrip : public testing::TestWithParam<uint32_t> {};

TEST_P(RoundTrip, AllTypesReadAndMmap) {
    const uint32_t alignment = GetParam();
    Model m(alignment);
    ASSERT_EQ(gguf_get_alignment(m.gguf), alignment);
    const std::string path_a = temp_path("a.gguf");
    ASSERT_TRUE(gguf_write_to_file(m.gguf, path_a.c_str(), false));
    const std::vector<uint8_t> file_a = read_bytes(path_a);

    // The file: the metadata, then each tensor at its offset, the whole padded to the alignment.
    const size_t meta_size = gguf_get_meta_size(m.gguf);
    ASSERT_EQ(meta_size % alignment, 0u);
    std::vector<uint8_t> meta(meta_size);
    gguf_get_meta_data(m.gguf, meta.data());
    ASSERT_GE(file_a.size(), meta_size);
    EXPECT_TRUE(std::equal(meta.begin(), meta.end(), file_a.begin()));
    EXPECT_EQ(memcmp(file_a.data(), "GGUF\x03\0\0\0", 8), 0);
    EXPECT_EQ(file_a.size() % alignment, 0u);
    for (int64_t i = 0; i < gguf_get_n_tensors(m.gguf); i++) {
        const size_t off = gguf_get_tensor_offset(m.gguf, i);
        EXPECT_EQ(off % alignment, 0u);
        const std::vector<uint8_t> & d = m.data[gguf_get_tensor_name(m.gguf, i)];
        ASSERT_LE(meta_size + off + d.size(), file_a.size());
        EXPECT_TRUE(std::equal(d.begin(), d.end(), file_a.begin() + (ptrdiff_t) (meta_size + off)));
    }

    for (Mode mode : {Mode::READ, Mode::MMAP}) {
        SCOPED_TRACE(mode_name(mode));
        Loaded f(path_a, mode);
        ASSERT_NE(f.gguf, nullptr);
        ASSERT_NE(f.ggml, nullptr);
        EXPECT_EQ(gguf_get_version(f.gguf), 3u);
        EXPECT_EQ(gguf_get_alignment(f.gguf), alignment);
        EXPECT_EQ(gguf_get_data_offset(f.gguf), meta_size);
        expect_same_kv(m.gguf, f.gguf);
        ASSERT_EQ(gguf_get_n_tensors(f.gguf), gguf_get_n_tensors(m.gguf));
        const char * data = (const char *) gguf_get_data(f.gguf);
        ASSERT_NE(data, nullptr);
        int n_ggml = 0;
        for (ggml_tensor * t = ggml_get_first_tensor(f.ggml); t; t = ggml_get_next_tensor(f.ggml, t)) n_ggml++;
        EXPECT_EQ(n_ggml, gguf_get_n_tensors(m.gguf)) << "one ggml tensor per tensor info";
        for (int64_t i = 0; i < gguf_get_n_tensors(m.gguf); i++) {
            const std::string name = gguf_get_tensor_name(m.gguf, i);
            SCOPED_TRACE(name);
            EXPECT_EQ(gguf_get_tensor_name(f.gguf, i), name);
            EXPECT_EQ(gguf_find_tensor(f.gguf, name.c_str()), i);
            EXPECT_EQ(gguf_get_tensor_type(f.gguf, i), gguf_get_tensor_type(m.gguf, i));
            EXPECT_EQ(gguf_get_tensor_offset(f.gguf, i), gguf_get_tensor_offset(m.gguf, i));
            EXPECT_EQ(gguf_get_tensor_size(f.gguf, i), gguf_get_tensor_size(m.gguf, i));
            const ggml_tensor * orig = ggml_get_tensor(m.ctx, name.c_str());
            const ggml_tensor * t = ggml_get_tensor(f.ggml, name.c_str());
            ASSERT_NE(t, nullptr);
            EXPECT_EQ(t->type, orig->type);
            for (int d = 0; d < GGML_MAX_DIMS; d++) EXPECT_EQ(t->ne[d], orig->ne[d]);
            EXPECT_EQ(ggml_nbytes(t), gguf_get_tensor_size(f.gguf, i));
            EXPECT_EQ(t->data, data + gguf_get_tensor_offset(f.gguf, i));
            const std::vector<uint8_t> & d = m.data[name];
            EXPECT_TRUE(d.empty() || memcmp(t->data, d.data(), d.size()) == 0);
        }
        // Writing what was read gives back the same bytes.
        const std::string path_b = temp_path("b.gguf");
        ASSERT_TRUE(gguf_write_to_file(f.gguf, path_b.c_str(), false));
        EXPECT_TRUE(read_bytes(path_b) == file_a);
        unlink(path_b.c_str());
    }
    unlink(path_a.c_str());
}

INSTANTIATE_TEST_SUITE_P(Alignment, RoundTrip, testing::Values(32u, 64u, 1u, 4096u));

// Read into a buffer, the data belongs to the ggml context: it outlives the gguf context.
TEST(Gguf, ReadDataOutlivesGgufContext) {
    Model m(32);
    const std::string path = temp_path("c.gguf");
    ASSERT_TRUE(gguf_write_to_file(m.gguf, path.c_str(), false));
    ggml_context * ctx = nullptr;
    gguf_init_params p = { false, &ctx, false };
    gguf_context * g = gguf_init_from_file(path.c_str(), p);
    ASSERT_NE(g, nullptr);
    gguf_free(g);
    unlink(path.c_str());
    for (const auto & kv : m.data) {
        const ggml_tensor * t = ggml_get_tensor(ctx, kv.first.c_str());
        ASSERT_NE(t, nullptr);
        EXPECT_TRUE(kv.second.empty() || memcmp(t->data, kv.second.data(), kv.second.size()) == 0) << kv.first;
    }
    ggml_free(ctx);
}

TEST(Gguf, MetadataOnlyAndNoAlloc) {
    Model m(64);
    const std::string path = temp_path("d.gguf");
    ASSERT_TRUE(gguf_write_to_file(m.gguf, path.c_str(), false));
    {
        Loaded f(path, Mode::META);
        ASSERT_NE(f.gguf, nullptr);
        expect_same_kv(m.gguf, f.gguf);
        EXPECT_EQ(gguf_get_n_tensors(f.gguf), gguf_get_n_tensors(m.gguf));
        EXPECT_EQ(gguf_get_data(f.gguf), nullptr);
    }
    {
        Loaded f(path, Mode::NO_ALLOC);
        ASSERT_NE(f.gguf, nullptr);
        ASSERT_NE(f.ggml, nullptr);
        EXPECT_EQ(gguf_get_data(f.gguf), nullptr);
        for (int64_t i = 0; i < gguf_get_n_tensors(f.gguf); i++) {
            const ggml_tensor * t = ggml_get_tensor(f.ggml, gguf_get_tensor_name(f.gguf, i));
            ASSERT_NE(t, nullptr);
            EXPECT_EQ(t->data, nullptr);
            EXPECT_EQ(t->type, gguf_get_tensor_type(f.gguf, i));
        }
        // Without data only the metadata can be written; a failed write leaves nothing behind.
        const std::string meta_path = temp_path("meta.gguf");
        ASSERT_TRUE(gguf_write_to_file(f.gguf, meta_path.c_str(), true));
        const std::vector<uint8_t> meta = read_bytes(meta_path), full = read_bytes(path);
        EXPECT_EQ(meta.size(), gguf_get_meta_size(f.gguf));
        EXPECT_TRUE(std::equal(meta.begin(), meta.end(), full.begin()));
        const std::string no_path = temp_path("no.gguf");
        testing::internal::CaptureStderr();
        EXPECT_FALSE(gguf_write_to_file(f.gguf, no_path.c_str(), false));
        EXPECT_NE(testing::internal::GetCapturedStderr().find("has no data"), std::string::npos);
        EXPECT_FALSE(tu::file_exists(no_path));
        unlink(meta_path.c_str());
    }
    // mmap without a ggml context: gguf_get_data still points at the mapped data section.
    {
        gguf_init_params p = { false, nullptr, true };
        gguf_context * g = gguf_init_from_file(path.c_str(), p);
        ASSERT_NE(g, nullptr);
        const char * data = (const char *) gguf_get_data(g);
        ASSERT_NE(data, nullptr);
        for (int64_t i = 0; i < gguf_get_n_tensors(g); i++) {
            const std::vector<uint8_t> & d = m.data[gguf_get_tensor_name(g, i)];
            EXPECT_TRUE(d.empty() || memcmp(data + gguf_get_tensor_offset(g, i), d.data(), d.size()) == 0);
        }
        gguf_free(g);
    }
    unlink(path.c_str());
}

// ---- API semantics -------------------------------------------------------------------------
TEST(Gguf, EmptyContext) {
    gguf_context * g = gguf_init_empty();
    EXPECT_EQ(gguf_get_version(g), 3u);
    EXPECT_EQ(gguf_get_alignment(g), 32u);
    EXPECT_EQ(gguf_get_n_kv(g), 0);
    EXPECT_EQ(gguf_get_n_tensors(g), 0);
    EXPECT_EQ(gguf_find_key(g, "x"), -1);
    EXPECT_EQ(gguf_find_tensor(g, "x"), -1);
    EXPECT_EQ(gguf_get_data(g), nullptr);
    EXPECT_EQ(gguf_get_meta_size(g), 32u);  // 24 bytes of header, padded
    const std::string path = temp_path("empty.gguf");
    ASSERT_TRUE(gguf_write_to_file(g, path.c_str(), false));
    EXPECT_EQ(read_bytes(path).size(), 32u);
    gguf_free(g);
    Loaded f(path, Mode::READ);
    ASSERT_NE(f.gguf, nullptr);
    EXPECT_EQ(gguf_get_n_kv(f.gguf), 0);
    EXPECT_EQ(gguf_get_n_tensors(f.gguf), 0);
    unlink(path.c_str());
    gguf_free(nullptr);
}

TEST(Gguf, TypeNames) {
    const char * names[GGUF_TYPE_COUNT] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr", "u64", "i64", "f64"};
    for (int t = 0; t < GGUF_TYPE_COUNT; t++) EXPECT_STREQ(gguf_type_name((gguf_type) t), names[t]);
    EXPECT_EQ(gguf_type_name(GGUF_TYPE_COUNT), nullptr);
}

TEST(Gguf, SetReplacesAndMovesToBack) {
    gguf_context * g = gguf_init_empty();
    gguf_set_val_u32(g, "a", 1);
    gguf_set_val_str(g, "b", "bee");
    gguf_set_val_i32(g, "a", -2);
    ASSERT_EQ(gguf_get_n_kv(g), 2);
    EXPECT_EQ(gguf_find_key(g, "b"), 0);
    EXPECT_EQ(gguf_find_key(g, "a"), 1);
    EXPECT_EQ(gguf_get_kv_type(g, 1), GGUF_TYPE_INT32);
    EXPECT_EQ(gguf_get_val_i32(g, 1), -2);
    // The key and value may point into the context itself.
    gguf_set_val_str(g, gguf_get_key(g, 0), gguf_get_val_str(g, 0));
    EXPECT_STREQ(gguf_get_val_str(g, gguf_find_key(g, "b")), "bee");
    EXPECT_EQ(gguf_remove_key(g, "a"), 0);
    EXPECT_EQ(gguf_remove_key(g, "a"), -1);
    EXPECT_EQ(gguf_get_n_kv(g), 1);
    gguf_free(g);
}

TEST(Gguf, SetKvCopiesEveryPair) {
    Model m(64);
    gguf_context * g = gguf_init_empty();
    gguf_set_val_str(g, "val.u8", "will be replaced");
    gguf_set_val_str(g, "own", "kept");
    gguf_set_kv(g, m.gguf);
    EXPECT_EQ(gguf_get_n_kv(g), gguf_get_n_kv(m.gguf) + 1);
    EXPECT_EQ(gguf_get_alignment(g), 64u);
    EXPECT_STREQ(gguf_get_val_str(g, 0), "kept");
    gguf_remove_key(g, "own");
    expect_same_kv(m.gguf, g);
    gguf_remove_key(g, GGUF_KEY_GENERAL_ALIGNMENT);
    EXPECT_EQ(gguf_get_alignment(g), 32u);
    gguf_free(g);
}

TEST(Gguf, TensorLayout) {
    tu::Ctx ctx(1 << 20);
    gguf_context * g = gguf_init_empty();
    for (const char * name : {"x", "y", "z"}) {
        ggml_tensor * t = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 64, 2);  // 512 bytes
        ggml_set_name(t, name);
        gguf_add_tensor(g, t);
    }
    EXPECT_EQ(gguf_get_tensor_offset(g, 0), 0u);
    EXPECT_EQ(gguf_get_tensor_offset(g, 1), 512u);
    EXPECT_EQ(gguf_get_tensor_offset(g, 2), 1024u);
    gguf_set_tensor_type(g, "y", GGML_TYPE_Q8_0);  // 2 rows of 2 blocks of 34 bytes = 136, padded to 160
    EXPECT_EQ(gguf_get_tensor_type(g, 1), GGML_TYPE_Q8_0);
    EXPECT_EQ(gguf_get_tensor_size(g, 1), 136u);
    EXPECT_EQ(gguf_get_tensor_offset(g, 2), 672u);
    gguf_set_val_u32(g, GGUF_KEY_GENERAL_ALIGNMENT, 256);  // offsets follow the new alignment
    EXPECT_EQ(gguf_get_tensor_offset(g, 1), 512u);
    EXPECT_EQ(gguf_get_tensor_offset(g, 2), 768u);

    // gguf_set_tensor_data: the bytes written come from the pointer given.
    std::vector<uint8_t> q(136);
    for (size_t i = 0; i < q.size(); i++) q[i] = (uint8_t) i;
    gguf_set_tensor_data(g, "y", q.data());
    const std::string path = temp_path("layout.gguf");
    ASSERT_TRUE(gguf_write_to_file(g, path.c_str(), false));
    Loaded f(path, Mode::READ);
    ASSERT_NE(f.gguf, nullptr);
    const ggml_tensor * y = ggml_get_tensor(f.ggml, "y");
    ASSERT_NE(y, nullptr);
    EXPECT_EQ(y->type, GGML_TYPE_Q8_0);
    EXPECT_EQ(memcmp(y->data, q.data(), q.size()), 0);
    EXPECT_EQ(gguf_get_tensor_offset(f.gguf, 2), 768u);
    unlink(path.c_str());
    gguf_free(g);
}

TEST(Gguf, WriteIsAllOrNothing) {
    const std::string path = temp_path("keep.gguf");
    write_bytes(path, {'k', 'e', 'e', 'p'});
    tu::Ctx ctx(1 << 20, /*no_alloc=*/true);
    gguf_context * g = gguf_init_empty();
    ggml_tensor * t = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 16);
    ggml_set_name(t, "nodata");
    gguf_add_tensor(g, t);
    testing::internal::CaptureStderr();
    EXPECT_FALSE(gguf_write_to_file(g, path.c_str(), false));
    testing::internal::GetCapturedStderr();
    EXPECT_TRUE(read_bytes(path) == std::vector<uint8_t>({'k', 'e', 'e', 'p'}));
    EXPECT_TRUE(TempDir::list() == std::vector<std::string>{"keep.gguf"}) << "no temporary file left behind";

    testing::internal::CaptureStderr();
    EXPECT_FALSE(gguf_write_to_file(g, (TempDir::path + "/no/such/dir/x.gguf").c_str(), true));
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("no/such/dir/x.gguf"), std::string::npos) << err;

    // Replacing an existing file works and leaves only the new file.
    ASSERT_TRUE(gguf_write_to_file(g, path.c_str(), true));
    EXPECT_EQ(read_bytes(path).size(), gguf_get_meta_size(g));
    EXPECT_TRUE(TempDir::list() == std::vector<std::string>{"keep.gguf"});
    unlink(path.c_str());
    gguf_free(g);
}

// Programming errors abort, as in ggml.
TEST(GgufDeathTest, WrongTypeOrIndexAborts) {
    gguf_context * g = gguf_init_empty();
    gguf_set_val_str(g, "s", "x");
    const char * strs[] = {"a"};
    gguf_set_arr_str(g, "as", strs, 1);
    EXPECT_DEATH(gguf_get_val_u32(g, 0), "not a single u32");
    EXPECT_DEATH(gguf_get_val_str(g, 5), "GGML_ASSERT");
    EXPECT_DEATH(gguf_get_val_str(g, -1), "GGML_ASSERT");
    EXPECT_DEATH(gguf_get_arr_data(g, 1), "not an array of numbers");
    EXPECT_DEATH(gguf_get_arr_n(g, 0), "not an array");
    EXPECT_DEATH(gguf_get_arr_str(g, 1, 1), "GGML_ASSERT");
    EXPECT_DEATH(gguf_set_val_u32(g, GGUF_KEY_GENERAL_ALIGNMENT, 48), "power of two");
    EXPECT_DEATH(gguf_set_val_u64(g, GGUF_KEY_GENERAL_ALIGNMENT, 64), "power of two");
    EXPECT_DEATH(gguf_set_arr_data(g, "x", GGUF_TYPE_STRING, nullptr, 0), "not a number");
    tu::Ctx ctx(1 << 20);
    ggml_tensor * t = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4);
    ggml_set_name(t, "t");
    gguf_add_tensor(g, t);
    EXPECT_DEATH(gguf_add_tensor(g, t), "duplicate tensor name");
    EXPECT_DEATH(gguf_set_tensor_type(g, "t", GGML_TYPE_Q8_0), "block size");
    EXPECT_DEATH(gguf_get_tensor_name(g, 1), "GGML_ASSERT");
    gguf_free(g);
}

// ---- malformed files -----------------------------------------------------------------------
TEST(GgufMalformed, HandBuiltBaselineIsValid) {
    // The baseline every malformed case below starts from must itself load.
    const std::string path = temp_path("good.gguf");
    write_bytes(path, FileSpec().build());
    for (Mode mode : ALL_MODES) {
        Loaded f(path, mode);
        ASSERT_NE(f.gguf, nullptr) << mode_name(mode);
        EXPECT_EQ(gguf_get_n_kv(f.gguf), 3);
        EXPECT_EQ(gguf_get_n_tensors(f.gguf), 2);
        EXPECT_EQ(gguf_get_tensor_offset(f.gguf, 1), 32u);
        if (mode == Mode::READ || mode == Mode::MMAP) {
            EXPECT_EQ(((const uint8_t *) ggml_get_tensor(f.ggml, "b")->data)[1], 32 * 7 + 8);
        }
    }
    unlink(path.c_str());
}

TEST(GgufMalformed, Version2IsRead) {
    FileSpec s;
    s.version = 2;
    const std::string path = temp_path("v2.gguf");
    write_bytes(path, s.build());
    Loaded f(path, Mode::READ);
    ASSERT_NE(f.gguf, nullptr);
    EXPECT_EQ(gguf_get_version(f.gguf), 2u);
    unlink(path.c_str());
}

TEST(GgufMalformed, MissingFile) {
    expect_rejected({}, "truncated");  // an empty file
    testing::internal::CaptureStderr();
    gguf_init_params p = { false, nullptr, false };
    EXPECT_EQ(gguf_init_from_file(temp_path("does-not-exist.gguf").c_str(), p), nullptr);
    EXPECT_NE(testing::internal::GetCapturedStderr().find("cannot open"), std::string::npos);
    testing::internal::CaptureStderr();
    EXPECT_EQ(gguf_init_from_file(TempDir::path.c_str(), p), nullptr);
    EXPECT_NE(testing::internal::GetCapturedStderr().find("not a regular file"), std::string::npos);
}

// A good file written by gguf_write_to_file, then corrupted at known header positions.
std::vector<uint8_t> written_file() {
    Model m(32);
    const std::string path = temp_path("w.gguf");
    EXPECT_TRUE(gguf_write_to_file(m.gguf, path.c_str(), false));
    std::vector<uint8_t> b = read_bytes(path);
    unlink(path.c_str());
    return b;
}
void put_u32(std::vector<uint8_t> & b, size_t at, uint32_t v) { memcpy(&b[at], &v, 4); }
void put_u64(std::vector<uint8_t> & b, size_t at, uint64_t v) { memcpy(&b[at], &v, 8); }

TEST(GgufMalformed, BadMagic) {
    std::vector<uint8_t> b = written_file();
    b[0] = 'X';
    expect_rejected(b, "bad magic");
}

TEST(GgufMalformed, Version1) {
    std::vector<uint8_t> b = written_file();
    put_u32(b, 4, 1);
    expect_rejected(b, "version 1 is not supported");
}

TEST(GgufMalformed, Version4AndBigEndian) {
    std::vector<uint8_t> b = written_file();
    put_u32(b, 4, 4);
    expect_rejected(b, "unknown GGUF version 4");
    put_u32(b, 4, 0x03000000);
    expect_rejected(b, "big-endian");
}

TEST(GgufMalformed, HugeTensorCount) {
    std::vector<uint8_t> b = written_file();
    put_u64(b, 8, UINT64_MAX);
    expect_rejected(b, "tensor count");
    put_u64(b, 8, 1ull << 40);
    expect_rejected(b, "tensor count");
}

TEST(GgufMalformed, HugeKvCount) {
    std::vector<uint8_t> b = written_file();
    put_u64(b, 16, UINT64_MAX / 2);
    expect_rejected(b, "key-value count");
    put_u64(b, 16, 1ull << 32);
    expect_rejected(b, "key-value count");
}

TEST(GgufMalformed, MoreCountedThanPresent) {
    // Counts that fit in the file size but name more items than there are.
    FileSpec s;
    s.n_kv = 5;
    expect_rejected(s.build(), "");
    s = FileSpec();
    s.n_tensors = 3;
    expect_rejected(s.build(), "");
}

size_t count_of(const std::string & text, const std::string & what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) n++;
    return n;
}

TEST(GgufMalformed, EveryTruncationIsRejected) {
    const std::vector<uint8_t> good = FileSpec().build();
    const std::string path = temp_path("trunc.gguf");
    write_bytes(path, good);
    testing::internal::CaptureStderr();
    size_t n_loads = 0;
    // Shrinking one file in place (cheap, unlike rewriting a file per length).
    for (size_t len = good.size(); len-- > 0;) {
        ASSERT_EQ(truncate(path.c_str(), (off_t) len), 0);
        for (Mode mode : ALL_MODES) {
            Loaded f(path, mode);
            n_loads++;
            EXPECT_EQ(f.gguf, nullptr) << "truncated to " << len << " of " << good.size() << " bytes, " << mode_name(mode);
        }
    }
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(count_of(err, "gguf_init_from_file: " + path + ": "), n_loads) << "one message per rejected load";
    unlink(path.c_str());
}

TEST(GgufMalformed, EveryTruncationOfAWrittenFileIsRejected) {
    // The file as written ends with padding; all cuts before the last tensor's end must fail.
    Model m(32);
    const std::string full = temp_path("full.gguf"), path = temp_path("trunc2.gguf");
    ASSERT_TRUE(gguf_write_to_file(m.gguf, full.c_str(), false));
    const std::vector<uint8_t> good = read_bytes(full);
    size_t end = 0;
    for (int64_t i = 0; i < gguf_get_n_tensors(m.gguf); i++) {
        end = std::max(end, gguf_get_meta_size(m.gguf) + gguf_get_tensor_offset(m.gguf, i) + gguf_get_tensor_size(m.gguf, i));
    }
    write_bytes(path, good);
    testing::internal::CaptureStderr();
    size_t n_loads = 0;
    for (size_t len = end; len-- > 0;) {
        ASSERT_EQ(truncate(path.c_str(), (off_t) len), 0);
        Loaded f(path, len % 2 ? Mode::MMAP : Mode::READ);
        n_loads++;
        EXPECT_EQ(f.gguf, nullptr) << "truncated to " << len;
    }
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(count_of(err, "gguf_init_from_file: " + path + ": "), n_loads);
    unlink(full.c_str());
    unlink(path.c_str());
}

TEST(GgufMalformed, HugeStringLength) {
    FileSpec s;
    s.kvs[0] = [](Bytes & b) { b.u64(UINT64_MAX).raw("general", 7); };  // key length
    expect_rejected(s.build(), "string length 18446744073709551615");
    s = FileSpec();
    s.kvs[0] = [](Bytes & b) { b.str("k").u32(GGUF_TYPE_STRING).u64(1ull << 62).raw("abc", 3); };  // value length
    expect_rejected(s.build(), "exceeds the");
    s = FileSpec();
    s.tensors[0].name = std::string(1000, 'n');  // tensor name longer than GGML_MAX_NAME
    expect_rejected(s.build(), "too long");
}

TEST(GgufMalformed, HugeArrayLength) {
    FileSpec s;
    s.kvs[2] = [](Bytes & b) { b.str("a").u32(GGUF_TYPE_ARRAY).u32(GGUF_TYPE_UINT32).u64(1ull << 62).u32(1); };
    expect_rejected(s.build(), "array length");
    s.kvs[2] = [](Bytes & b) { b.str("a").u32(GGUF_TYPE_ARRAY).u32(GGUF_TYPE_UINT64).u64(UINT64_MAX / 4).u64(1); };
    expect_rejected(s.build(), "array length");
    s.kvs[2] = [](Bytes & b) { b.str("a").u32(GGUF_TYPE_ARRAY).u32(GGUF_TYPE_STRING).u64(1ull << 60).str("x"); };
    expect_rejected(s.build(), "array length");
    // A count that fits the file but strings that do not.
    s.kvs[2] = [](Bytes & b) { b.str("a").u32(GGUF_TYPE_ARRAY).u32(GGUF_TYPE_STRING).u64(2).str("x").u64(1ull << 40); };
    expect_rejected(s.build(), "exceeds the");
}

TEST(GgufMalformed, UnknownKvTypes) {
    FileSpec s;
    s.kvs[1] = [](Bytes & b) { b.str("k").u32(GGUF_TYPE_COUNT).u32(0); };
    expect_rejected(s.build(), "unknown value type 13");
    s.kvs[1] = [](Bytes & b) { b.str("k").u32(0xffffffffu).u32(0); };
    expect_rejected(s.build(), "unknown value type 4294967295");
    s.kvs[1] = [](Bytes & b) { b.str("k").u32(GGUF_TYPE_ARRAY).u32(77).u64(1).u32(0); };
    expect_rejected(s.build(), "unknown array element type 77");
    s.kvs[1] = [](Bytes & b) { b.str("k").u32(GGUF_TYPE_ARRAY).u32(GGUF_TYPE_ARRAY).u64(1).u32(GGUF_TYPE_UINT8).u64(0); };
    expect_rejected(s.build(), "nested arrays");
}

TEST(GgufMalformed, DuplicateKey) {
    FileSpec s;
    s.kvs.push_back(FileSpec::kv_u32("test.u32", 8));
    expect_rejected(s.build(), "duplicate key");
}

TEST(GgufMalformed, DuplicateTensorName) {
    FileSpec s;
    s.tensors[1].name = "a";
    expect_rejected(s.build(), "duplicate tensor name");
}

TEST(GgufMalformed, BadAlignment) {
    for (uint32_t a : {0u, 3u, 48u, 0x80000001u}) {
        FileSpec s;
        s.kvs.push_back(FileSpec::kv_u32(GGUF_KEY_GENERAL_ALIGNMENT, a));
        expect_rejected(s.build(), "not a power of two");
    }
    FileSpec s;
    s.kvs.push_back([](Bytes & b) { b.str(GGUF_KEY_GENERAL_ALIGNMENT).u32(GGUF_TYPE_UINT64).u64(32); });
    expect_rejected(s.build(), "expected u32");
    // Offsets must be multiples of the alignment in force.
    s = FileSpec();
    s.kvs.push_back(FileSpec::kv_u32(GGUF_KEY_GENERAL_ALIGNMENT, 64));
    s.alignment = 64;
    expect_rejected(s.build(), "not a multiple of the alignment 64");
}

TEST(GgufMalformed, BadNDims) {
    FileSpec s;
    s.tensors[1].ne = {1, 1, 1, 1, 8};
    expect_rejected(s.build(), "n_dims = 5");
    s.tensors[1].ne = {};
    expect_rejected(s.build(), "n_dims = 0");
}

TEST(GgufMalformed, BadShapes) {
    FileSpec s;
    s.tensors[1].ne = {1ull << 32, 1ull << 32};
    expect_rejected(s.build(), "overflows int64");
    s.tensors[1].ne = {1ull << 21, 1ull << 21, 1ull << 21};
    expect_rejected(s.build(), "overflows int64");
    s.tensors[1].ne = {UINT64_MAX, 1};  // -1 as int64
    expect_rejected(s.build(), "out of range");
    // Fits int64 elements, but not bytes (8 bytes per F64 element).
    s.tensors[1].ne = {1ull << 61, 1};
    s.tensors[1].type = GGML_TYPE_F64;
    s.data_size = 64;
    expect_rejected(s.build(), "byte size overflows");
    s = FileSpec();
    s.tensors[1].ne = {33, 1};
    s.tensors[1].type = GGML_TYPE_Q8_0;
    s.data_size = 64;
    expect_rejected(s.build(), "not a multiple of the block size 32");
}

TEST(GgufMalformed, UnknownTensorType) {
    for (uint32_t type : {4u, 31u, (uint32_t) GGML_TYPE_COUNT, 1000u}) {
        FileSpec s;
        s.tensors[1].type = type;
        s.data_size = 64;
        expect_rejected(s.build(), "unknown tensor type id " + std::to_string(type));
    }
}

TEST(GgufMalformed, TensorOffsetBeyondFile) {
    FileSpec s;
    s.tensors[1].offset = 1ull << 40;
    s.data_size = 64;
    expect_rejected(s.build(), "extends past the end of the file");
    s.tensors[1].offset = UINT64_MAX - 31;  // offset + size wraps around
    expect_rejected(s.build(), "extends past the end of the file");
}

TEST(GgufMalformed, TensorSizeBeyondFile) {
    FileSpec s;
    s.tensors[1].ne = {4, 3};  // 48 bytes at offset 32: 16 past the end
    s.data_size = 64;
    expect_rejected(s.build(), "extends past the end of the file");
    s.tensors[1].ne = {1ull << 40};  // a size far beyond the file
    expect_rejected(s.build(), "extends past the end of the file");
}

TEST(GgufMalformed, OverlappingTensors) {
    FileSpec s;
    s.tensors[0].ne = {16};  // 64 bytes at 0, overlapping "b" at 32
    s.data_size = 64;
    expect_rejected(s.build(), "overlap");
    s = FileSpec();
    s.tensors[1].offset = 0;  // same offset
    s.data_size = 64;
    expect_rejected(s.build(), "overlap");
}
}  // namespace

// ---- real files ----------------------------------------------------------------------------
namespace {

int64_t key_u32(const gguf_context * g, const char * key) {
    const int64_t id = gguf_find_key(g, key);
    EXPECT_GE(id, 0) << key;
    if (id < 0) return -1;
    EXPECT_EQ(gguf_get_kv_type(g, id), GGUF_TYPE_UINT32) << key;
    return gguf_get_val_u32(g, id);
}

size_t arr_len(const gguf_context * g, const char * key, gguf_type type) {
    const int64_t id = gguf_find_key(g, key);
    EXPECT_GE(id, 0) << key;
    if (id < 0) return 0;
    EXPECT_EQ(gguf_get_kv_type(g, id), GGUF_TYPE_ARRAY) << key;
    EXPECT_EQ(gguf_get_arr_type(g, id), type) << key;
    return gguf_get_arr_n(g, id);
}

const ggml_tensor * expect_tensor(ggml_context * ctx, const char * name, ggml_type type, std::vector<int64_t> ne) {
    const ggml_tensor * t = ggml_get_tensor(ctx, name);
    EXPECT_NE(t, nullptr) << name;
    if (!t) return nullptr;
    EXPECT_EQ(t->type, type) << name;
    ne.resize(GGML_MAX_DIMS, 1);
    for (int d = 0; d < GGML_MAX_DIMS; d++) EXPECT_EQ(t->ne[d], ne[d]) << name << " dim " << d;
    return t;
}

// Loading by read and by mmap gives the same bytes for every tensor, all inside the file, and
// writing the file again reproduces it byte for byte.
void check_data_and_rewrite(const std::string & path) {
    Loaded r(path, Mode::READ), m(path, Mode::MMAP);
    ASSERT_NE(r.gguf, nullptr);
    ASSERT_NE(m.gguf, nullptr);
    const uint64_t file_size = read_bytes(path).size();
    for (int64_t i = 0; i < gguf_get_n_tensors(r.gguf); i++) {
        const char * name = gguf_get_tensor_name(r.gguf, i);
        EXPECT_LE(gguf_get_data_offset(r.gguf) + gguf_get_tensor_offset(r.gguf, i) + gguf_get_tensor_size(r.gguf, i), file_size)
            << name;
        const ggml_tensor * a = ggml_get_tensor(r.ggml, name), * b = ggml_get_tensor(m.ggml, name);
        ASSERT_TRUE(a && b) << name;
        ASSERT_EQ(ggml_nbytes(a), gguf_get_tensor_size(r.gguf, i));
        EXPECT_EQ(memcmp(a->data, b->data, ggml_nbytes(a)), 0) << name;
    }
    const std::string copy = temp_path("copy.gguf");
    ASSERT_TRUE(gguf_write_to_file(m.gguf, copy.c_str(), false));
    EXPECT_TRUE(read_bytes(copy) == read_bytes(path)) << "rewriting " << path << " changed its bytes";
    unlink(copy.c_str());
}

}  // namespace

TEST(GgufRealFiles, Stories260K) {
    const std::string path = tu::models_dir() + "/stories260K.gguf";
    TU_REQUIRE_FILE(path);
    Loaded f(path, Mode::READ);
    ASSERT_NE(f.gguf, nullptr);
    EXPECT_EQ(gguf_get_version(f.gguf), 3u);
    EXPECT_EQ(gguf_get_alignment(f.gguf), 32u);
    EXPECT_EQ(gguf_get_n_kv(f.gguf), 19);
    EXPECT_STREQ(gguf_get_val_str(f.gguf, gguf_find_key(f.gguf, "general.architecture")), "llama");
    EXPECT_EQ(key_u32(f.gguf, "llama.embedding_length"), 64);
    EXPECT_EQ(key_u32(f.gguf, "llama.block_count"), 5);
    EXPECT_EQ(key_u32(f.gguf, "llama.attention.head_count"), 8);
    EXPECT_EQ(key_u32(f.gguf, "llama.attention.head_count_kv"), 4);
    EXPECT_EQ(key_u32(f.gguf, "llama.feed_forward_length"), 172);
    EXPECT_EQ(key_u32(f.gguf, "llama.context_length"), 2048);
    EXPECT_FLOAT_EQ(gguf_get_val_f32(f.gguf, gguf_find_key(f.gguf, "llama.attention.layer_norm_rms_epsilon")), 1e-5f);
    EXPECT_EQ(arr_len(f.gguf, "tokenizer.ggml.tokens", GGUF_TYPE_STRING), 512u);
    EXPECT_EQ(arr_len(f.gguf, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32), 512u);
    EXPECT_EQ(arr_len(f.gguf, "tokenizer.ggml.token_type", GGUF_TYPE_INT32), 512u);
    const int64_t tokens = gguf_find_key(f.gguf, "tokenizer.ggml.tokens");
    EXPECT_STREQ(gguf_get_arr_str(f.gguf, tokens, 0), "<unk>");
    EXPECT_STREQ(gguf_get_arr_str(f.gguf, tokens, 1), "<s>");
    EXPECT_STREQ(gguf_get_arr_str(f.gguf, tokens, 2), "</s>");

    EXPECT_EQ(gguf_get_n_tensors(f.gguf), 48);  // 3 + 5 layers x 9
    EXPECT_EQ(gguf_get_data_offset(f.gguf), 14176u);
    expect_tensor(f.ggml, "token_embd.weight", GGML_TYPE_F32, {64, 512});
    expect_tensor(f.ggml, "output.weight", GGML_TYPE_F32, {64, 512});
    expect_tensor(f.ggml, "output_norm.weight", GGML_TYPE_F32, {64});
    expect_tensor(f.ggml, "blk.4.attn_k.weight", GGML_TYPE_F32, {64, 32});
    expect_tensor(f.ggml, "blk.0.ffn_down.weight", GGML_TYPE_F32, {172, 64});
    for (int64_t i = 0; i < gguf_get_n_tensors(f.gguf); i++) EXPECT_EQ(gguf_get_tensor_type(f.gguf, i), GGML_TYPE_F32);
    check_data_and_rewrite(path);
}

TEST(GgufRealFiles, TinyStories656KQ8_0) {
    const std::string path = tu::models_dir() + "/TinyStories-656K-Q8_0.gguf";
    TU_REQUIRE_FILE(path);
    Loaded f(path, Mode::MMAP);
    ASSERT_NE(f.gguf, nullptr);
    EXPECT_EQ(gguf_get_n_kv(f.gguf), 34);
    EXPECT_EQ(key_u32(f.gguf, "llama.embedding_length"), 128);
    EXPECT_EQ(key_u32(f.gguf, "llama.block_count"), 2);
    EXPECT_EQ(key_u32(f.gguf, "llama.vocab_size"), 2048);
    EXPECT_EQ(key_u32(f.gguf, "general.file_type"), 7);
    EXPECT_TRUE(gguf_get_val_bool(f.gguf, gguf_find_key(f.gguf, "tokenizer.ggml.add_bos_token")));
    EXPECT_FALSE(gguf_get_val_bool(f.gguf, gguf_find_key(f.gguf, "tokenizer.ggml.add_eos_token")));
    EXPECT_EQ(arr_len(f.gguf, "tokenizer.ggml.tokens", GGUF_TYPE_STRING), 2048u);
    EXPECT_EQ(arr_len(f.gguf, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32), 2048u);
    EXPECT_EQ(arr_len(f.gguf, "tokenizer.ggml.token_type", GGUF_TYPE_INT32), 2048u);
    EXPECT_EQ(arr_len(f.gguf, "general.languages", GGUF_TYPE_STRING), 1u);

    EXPECT_EQ(gguf_get_n_tensors(f.gguf), 20);  // 2 + 2 layers x 9 (tied embeddings: no output.weight)
    EXPECT_EQ(gguf_find_tensor(f.gguf, "output.weight"), -1);
    expect_tensor(f.ggml, "token_embd.weight", GGML_TYPE_Q8_0, {128, 2048});
    expect_tensor(f.ggml, "blk.0.ffn_down.weight", GGML_TYPE_Q8_0, {384, 128});
    expect_tensor(f.ggml, "blk.1.attn_k.weight", GGML_TYPE_Q8_0, {128, 64});
    int n_q8 = 0, n_f32 = 0;
    for (ggml_tensor * t = ggml_get_first_tensor(f.ggml); t; t = ggml_get_next_tensor(f.ggml, t)) {
        const bool is_norm = strstr(t->name, "_norm.weight") != nullptr;
        EXPECT_EQ(t->type, is_norm ? GGML_TYPE_F32 : GGML_TYPE_Q8_0) << t->name;
        EXPECT_EQ(ggml_n_dims(t), is_norm ? 1 : 2) << t->name;
        (is_norm ? n_f32 : n_q8)++;
    }
    EXPECT_EQ(n_q8, 15);
    EXPECT_EQ(n_f32, 5);
    check_data_and_rewrite(path);
}

// The expected type of each tensor of ktest-<kind>.gguf (the quantizer keeps norms in F32 and
// picks Q6_K for some matrices of the mixed kinds).
ggml_type ktest_type(const std::string & kind, const std::string & name, int n_dims) {
    if (n_dims == 1 || kind == "F32") return GGML_TYPE_F32;
    if (kind == "F16") return GGML_TYPE_F16;
    if (kind == "Q8_0") return GGML_TYPE_Q8_0;
    if (kind == "Q6_K") return GGML_TYPE_Q6_K;
    if (kind == "Q4_0") return name == "output.weight" ? GGML_TYPE_Q6_K : GGML_TYPE_Q4_0;
    // Q4_K_M: Q6_K for the output and for attn_v / ffn_down of the last half of the layers.
    static const std::set<std::string> q6 = {"output.weight", "blk.2.attn_v.weight", "blk.3.attn_v.weight",
                                             "blk.2.ffn_down.weight", "blk.3.ffn_down.weight"};
    return q6.count(name) ? GGML_TYPE_Q6_K : GGML_TYPE_Q4_K;
}

class GgufKtest : public testing::TestWithParam<const char *> {};

TEST_P(GgufKtest, SameTensorsAsF32) {
    const std::string kind = GetParam();
    const std::string dir = tu::models_dir() + "/ktest/";
    const std::string path = dir + "ktest-" + kind + ".gguf", ref_path = dir + "ktest-F32.gguf";
    TU_REQUIRE_FILE(path);
    TU_REQUIRE_FILE(ref_path);
    Loaded ref(ref_path, Mode::NO_ALLOC), f(path, Mode::MMAP);
    ASSERT_NE(ref.gguf, nullptr);
    ASSERT_NE(f.gguf, nullptr);
    EXPECT_EQ(key_u32(f.gguf, "llama.embedding_length"), 256);
    EXPECT_EQ(key_u32(f.gguf, "llama.block_count"), 4);
    EXPECT_EQ(key_u32(f.gguf, "llama.attention.head_count"), 4);
    EXPECT_EQ(key_u32(f.gguf, "llama.attention.head_count_kv"), 2);
    EXPECT_EQ(key_u32(f.gguf, "llama.feed_forward_length"), 768);
    EXPECT_EQ(arr_len(f.gguf, "tokenizer.ggml.tokens", GGUF_TYPE_STRING), 512u);
    const std::map<std::string, int> file_types = {{"F16", 1}, {"Q8_0", 7}, {"Q4_0", 2}, {"Q4_K_M", 15}, {"Q6_K", 18}};
    if (kind == "F32") {
        EXPECT_EQ(gguf_find_key(f.gguf, "general.file_type"), -1);
    } else {
        EXPECT_EQ(key_u32(f.gguf, "general.file_type"), file_types.at(kind));
    }

    ASSERT_EQ(gguf_get_n_tensors(f.gguf), 39);  // 3 + 4 layers x 9
    ASSERT_EQ(gguf_get_n_tensors(ref.gguf), 39);
    expect_tensor(ref.ggml, "token_embd.weight", GGML_TYPE_F32, {256, 512});
    expect_tensor(ref.ggml, "blk.3.ffn_down.weight", GGML_TYPE_F32, {768, 256});
    const uint64_t file_size = read_bytes(path).size();
    for (ggml_tensor * r = ggml_get_first_tensor(ref.ggml); r; r = ggml_get_next_tensor(ref.ggml, r)) {
        SCOPED_TRACE(r->name);
        const ggml_tensor * t = ggml_get_tensor(f.ggml, r->name);
        ASSERT_NE(t, nullptr);
        EXPECT_TRUE(ggml_are_same_shape(t, r));
        EXPECT_EQ(t->type, ktest_type(kind, r->name, ggml_n_dims(r)));
        const int64_t id = gguf_find_tensor(f.gguf, r->name);
        EXPECT_LE(gguf_get_data_offset(f.gguf) + gguf_get_tensor_offset(f.gguf, id) + ggml_nbytes(t), file_size);
        EXPECT_EQ((const char *) t->data, (const char *) gguf_get_data(f.gguf) + gguf_get_tensor_offset(f.gguf, id));
    }
    check_data_and_rewrite(path);
}

INSTANTIATE_TEST_SUITE_P(Kinds, GgufKtest, testing::Values("F32", "F16", "Q8_0", "Q4_0", "Q4_K_M", "Q6_K"),
                         [](const testing::TestParamInfo<const char *> & info) { return std::string(info.param); });

TEST(GgufRealFiles, VocabFilesWithoutTensors) {
    for (const char * name : {"ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf", "ggml-vocab-phi-3.gguf"}) {
        const std::string path = tu::models_dir() + "/vocab/" + name;
        TU_REQUIRE_FILE(path);
        Loaded f(path, Mode::READ);  // these end right after the metadata, without padding
        ASSERT_NE(f.gguf, nullptr) << name;
        EXPECT_EQ(gguf_get_n_tensors(f.gguf), 0);
        EXPECT_GT(arr_len(f.gguf, "tokenizer.ggml.tokens", GGUF_TYPE_STRING), 1000u) << name;
    }
}
