// finetune-dist.cpp - one process: llama-finetune built without MPI (finetune-dist.h).
#include "finetune-dist.h"

#include <cstdlib>

void ft_dist::abort(int status) { exit(status); }

#ifndef FT_MPI
std::unique_ptr<ft_dist> ft_dist_init(int & argc, char **& argv) {
    (void) argc, (void) argv;
    return std::make_unique<ft_dist>();
}
#endif
