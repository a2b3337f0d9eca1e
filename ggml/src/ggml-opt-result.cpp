// ggml-opt-result.cpp - what evaluations add up to: datapoints, loss with its uncertainty,
// predictions and accuracy.
#include "ggml-opt-impl.h"

#include <math.h>
#include <string.h>

ggml_opt_result_t ggml_opt_result_init(void) { return new ggml_opt_result(); }
void ggml_opt_result_free(ggml_opt_result_t result) { delete result; }
void ggml_opt_result_reset(ggml_opt_result_t result) { *result = ggml_opt_result(); }

void ggml_opt_result_add(ggml_opt_result_t r, int64_t ndata, float loss, int32_t opt_period, bool loss_per_datapoint,
                         const int32_t * pred, int64_t ncorrect) {
    // Mean-type losses were divided by opt_period so accumulated gradients average over the
    // logical batch; the per-batch figure is the undivided one.
    const double l = loss_per_datapoint ? (double) loss * opt_period : (double) loss;
    r->ndata += ndata;
    r->nbatch++;
    r->loss_sum += l;
    r->loss_sum_sq += l * l;
    r->loss_per_datapoint = loss_per_datapoint;
    if (pred) {
        r->pred.insert(r->pred.end(), pred, pred + ndata);
        r->ncorrect += ncorrect;
        r->has_accuracy = true;
    }
}

void ggml_opt_result_ndata(ggml_opt_result_t r, int64_t * ndata) { *ndata = r->ndata; }

void ggml_opt_result_loss(ggml_opt_result_t r, double * loss, double * unc) {
    const int64_t n = r->nbatch;
    if (n == 0) {
        *loss = 0.0;
        if (unc) *unc = NAN;
        return;
    }
    const double mean = r->loss_sum / n;
    // A mean-type loss is the mean over batches; a sum-type loss is the total.
    *loss = r->loss_per_datapoint ? mean : r->loss_sum;
    if (!unc) return;
    if (n < 2) {
        *unc = NAN;
        return;
    }
    double var = r->loss_sum_sq / n - mean * mean;  // of one batch's loss
    if (var < 0.0) var = 0.0;
    // Standard error of the mean, or of the total (n batches' worth of variance).
    *unc = r->loss_per_datapoint ? sqrt(var / (n - 1)) : sqrt(var * n * n / (n - 1));
}

void ggml_opt_result_pred(ggml_opt_result_t r, int32_t * pred) {
    if (!r->pred.empty()) memcpy(pred, r->pred.data(), r->pred.size() * sizeof(int32_t));
}

void ggml_opt_result_accuracy(ggml_opt_result_t r, double * accuracy, double * unc) {
    if (!r->has_accuracy || r->ndata == 0) {
        *accuracy = NAN;
        if (unc) *unc = NAN;
        return;
    }
    const double a = (double) r->ncorrect / r->ndata;
    *accuracy = a;
    // Binomial standard error.
    if (unc) *unc = r->ndata >= 2 ? sqrt(a * (1.0 - a) / (r->ndata - 1)) : NAN;
}
