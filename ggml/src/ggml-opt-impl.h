// ggml-opt-impl.h - what the parts of the training code (ggml-opt*.cpp) share beyond ggml-opt.h.
#pragma once

#include "ggml-opt.h"

#include <stdint.h>

#include <random>
#include <vector>

// Per-batch statistics of the evaluations added to a result (ggml-opt-result.cpp).
struct ggml_opt_result {
    int64_t ndata = 0;             // datapoints
    int64_t nbatch = 0;            // evaluations
    double  loss_sum = 0.0;        // of the per-batch losses, undoing the 1/opt_period scaling
    double  loss_sum_sq = 0.0;
    bool    loss_per_datapoint = false;  // mean-type loss (results average), else a sum (they add)
    std::vector<int32_t> pred;     // predictions, one per datapoint (cross entropy only)
    int64_t ncorrect = 0;
    bool    has_accuracy = false;
};

// Adds one evaluation: loss as computed (scaled by 1/opt_period for mean-type losses), and
// n predictions (pred may be NULL) of which ncorrect matched.
void ggml_opt_result_add(ggml_opt_result_t result, int64_t ndata, float loss, int32_t opt_period, bool loss_per_datapoint,
                         const int32_t * pred, int64_t ncorrect);

// The context's random generator (seeded by ggml_opt_params.seed): the dataset shuffles with it.
std::mt19937 & ggml_opt_rng(ggml_opt_context_t opt_ctx);
