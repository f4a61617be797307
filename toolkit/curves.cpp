// curves.cpp — log.csv -> curves.svg (see curves.h).
#include "toolkit/curves.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "toolkit/files.h"
#include "toolkit/svg.h"

namespace {

struct Log {
    std::vector<std::string> columns;
    std::vector<std::vector<double>> rows;   // NaN where a value is empty or unreadable
    int column(const std::string& name) const {
        for (size_t i = 0; i < columns.size(); i++)
            if (columns[i] == name) return (int)i;
        return -1;
    }
};

std::vector<std::string> split_csv_line(const std::string& line) {
    std::vector<std::string> out(1);
    for (char c : line) {
        if (c == ',') out.emplace_back();
        else if (c != '\r') out.back() += c;
    }
    return out;
}

double parse_number(const std::string& s) {
    if (s.empty()) return NAN;
    char* end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    return end && *end == '\0' ? v : NAN;
}

bool parse_log(const std::string& text, Log* log, std::string* error) {
    size_t start = 0, line_no = 0;
    while (start < text.size()) {
        size_t nl = text.find('\n', start);
        if (nl == std::string::npos) nl = text.size();
        std::string line = text.substr(start, nl - start);
        start = nl + 1;
        line_no++;
        if (line.empty() || line == "\r") continue;
        std::vector<std::string> fields = split_csv_line(line);
        if (log->columns.empty()) {
            log->columns = fields;
            if (log->column("step") < 0) {
                *error = "no 'step' column in the header";
                return false;
            }
            continue;
        }
        std::vector<double> row(log->columns.size(), NAN);
        for (size_t i = 0; i < row.size() && i < fields.size(); i++) row[i] = parse_number(fields[i]);
        if (!std::isfinite(row[log->column("step")])) {
            *error = "line " + std::to_string(line_no) + ": no step";
            return false;
        }
        log->rows.push_back(row);
    }
    if (log->columns.empty()) {
        *error = "empty log (no header)";
        return false;
    }
    return true;
}

struct Series {
    const char* column;
    const char* label;
    const char* colour;
    int panel;            // 0: losses and BLEU, 1: learning rate and wall time
    bool right;           // on the panel's right axis
    bool markers;         // sparse series: a dot at each point too
    double scale = 1;     // plotted value = logged value * scale
    std::vector<double> x, y;
};

// Ticks 1, 2 or 5 x 10^k covering [lo, hi].
struct Axis {
    double lo = 0, hi = 1, step = 0.2;
};

Axis nice_axis(double lo, double hi, bool from_zero) {
    if (!std::isfinite(lo) || !std::isfinite(hi)) lo = 0, hi = 1;
    if (from_zero) lo = std::min(lo, 0.0);
    if (hi - lo < 1e-12 * std::max(1.0, std::fabs(hi))) {
        double pad = std::fabs(hi) > 0 ? std::fabs(hi) * 0.1 : 1;
        lo -= pad, hi += pad;
        if (from_zero) lo = std::max(lo, 0.0);
    }
    double raw = (hi - lo) / 5, mag = std::pow(10.0, std::floor(std::log10(raw)));
    double step = raw / mag <= 1 ? mag : raw / mag <= 2 ? 2 * mag : raw / mag <= 5 ? 5 * mag : 10 * mag;
    return Axis{std::floor(lo / step + 1e-9) * step, std::ceil(hi / step - 1e-9) * step, step};
}

// A tick's number with the significant digits its axis's step needs (2.1235 on a 0.0005 step,
// 12345.5 on a 0.5 step), without an exponent below a million (10000, not 1e+04).
std::string tick_label(double v, const Axis& a) {
    const double most = std::max(std::fabs(a.lo), std::fabs(a.hi));
    const int top = most > 0 ? (int)std::floor(std::log10(most)) : 0;
    const int last = (int)std::floor(std::log10(a.step) + 1e-9);
    int digits = top - last + 1;
    if (top >= 0 && most < 1e6) digits = std::max(digits, top + 1);
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.*g", std::clamp(digits, 1, 15), std::fabs(v) < a.step * 1e-6 ? 0.0 : v);
    return buf;
}

struct Panel {
    double top, height, left, width;
    double y(const Axis& a, double v) const { return top + height - (v - a.lo) / (a.hi - a.lo) * height; }
};

void draw_y_axis(Svg& svg, const Panel& p, const Axis& a, bool right, const std::string& title) {
    const double x = right ? p.left + p.width : p.left;
    const std::string anchor = attr("text-anchor", right ? "start" : "end") + attr("font-size", 10);
    for (double v = a.lo; v <= a.hi + a.step * 1e-6; v += a.step) {
        const double y = p.y(a, v);
        if (!right) svg.line(p.left, y, p.left + p.width, y, attr("stroke", "#e6e6e6"));
        svg.line(x, y, x + (right ? 4 : -4), y, attr("stroke", "#444444"));
        svg.text(x + (right ? 7 : -7), y + 3.5, tick_label(v, a), anchor);
    }
    const double tx = right ? x + 58 : x - 56, ty = p.top + p.height / 2;
    svg.text(tx, ty, title, attr("font-size", 11) + attr("text-anchor", "middle") +
                                attr("transform", "rotate(-90 " + svg_num(tx) + " " + svg_num(ty) + ")"));
}

void draw_x_axis(Svg& svg, const Panel& p, const Axis& a) {
    const double y = p.top + p.height;
    for (double v = a.lo; v <= a.hi + a.step * 1e-6; v += a.step) {
        const double x = p.left + (v - a.lo) / (a.hi - a.lo) * p.width;
        svg.line(x, p.top, x, y, attr("stroke", "#f0f0f0"));
        svg.line(x, y, x, y + 4, attr("stroke", "#444444"));
        svg.text(x, y + 15, tick_label(v, a), attr("font-size", 10) + attr("text-anchor", "middle"));
    }
    svg.rect(p.left, p.top, p.width, p.height, attr("fill", "none") + attr("stroke", "#444444"));
}

}  // namespace

std::string training_curves_svg(const std::string& log_csv, std::string* error) {
    Log log;
    if (!parse_log(log_csv, &log, error)) return "";
    std::vector<Series> series = {
        {"train_loss", "training loss", "#1f77b4", 0, false, false, 1, {}, {}},
        {"dev_loss", "dev loss", "#d62728", 0, false, true, 1, {}, {}},
        {"bleu_dev", "dev BLEU", "#2ca02c", 0, true, true, 1, {}, {}},
        {"bleu_test", "test BLEU", "#9467bd", 0, true, true, 1, {}, {}},
        {"lr", "learning rate", "#ff7f0e", 1, false, false, 1, {}, {}},
        {"elapsed_s", "wall time", "#555555", 1, true, false, 1, {}, {}},
    };
    const int step_col = log.column("step");
    double max_elapsed = 0, x_lo = INFINITY, x_hi = -INFINITY;
    for (const auto& row : log.rows) {
        x_lo = std::min(x_lo, row[step_col]);
        x_hi = std::max(x_hi, row[step_col]);
        int e = log.column("elapsed_s");
        if (e >= 0 && std::isfinite(row[e])) max_elapsed = std::max(max_elapsed, row[e]);
    }
    const bool hours = max_elapsed > 3 * 3600;
    series.back().scale = hours ? 1.0 / 3600 : 1.0 / 60;
    for (Series& s : series) {
        const int c = log.column(s.column);
        if (c < 0) continue;
        for (const auto& row : log.rows)
            if (std::isfinite(row[c])) {
                s.x.push_back(row[step_col]);
                s.y.push_back(row[c] * s.scale);
            }
    }
    const double W = 760, H = 560;
    Svg svg(W, H);
    svg.text(W / 2, 22, "Training curves (" + std::to_string(log.rows.size()) + (log.rows.size() == 1 ? " row" : " rows") +
                            " of log.csv)",
             attr("font-size", 14) + attr("font-weight", "bold") + attr("text-anchor", "middle"));
    const Panel panels[2] = {{56, 240, 80, 600}, {360, 150, 80, 600}};
    Axis xa = nice_axis(std::isfinite(x_lo) ? x_lo : 0, std::isfinite(x_hi) ? x_hi : 1, true);
    if (std::isfinite(x_hi) && x_hi > xa.lo) xa.hi = x_hi;   // the axis ends at the last step
    const char* titles[2][2] = {{"loss", "BLEU"}, {"learning rate", hours ? "wall time (h)" : "wall time (min)"}};
    for (int p = 0; p < 2; p++) {
        for (int right = 0; right < 2; right++) {
            double lo = INFINITY, hi = -INFINITY;
            for (const Series& s : series)
                if (s.panel == p && s.right == (bool)right)
                    for (double v : s.y) lo = std::min(lo, v), hi = std::max(hi, v);
            if (!std::isfinite(lo)) continue;   // nothing on this axis (e.g. no BLEU yet)
            const Axis ya = nice_axis(lo, hi, p == 1 || right);
            draw_y_axis(svg, panels[p], ya, right, titles[p][right]);
            for (const Series& s : series) {
                if (s.panel != p || s.right != (bool)right) continue;
                std::vector<double> xs, ys;
                for (size_t i = 0; i < s.x.size(); i++) {
                    xs.push_back(panels[p].left + (s.x[i] - xa.lo) / (xa.hi - xa.lo) * panels[p].width);
                    ys.push_back(panels[p].y(ya, s.y[i]));
                }
                svg.polyline(xs, ys, attr("data-series", s.column) + attr("data-points", (double)xs.size()) +
                                         attr("stroke", s.colour) + attr("stroke-width", 1.5));
                if (s.markers)
                    for (size_t i = 0; i < xs.size(); i++) svg.circle(xs[i], ys[i], 2.5, attr("fill", s.colour));
            }
        }
        draw_x_axis(svg, panels[p], xa);
    }
    svg.text(panels[1].left + panels[1].width / 2, panels[1].top + panels[1].height + 34, "step",
             attr("font-size", 11) + attr("text-anchor", "middle"));
    double lx = 80;   // legend: the series the log has
    for (const Series& s : series) {
        if (s.x.empty()) continue;
        svg.rect(lx, 34, 14, 4, attr("fill", s.colour));
        svg.text(lx + 18, 40, s.label, attr("font-size", 11));
        lx += 26 + 6.5 * std::string(s.label).size();
    }
    if (log.rows.empty())
        svg.text(W / 2, 180, "no rows yet", attr("font-size", 12) + attr("text-anchor", "middle"));
    return svg.finish();
}

bool draw_training_curves(const std::string& log_path, const std::string& svg_path,
                          std::string* error) {
    std::string text, why;
    if (!read_file(log_path, &text, &why)) {
        *error = "cannot read " + log_path + ": " + why;
        return false;
    }
    std::string err, svg = training_curves_svg(text, &err);
    if (svg.empty()) {
        *error = log_path + ": " + err;
        return false;
    }
    return write_file_replacing(svg_path, svg, error);
}
