// finetune-dist.h - the processes of a llama-finetune run: one (the default build), or the ranks
// of an MPI job (built with -DGGML_MPI=ON and started with mpirun) training data-parallel.
//
// Every process holds the frozen base and a replica of the adapter, and computes the gradients
// of its share of each step's sequences; the gradients are summed across the processes before
// the optimizer step (an all-reduce, started per bucket of gradients as the backward pass
// finishes them), and every process applies the same step. Rank 0 alone writes files and talks
// to the user. Nothing of MPI appears outside finetune-mpi.cpp: this interface is all
// finetune.cpp sees, and its single-process implementation does nothing.
#pragma once

#include "ggml-opt.h"

#include <cstddef>
#include <cstdint>
#include <memory>

struct ft_dist {
    int rank = 0;        // this process
    int size = 1;        // processes of the run
    int local_size = 1;  // processes of the run on this machine (they share its cores)

    virtual ~ft_dist() = default;

    // Sums v[0..n) over the processes, in place: every process gets the sums.
    virtual void allreduce_sum(double * v, int n) { (void) v, (void) n; }
    // The maxima of v[0..n) over the processes, in place (not counted as communication).
    virtual void allreduce_max(double * v, int n) { (void) v, (void) n; }
    // Rank 0's n bytes at data, to every process.
    virtual void broadcast(void * data, size_t n) { (void) data, (void) n; }
    // Sums the gradient accumulators of opt over the processes before every optimizer step
    // (ggml_opt_set_grad_reducer).
    virtual void attach(ggml_opt_context_t opt) { (void) opt; }
    // Ends every process of the run with this exit status (after the caller printed why).
    [[noreturn]] virtual void abort(int status);
    // Called at the start of every optimizer step (1-based): a fault-injection hook for tests.
    virtual void step_begin(int64_t step) { (void) step; }
    // The end of a run that went well (every process calls it).
    virtual void finalize() {}

    // Communication since the last call (this process's view), in seconds: issuing and
    // progressing the gradients' all-reduces during the backward pass (issue_s), waiting for
    // them after it and copying the sums back (wait_s), and the other all-reduces (the loss's,
    // which also waits for the slowest process to finish its share: other_s). comm_s is the sum.
    struct stats {
        int64_t steps = 0;
        double comm_s = 0.0, issue_s = 0.0, wait_s = 0.0, other_s = 0.0;
        double bytes_per_step = 0.0;  // of the gradients
        int buckets = 0;
    };
    virtual stats take_stats() { return {}; }
    // Seconds of one blocking all-reduce of the gradients' bytes, every process idle otherwise
    // (median of reps): the link's cost without waiting for slower processes. 0 for one process.
    virtual double time_allreduce(int reps) { (void) reps; return 0.0; }
};

// The run's processes: under MPI (builds with GGML_MPI) the job's ranks, else one process.
std::unique_ptr<ft_dist> ft_dist_init(int & argc, char **& argv);
