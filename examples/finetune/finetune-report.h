// finetune-report.h - what llama-finetune tells the user about a run: the per-step history, the
// loss log (TSV), the loss curve (SVG) and the progress line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

// Row k: the loss after k optimizer steps (row 0: before any update), the learning rate of
// step k + 1 (of step k for the last row), and the tokens per second of that evaluation.
struct ft_history {
    std::vector<float> loss, lr, tokens_per_s;
    std::vector<int64_t> val_step;  // validation: after how many steps
    std::vector<float> val_loss;
};

// Both written whole or not at all; false with a message.
bool ft_write_loss_log(const ft_history & h, const std::string & path, std::string & err);
bool ft_write_plot(const ft_history & h, const std::string & path, const std::string & title, std::string & err);

// One progress line on stderr (rewritten in place on a terminal).
void ft_progress(int64_t step, int64_t total, float loss, float lr, double tokens_per_s, double eta_s, bool last);
