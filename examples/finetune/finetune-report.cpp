// finetune-report.cpp - loss log, SVG loss curve and progress line (see finetune-report.h).
#include "finetune-report.h"

#include "llama-safetensors.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <unistd.h>

namespace {

std::string fmt(const char * f, double v) {
    char b[64];
    snprintf(b, sizeof(b), f, v);
    return b;
}

bool write_whole(const std::string & path, const std::string & text, std::string & err) {
    try {
        write_file_atomic(path, text);
    } catch (const std::exception & e) {
        err = e.what();
        return false;
    }
    return true;
}

}  // namespace

bool ft_write_loss_log(const ft_history & h, const std::string & path, std::string & err) {
    std::string s = "step\tloss\tlr\ttokens_per_s\n";
    for (size_t k = 0; k < h.loss.size(); k++) {
        s += std::to_string(k) + "\t" + fmt("%.9g", h.loss[k]) + "\t" + fmt("%.9g", h.lr[k]) + "\t" +
             fmt("%.1f", h.tokens_per_s[k]) + "\n";
    }
    return write_whole(path, s, err);
}

bool ft_write_plot(const ft_history & h, const std::string & path, const std::string & title, std::string & err) {
    const double W = 800, H = 480, L = 70, R = 20, T = 40, B = 50;  // size and margins
    const double pw = W - L - R, ph = H - T - B;
    const size_t n = h.loss.size();
    double ymax = 0;
    for (float v : h.loss) if (std::isfinite(v)) ymax = std::max(ymax, (double) v);
    for (float v : h.val_loss) if (std::isfinite(v)) ymax = std::max(ymax, (double) v);
    if (ymax <= 0) ymax = 1;
    // A round top for the y axis: 1, 2 or 5 times a power of ten.
    const double mag = std::pow(10.0, std::floor(std::log10(ymax)));
    double top = mag;
    for (double m : {1.0, 2.0, 5.0, 10.0}) {
        if (m * mag >= ymax) {
            top = m * mag;
            break;
        }
    }
    const double xmax = n > 1 ? (double) (n - 1) : 1.0;
    auto X = [&](double step) { return L + pw * step / xmax; };
    auto Y = [&](double loss) { return T + ph * (1.0 - std::min(loss, top) / top); };

    std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + fmt("%.0f", W) + "\" height=\"" + fmt("%.0f", H) +
                    "\" font-family=\"sans-serif\" font-size=\"12\">\n";
    s += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
    std::string safe_title;
    for (char c : title) safe_title += c == '<' ? std::string("&lt;") : c == '&' ? std::string("&amp;") : std::string(1, c);
    s += "<text x=\"" + fmt("%.0f", W / 2) + "\" y=\"22\" text-anchor=\"middle\" font-size=\"14\">" + safe_title + "</text>\n";
    // Grid and ticks: 5 on each axis.
    for (int i = 0; i <= 5; i++) {
        const double yv = top * i / 5, y = Y(yv);
        s += "<line x1=\"" + fmt("%.1f", L) + "\" y1=\"" + fmt("%.1f", y) + "\" x2=\"" + fmt("%.1f", L + pw) + "\" y2=\"" +
             fmt("%.1f", y) + "\" stroke=\"#ddd\"/>\n";
        s += "<text x=\"" + fmt("%.1f", L - 6) + "\" y=\"" + fmt("%.1f", y + 4) + "\" text-anchor=\"end\">" + fmt("%.3g", yv) +
             "</text>\n";
        const double xv = std::round(xmax * i / 5), x = X(xv);
        s += "<text x=\"" + fmt("%.1f", x) + "\" y=\"" + fmt("%.1f", T + ph + 18) + "\" text-anchor=\"middle\">" +
             fmt("%.0f", xv) + "</text>\n";
    }
    s += "<rect x=\"" + fmt("%.1f", L) + "\" y=\"" + fmt("%.1f", T) + "\" width=\"" + fmt("%.1f", pw) + "\" height=\"" +
         fmt("%.1f", ph) + "\" fill=\"none\" stroke=\"black\"/>\n";
    s += "<text x=\"" + fmt("%.1f", L + pw / 2) + "\" y=\"" + fmt("%.1f", H - 12) + "\" text-anchor=\"middle\">optimizer step</text>\n";
    s += "<text transform=\"translate(16," + fmt("%.1f", T + ph / 2) + ") rotate(-90)\" text-anchor=\"middle\">loss</text>\n";
    // Train curve, then validation points joined.
    std::string pts;
    for (size_t k = 0; k < n; k++) {
        if (!std::isfinite(h.loss[k])) continue;
        pts += fmt("%.1f", X((double) k)) + "," + fmt("%.1f", Y(h.loss[k])) + " ";
    }
    s += "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\" points=\"" + pts + "\"/>\n";
    if (!h.val_loss.empty()) {
        std::string vp;
        for (size_t i = 0; i < h.val_loss.size(); i++) {
            const double x = X((double) h.val_step[i]), y = Y(h.val_loss[i]);
            vp += fmt("%.1f", x) + "," + fmt("%.1f", y) + " ";
            s += "<circle cx=\"" + fmt("%.1f", x) + "\" cy=\"" + fmt("%.1f", y) + "\" r=\"3\" fill=\"#d62728\"/>\n";
        }
        s += "<polyline fill=\"none\" stroke=\"#d62728\" stroke-dasharray=\"4 3\" points=\"" + vp + "\"/>\n";
    }
    // Legend.
    const double lx = L + pw - 150, ly = T + 16;
    s += "<line x1=\"" + fmt("%.1f", lx) + "\" y1=\"" + fmt("%.1f", ly) + "\" x2=\"" + fmt("%.1f", lx + 24) + "\" y2=\"" +
         fmt("%.1f", ly) + "\" stroke=\"#1f77b4\" stroke-width=\"2\"/><text x=\"" + fmt("%.1f", lx + 30) + "\" y=\"" +
         fmt("%.1f", ly + 4) + "\">train</text>\n";
    if (!h.val_loss.empty()) {
        s += "<circle cx=\"" + fmt("%.1f", lx + 12) + "\" cy=\"" + fmt("%.1f", ly + 18) + "\" r=\"3\" fill=\"#d62728\"/><text x=\"" +
             fmt("%.1f", lx + 30) + "\" y=\"" + fmt("%.1f", ly + 22) + "\">validation</text>\n";
    }
    s += "</svg>\n";
    return write_whole(path, s, err);
}

void ft_progress(int64_t step, int64_t total, float loss, float lr, double tokens_per_s, double eta_s, bool last) {
    static const bool tty = isatty(fileno(stderr));
    if (!tty && !last && step % 10 != 0 && step != 1) return;  // a log file gets every 10th step
    const long eta = (long) std::lround(std::max(0.0, eta_s));
    fprintf(stderr, "%sstep %lld/%lld | loss %.4f | lr %.2e | %.1f tokens/s | ETA %ldh%02ldm%02lds%s", tty ? "\r" : "",
            (long long) step, (long long) total, loss, lr, tokens_per_s, eta / 3600, eta / 60 % 60, eta % 60,
            tty && !last ? "   " : "\n");
    fflush(stderr);
}
