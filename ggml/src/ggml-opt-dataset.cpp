// ggml-opt-dataset.cpp - a dataset: data and labels as two host tensors [ne, ndata], read in
// batches through a permutation of its shards (the unit of shuffling and copying).
#include "ggml-opt-impl.h"
#include "ggml-impl.h"

#include <algorithm>
#include <numeric>

struct ggml_opt_dataset {
    ggml_context * ctx = nullptr;
    ggml_tensor * data = nullptr;
    ggml_tensor * labels = nullptr;
    int64_t ndata = 0;
    int64_t ndata_shard = 0;
    size_t nbs_data = 0;    // bytes of one shard of data
    size_t nbs_labels = 0;  // bytes of one shard of labels
    std::vector<int64_t> permutation;  // shard order
};

ggml_opt_dataset_t ggml_opt_dataset_init(enum ggml_type type_data, enum ggml_type type_label, int64_t ne_datapoint,
                                         int64_t ne_label, int64_t ndata, int64_t ndata_shard) {
    GGML_ASSERT(ne_datapoint > 0 && ne_label >= 0 && ndata > 0);
    GGML_ASSERT(ndata_shard > 0 && ndata % ndata_shard == 0 && "ndata must be a multiple of the shard size");
    ggml_opt_dataset * ds = new ggml_opt_dataset();
    ds->ndata = ndata;
    ds->ndata_shard = ndata_shard;
    size_t mem = 2 * ggml_tensor_overhead() + ggml_row_size(type_data, ne_datapoint) * ndata + GGML_MEM_ALIGN;
    if (ne_label > 0) mem += ggml_row_size(type_label, ne_label) * ndata + GGML_MEM_ALIGN;
    ds->ctx = ggml_init({ mem, nullptr, false });
    if (!ds->ctx) {
        delete ds;
        return nullptr;
    }
    ds->data = ggml_new_tensor_2d(ds->ctx, type_data, ne_datapoint, ndata);
    ds->nbs_data = ggml_nbytes(ds->data) / ndata * ndata_shard;
    if (ne_label > 0) {
        ds->labels = ggml_new_tensor_2d(ds->ctx, type_label, ne_label, ndata);
        ds->nbs_labels = ggml_nbytes(ds->labels) / ndata * ndata_shard;
    }
    ds->permutation.resize(ndata / ndata_shard);
    std::iota(ds->permutation.begin(), ds->permutation.end(), 0);
    return ds;
}

void ggml_opt_dataset_free(ggml_opt_dataset_t ds) {
    if (!ds) return;
    ggml_free(ds->ctx);
    delete ds;
}

int64_t ggml_opt_dataset_ndata(ggml_opt_dataset_t ds) { return ds->ndata; }
struct ggml_tensor * ggml_opt_dataset_data(ggml_opt_dataset_t ds) { return ds->data; }
struct ggml_tensor * ggml_opt_dataset_labels(ggml_opt_dataset_t ds) { return ds->labels; }

void ggml_opt_dataset_shuffle(ggml_opt_context_t opt_ctx, ggml_opt_dataset_t ds, int64_t idata) {
    GGML_ASSERT(idata <= ds->ndata);
    std::mt19937 & rng = ggml_opt_rng(opt_ctx);
    if (idata < 0) {
        std::shuffle(ds->permutation.begin(), ds->permutation.end(), rng);
        return;
    }
    GGML_ASSERT(idata % ds->ndata_shard == 0);
    std::shuffle(ds->permutation.begin(), ds->permutation.begin() + idata / ds->ndata_shard, rng);
}

// Copies shards [ishard0, ishard0 + n) of the permutation from src (rows of nbs bytes per shard) to dst.
static void copy_shards(const ggml_opt_dataset * ds, const ggml_tensor * src, size_t nbs, char * dst, int64_t ishard0, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const int64_t ishard = ds->permutation[ishard0 + i];
        memcpy(dst + i * nbs, (const char *) src->data + ishard * nbs, nbs);
    }
}

// Shards into a tensor: in place in host memory, else staged and set through its buffer.
static void copy_shards_to(ggml_opt_dataset_t ds, const ggml_tensor * src, size_t nbs, ggml_tensor * dst, int64_t ishard0, int64_t n) {
    const ggml_tensor * owner = dst->view_src ? dst->view_src : dst;
    if (!owner->buffer || ggml_backend_buffer_is_host(owner->buffer)) {
        copy_shards(ds, src, nbs, (char *) dst->data, ishard0, n);
        return;
    }
    std::vector<char> staged((size_t) n * nbs);
    copy_shards(ds, src, nbs, staged.data(), ishard0, n);
    ggml_backend_tensor_set(dst, staged.data(), 0, staged.size());
}

void ggml_opt_dataset_get_batch(ggml_opt_dataset_t ds, struct ggml_tensor * data_batch, struct ggml_tensor * labels_batch,
                                int64_t ibatch) {
    GGML_ASSERT(data_batch && ggml_is_contiguous(data_batch) && data_batch->data);
    GGML_ASSERT(data_batch->type == ds->data->type && data_batch->ne[0] == ds->data->ne[0]);
    const size_t nb_batch = ggml_nbytes(data_batch);
    GGML_ASSERT(nb_batch % ds->nbs_data == 0 && "the batch must hold whole shards");
    const int64_t shards_per_batch = nb_batch / ds->nbs_data;
    GGML_ASSERT((ibatch + 1) * shards_per_batch <= (int64_t) ds->permutation.size() && "batch index out of range");
    copy_shards_to(ds, ds->data, ds->nbs_data, data_batch, ibatch * shards_per_batch, shards_per_batch);
    if (labels_batch) {
        GGML_ASSERT(ds->labels && ggml_is_contiguous(labels_batch) && labels_batch->data);
        GGML_ASSERT(labels_batch->type == ds->labels->type && labels_batch->ne[0] == ds->labels->ne[0]);
        GGML_ASSERT(ggml_nbytes(labels_batch) == (size_t) shards_per_batch * ds->nbs_labels);
        copy_shards_to(ds, ds->labels, ds->nbs_labels, labels_batch, ibatch * shards_per_batch, shards_per_batch);
    }
}

void ggml_opt_dataset_get_batch_host(ggml_opt_dataset_t ds, void * data_batch, size_t nb_data_batch, void * labels_batch,
                                     int64_t ibatch) {
    GGML_ASSERT(data_batch && nb_data_batch % ds->nbs_data == 0 && "the batch must hold whole shards");
    const int64_t shards_per_batch = nb_data_batch / ds->nbs_data;
    GGML_ASSERT((ibatch + 1) * shards_per_batch <= (int64_t) ds->permutation.size() && "batch index out of range");
    copy_shards(ds, ds->data, ds->nbs_data, (char *) data_batch, ibatch * shards_per_batch, shards_per_batch);
    if (labels_batch) {
        GGML_ASSERT(ds->labels);
        copy_shards(ds, ds->labels, ds->nbs_labels, (char *) labels_batch, ibatch * shards_per_batch, shards_per_batch);
    }
}
