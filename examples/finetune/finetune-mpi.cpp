// finetune-mpi.cpp - llama-finetune's processes as the ranks of an MPI job (finetune-dist.h);
// compiled only with -DGGML_MPI=ON.
//
// The gradient reducer: the adapter's gradients are laid out, in the order the backward pass
// finishes them, in one packed buffer cut into buckets of about GGML_MPI_BUCKET_KB KiB (default
// 64). During the backward pass of a step's last micro-batch each gradient is copied into its
// place as soon as it is complete, and a bucket whose gradients are all there is all-reduced
// with MPI_Iallreduce while the backward pass goes on (progressed by MPI_Testall between graph
// nodes, at most every GGML_MPI_POLL_US microseconds: default 200, and never with more processes
// on the machine than cores); after the pass the step waits
// for the buckets still under way and copies the sums back into the accumulators.
// GGML_MPI_OVERLAP=0: one blocking MPI_Allreduce after the pass instead.
//
// Failures: MPI calls return errors (MPI_ERRORS_RETURN) and an error ends the job with
// MPI_Abort after a message; a process that dies is noticed by mpirun, which ends the others
// (SIGTERM, then SIGKILL): they print why on the way out. GGML_MPI_TEST_DIE=RANK:STEP makes
// that rank die (SIGKILL) at the start of that step, for the tests.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include "finetune-dist.h"
#include "ggml-backend.h"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

int g_rank = 0;

// A clean one-line reason when the launcher ends this process because another one failed.
void on_sigterm(int) {
    char msg[160];
    const int n = snprintf(msg, sizeof(msg),
                           "\nllama-finetune: rank %d: stopped by the MPI launcher (another process of the run failed or was stopped)\n",
                           g_rank);
    if (n > 0) {
        ssize_t w = write(STDERR_FILENO, msg, (size_t) n);
        (void) w;
    }
    _exit(1);
}

struct mpi_dist final : ft_dist {
    MPI_Comm comm = MPI_COMM_NULL;
    size_t bucket_cap = 64 * 1024;  // bytes
    bool overlap = true;
    int64_t die_rank = -1, die_step = -1;

    // The reducer.
    ggml_opt_context_t oc = nullptr;
    int64_t n_params = 0;
    std::vector<ggml_tensor *> accs;  // by parameter
    std::vector<float> pack;          // every gradient, in completion order
    struct bucket {
        size_t off = 0, n = 0;        // floats of pack
        int members = 0, arrived = 0;
        bool closed = false;
    };
    std::vector<bucket> buckets;
    std::vector<MPI_Request> reqs;    // one per bucket
    std::vector<int> bucket_of;       // by parameter; -1 until the first step lays them out
    std::vector<size_t> off_of;
    int64_t n_laid_out = 0;
    size_t laid_out = 0;
    bool layout_done = false;
    int n_active = 0;

    stats st;
    double t_cb = 0.0;  // seconds in the callbacks of the backward pass
    double last_poll = 0.0, poll_interval = 200e-6;

    void ok(int rc, const char * what) {
        if (rc == MPI_SUCCESS) return;
        char s[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, s, &len);
        fprintf(stderr, "llama-finetune: rank %d: error: %s failed: %.*s (did another process of the run die?)\n", rank, what, len, s);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 1);
        _exit(1);
    }

    void allreduce_sum(double * v, int n) override {
        const double t0 = MPI_Wtime();
        ok(MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_SUM, comm), "MPI_Allreduce");
        const double dt = MPI_Wtime() - t0;
        st.other_s += dt;
        st.comm_s += dt;
    }

    void allreduce_max(double * v, int n) override {
        ok(MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_MAX, comm), "MPI_Allreduce");
    }

    void broadcast(void * data, size_t n) override {
        // In pieces: MPI counts are ints.
        const size_t piece = (size_t) 1 << 30;
        for (size_t off = 0; off < n; off += piece) {
            ok(MPI_Bcast((char *) data + off, (int) std::min(piece, n - off), MPI_BYTE, 0, comm), "MPI_Bcast");
        }
    }

    [[noreturn]] void abort(int status) override {
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, status);
        _exit(status);
    }

    void step_begin(int64_t step) override {
        if (rank == die_rank && step == die_step) {
            fprintf(stderr, "llama-finetune: rank %d: dying at step %lld (GGML_MPI_TEST_DIE)\n", rank, (long long) step);
            fflush(stderr);
            raise(SIGKILL);
        }
    }

    void finalize() override { MPI_Finalize(); }

    stats take_stats() override {
        stats s = st;
        s.bytes_per_step = (double) pack.size() * sizeof(float);
        s.buckets = (int) buckets.size();
        st = stats();
        return s;
    }

    double time_allreduce(int reps) override {
        if (size == 1 || pack.empty()) return 0.0;
        std::vector<float> buf(pack.size(), 1.0f);
        std::vector<double> t;
        for (int r = 0; r < reps; r++) {
            ok(MPI_Barrier(comm), "MPI_Barrier");
            const double t0 = MPI_Wtime();
            ok(MPI_Allreduce(MPI_IN_PLACE, buf.data(), (int) buf.size(), MPI_FLOAT, MPI_SUM, comm), "MPI_Allreduce");
            t.push_back(MPI_Wtime() - t0);
        }
        // The slowest rank's time is the collective's.
        std::sort(t.begin(), t.end());
        double med = t[t.size() / 2];
        ok(MPI_Allreduce(MPI_IN_PLACE, &med, 1, MPI_DOUBLE, MPI_MAX, comm), "MPI_Allreduce");
        return med;
    }

    void attach(ggml_opt_context_t opt) override {
        oc = opt;
        n_params = ggml_opt_n_params(opt);
        size_t total = 0;
        for (int64_t i = 0; i < n_params; i++) {
            accs.push_back(ggml_opt_grad_acc(opt, ggml_opt_param(opt, i)));
            total += (size_t) ggml_nelements(accs.back());
        }
        pack.assign(total, 0.0f);
        bucket_of.assign((size_t) n_params, -1);
        off_of.assign((size_t) n_params, 0);
        if (size == 1) return;  // nothing to sum
        const ggml_opt_grad_reducer r = {
            [](void * ud, int64_t i, ggml_tensor * acc) { ((mpi_dist *) ud)->grad_ready(i, acc); },
            [](void * ud) { ((mpi_dist *) ud)->poll(); },
            [](void * ud) { ((mpi_dist *) ud)->reduce(); },
            this,
        };
        ggml_opt_set_grad_reducer(opt, &r);
    }

    void start(int b) {
        bucket & k = buckets[(size_t) b];
        if (!overlap) return;
        ok(MPI_Iallreduce(MPI_IN_PLACE, pack.data() + k.off, (int) k.n, MPI_FLOAT, MPI_SUM, comm, &reqs[(size_t) b]), "MPI_Iallreduce");
        n_active++;
    }

    void grad_ready(int64_t i, ggml_tensor * acc) {
        const double t0 = MPI_Wtime();
        const size_t n = (size_t) ggml_nelements(acc);
        if (!layout_done) {
            // The first step lays the buckets out in completion order (the same at every step
            // and on every rank: the graphs are the same).
            if (buckets.empty() || buckets.back().closed) {
                buckets.emplace_back();
                buckets.back().off = laid_out;
                reqs.push_back(MPI_REQUEST_NULL);
            }
            bucket & k = buckets.back();
            bucket_of[(size_t) i] = (int) buckets.size() - 1;
            off_of[(size_t) i] = laid_out;
            k.members++;
            k.n += n;
            laid_out += n;
            n_laid_out++;
            if (k.n * sizeof(float) >= bucket_cap || n_laid_out == n_params) k.closed = true;
            layout_done = n_laid_out == n_params;
        }
        const int b = bucket_of[(size_t) i];
        ggml_backend_tensor_get(acc, pack.data() + off_of[(size_t) i], 0, n * sizeof(float));  // a GPU's, with -ngl
        bucket & k = buckets[(size_t) b];
        if (++k.arrived == k.members && k.closed) start(b);
        t_cb += MPI_Wtime() - t0;
    }

    void poll() {
        if (n_active == 0) return;
        // Not after every node: with more processes than cores Open MPI yields the core in
        // each call that finds nothing to do.
        const double t0 = MPI_Wtime();
        if (t0 - last_poll < poll_interval) return;
        last_poll = t0;
        int done = 0;
        ok(MPI_Testall((int) reqs.size(), reqs.data(), &done, MPI_STATUSES_IGNORE), "MPI_Testall");
        if (done) n_active = 0;
        t_cb += MPI_Wtime() - t0;
    }

    void reduce() {
        const double t0 = MPI_Wtime();
        if (!layout_done) {
            fprintf(stderr, "llama-finetune: rank %d: error: the backward pass did not announce every gradient\n", rank);
            abort(1);
        }
        if (overlap) {
            ok(MPI_Waitall((int) reqs.size(), reqs.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
            n_active = 0;
        } else {
            ok(MPI_Allreduce(MPI_IN_PLACE, pack.data(), (int) pack.size(), MPI_FLOAT, MPI_SUM, comm), "MPI_Allreduce");
        }
        for (int64_t i = 0; i < n_params; i++) {
            ggml_backend_tensor_set(accs[(size_t) i], pack.data() + off_of[(size_t) i], 0, ggml_nbytes(accs[(size_t) i]));
        }
        for (bucket & k : buckets) k.arrived = 0;
        const double t1 = MPI_Wtime();
        st.steps++;
        st.wait_s += t1 - t0;
        st.issue_s += t_cb;
        st.comm_s += t1 - t0 + t_cb;
        t_cb = 0.0;
    }
};

}  // namespace

std::unique_ptr<ft_dist> ft_dist_init(int & argc, char **& argv) {
    int provided = 0;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "llama-finetune: error: MPI_Init_thread failed\n");
        exit(1);
    }
    auto d = std::make_unique<mpi_dist>();
    MPI_Comm_dup(MPI_COMM_WORLD, &d->comm);
    MPI_Comm_set_errhandler(d->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(d->comm, &d->rank);
    MPI_Comm_size(d->comm, &d->size);
    MPI_Comm local;
    MPI_Comm_split_type(d->comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
    MPI_Comm_size(local, &d->local_size);
    MPI_Comm_free(&local);
    g_rank = d->rank;
    if (provided < MPI_THREAD_FUNNELED && d->rank == 0) {
        fprintf(stderr, "llama-finetune: warning: the MPI library offers no MPI_THREAD_FUNNELED\n");
    }
    if (const char * s = getenv("GGML_MPI_BUCKET_KB")) d->bucket_cap = (size_t) std::max(1L, atol(s)) * 1024;
    if (const char * s = getenv("GGML_MPI_OVERLAP")) d->overlap = atoi(s) != 0;
    // More processes than cores: polling costs more than it brings (each call that finds the
    // others still computing yields the core to them); the all-reduces then progress in the MPI
    // calls of the next buckets and after the backward pass.
    if (d->local_size > (int) std::max(1u, std::thread::hardware_concurrency())) d->poll_interval = INFINITY;
    if (const char * s = getenv("GGML_MPI_POLL_US")) d->poll_interval = std::max(0.0, atof(s)) * 1e-6;
    if (const char * s = getenv("GGML_MPI_TEST_DIE")) {
        long long r = -1, k = -1;
        if (sscanf(s, "%lld:%lld", &r, &k) == 2) {
            d->die_rank = r;
            d->die_step = k;
        }
    }
    if (d->size > 1) signal(SIGTERM, on_sigterm);
    return d;
}
