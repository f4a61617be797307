// attention_view.cpp — attention pictures and word alignments (see attention_view.h).
#include "toolkit/attention_view.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "tokenizer.h"
#include "toolkit/files.h"
#include "toolkit/svg.h"

namespace fs = std::filesystem;

// The last: on the trained default model it aligned identical words (names) best (README).
int default_alignment_layer(const Config& cfg) { return cfg.n_dec; }

std::string inspect_options_error(const InspectOptions& opt, const Config& cfg) {
    const int both = std::min(cfg.n_enc, cfg.n_dec);
    if (opt.layer > both)
        return "--attention-layer " + std::to_string(opt.layer) + ": the model has " +
               std::to_string(cfg.n_enc) + " encoder and " + std::to_string(cfg.n_dec) +
               " decoder layers (1.." + std::to_string(both) + ", 0: the last)";
    if (opt.alignment_layer > cfg.n_dec)
        return "--alignment-layer " + std::to_string(opt.alignment_layer) + ": the model has " +
               std::to_string(cfg.n_dec) + " decoder layers (1.." + std::to_string(cfg.n_dec) +
               ", 0: the default)";
    return "";
}

// ---------------------------------------------------------------------------------------------
// Words and alignments
// ---------------------------------------------------------------------------------------------
static bool is_special(int id) { return id >= 0 && id < Tokenizer::kNumSpecials; }

std::vector<int> piece_words(const Tokenizer& tok, const std::vector<int>& ids, int* n_words, bool line_breaks) {
    std::vector<int> word(ids.size(), -1);
    int words = 0;
    bool in_word = false;
    std::vector<size_t> waiting;   // pieces of spaces only: they join the next word
    for (size_t i = 0; i < ids.size(); i++) {
        if (is_special(ids[i])) continue;
        int first = -1;
        for (char c : tok.piece_bytes(ids[i])) {
            if (c == ' ' || (line_breaks && (c == '\n' || c == '\r'))) { in_word = false; continue; }
            if (!in_word) words++, in_word = true;
            if (first < 0) first = words - 1;
        }
        if (first < 0) { waiting.push_back(i); continue; }
        word[i] = first;
        for (size_t w : waiting) word[w] = first;
        waiting.clear();
    }
    for (size_t w : waiting) word[w] = words - 1;   // trailing spaces: the last word (or -1)
    *n_words = words;
    return word;
}

std::vector<std::pair<int, int>> hard_alignment(const std::vector<float>& attention, int T, int S,
                                                const std::vector<int>& src_word,
                                                const std::vector<int>& tgt_word) {
    int n_src = 0, n_tgt = 0;
    for (int w : src_word) n_src = std::max(n_src, w + 1);
    for (int w : tgt_word) n_tgt = std::max(n_tgt, w + 1);
    std::vector<double> mass((size_t)n_tgt * n_src, 0.0);   // (target word, source word)
    std::vector<int> pieces(n_tgt, 0);
    for (int i = 0; i < T; i++) {
        if (tgt_word[i] < 0) continue;
        pieces[tgt_word[i]]++;
        for (int j = 0; j < S; j++)
            if (src_word[j] >= 0) mass[(size_t)tgt_word[i] * n_src + src_word[j]] += attention[(size_t)i * S + j];
    }
    std::vector<std::pair<int, int>> pairs;
    for (int t = 0; t < n_tgt && n_src > 0; t++) {
        if (pieces[t] == 0) continue;
        const double* row = &mass[(size_t)t * n_src];
        pairs.push_back({(int)(std::max_element(row, row + n_src) - row), t});
    }
    return pairs;
}

std::string format_alignment(const std::vector<std::pair<int, int>>& pairs) {
    std::string s;
    for (const auto& p : pairs) s += (s.empty() ? "" : " ") + std::to_string(p.first) + "-" + std::to_string(p.second);
    return s;
}

std::vector<float> cross_attention_mean(const AttentionMaps& maps, int layer) {
    const size_t TS = (size_t)maps.T * maps.S;
    std::vector<float> mean(TS, 0.0f);
    for (int h = 0; h < maps.H; h++) {
        const float* p = maps.cross.data() + ((size_t)layer * maps.H + h) * TS;
        for (size_t i = 0; i < TS; i++) mean[i] += p[i] / maps.H;
    }
    return mean;
}

// ---------------------------------------------------------------------------------------------
// What a picture shows: per kind of attention, every layer's and head's map with its labels
// ---------------------------------------------------------------------------------------------
namespace {

// Pieces merged into display groups: a group per piece, or per word (specials alone).
struct Groups {
    std::vector<int> of;               // (pieces) the group of each piece
    std::vector<std::string> label;    // (groups)
};

// At most n characters of a UTF-8 string (cut at a character boundary), "…" when cut.
std::string shorten(const std::string& s, size_t n) {
    size_t chars = 0, i = 0;
    for (; i < s.size(); i++) {
        if (((unsigned char)s[i] & 0xC0) != 0x80) {
            if (chars == n) return s.substr(0, i) + "\xE2\x80\xA6";
            chars++;
        }
    }
    return s;
}

Groups make_groups(const Tokenizer& tok, const std::vector<int>& ids, bool words) {
    Groups g;
    if (!words) {
        for (size_t i = 0; i < ids.size(); i++) {
            g.of.push_back((int)i);
            g.label.push_back(shorten(tok.piece(ids[i]), 24));
        }
        return g;
    }
    int n_words = 0;
    std::vector<int> word = piece_words(tok, ids, &n_words);
    int last_word = -1;
    for (size_t i = 0; i < ids.size(); i++) {
        if (word[i] >= 0 && word[i] == last_word) {   // the same word continues
            g.of.push_back((int)g.label.size() - 1);
            g.label.back() += tok.piece_bytes(ids[i]);
            continue;
        }
        g.of.push_back((int)g.label.size());
        g.label.push_back(word[i] >= 0 ? tok.piece_bytes(ids[i]) : tok.piece(ids[i]));
        last_word = word[i];
    }
    for (std::string& l : g.label) {   // words without their spaces
        l.erase(0, l.find_first_not_of(' ') == std::string::npos ? 0 : l.find_first_not_of(' '));
        while (!l.empty() && l.back() == ' ') l.pop_back();
        if (l.empty()) l = "\xE2\x96\x81";   // a piece of spaces only: ▁
        l = shorten(l, 24);
    }
    return g;
}

struct Grid {
    std::string title, kind;           // kind: enc | dec | cross
    int layers = 0, heads = 0, rows = 0, cols = 0;
    std::vector<std::string> row_label, col_label;
    std::vector<float> p;              // (layers, heads, rows, cols)
    float at(int l, int h, int i, int j) const {
        return p[(((size_t)l * heads + h) * rows + i) * cols + j];
    }
};

// Maps (layers, heads, R, C) over pieces into groups: rows averaged within a group, columns
// summed (so each row stays a distribution).
Grid make_grid(const char* title, const char* kind, const std::vector<float>& p, int layers,
               int heads, int R, int C, const Groups& rows, const Groups& cols) {
    Grid g;
    g.title = title, g.kind = kind;
    g.layers = layers, g.heads = heads;
    g.rows = (int)rows.label.size(), g.cols = (int)cols.label.size();
    g.row_label = rows.label, g.col_label = cols.label;
    g.p.assign((size_t)layers * heads * g.rows * g.cols, 0.0f);
    std::vector<int> count(g.rows, 0);
    for (int i = 0; i < R; i++) count[rows.of[i]]++;
    for (int m = 0; m < layers * heads; m++)
        for (int i = 0; i < R; i++)
            for (int j = 0; j < C; j++)
                g.p[((size_t)m * g.rows + rows.of[i]) * g.cols + cols.of[j]] +=
                    p[((size_t)m * R + i) * C + j] / count[rows.of[i]];
    return g;
}

// ---------------------------------------------------------------------------------------------
// Drawing
// ---------------------------------------------------------------------------------------------
const char* kHeadColours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                              "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
const char* head_colour(int h) { return kHeadColours[h % 10]; }

size_t display_chars(const std::string& s) {
    size_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80;
    return n;
}

size_t longest(const std::vector<std::string>& labels) {
    size_t n = 1;
    for (const std::string& l : labels) n = std::max(n, display_chars(l));
    return n;
}

// The sizes of one heat map of a grid.
struct MapGeometry {
    double cell, font, left, top, width, height;   // width/height: the whole block, with labels
};

MapGeometry map_geometry(const Grid& g) {
    MapGeometry m;
    m.cell = std::clamp(std::floor(260.0 / std::max(g.rows, g.cols)), 6.0, 16.0);
    m.font = std::min(10.0, m.cell - 1);
    m.left = 6 + 0.62 * m.font * longest(g.row_label);
    m.top = 18 + 0.62 * m.font * longest(g.col_label);
    m.width = m.left + g.cols * m.cell + 18;
    m.height = m.top + g.rows * m.cell + 14;
    return m;
}

void draw_heatmap(Svg& svg, const Grid& g, int l, int h, double x0, double y0, const MapGeometry& m) {
    svg.text(x0 + m.left, y0 + 11, "layer " + std::to_string(l + 1) + ", head " + std::to_string(h + 1),
             attr("font-size", 10) + attr("fill", head_colour(h)));
    const std::string fs = attr("font-size", m.font);
    const std::string which = attr("data-kind", g.kind) + attr("data-layer", l + 1) + attr("data-head", h + 1);
    svg.open_group(attr("class", "labels") + which + attr("data-axis", "columns"));
    for (int j = 0; j < g.cols; j++) {   // key labels, rotated, above the columns
        const double x = x0 + m.left + (j + 0.5) * m.cell + m.font * 0.35, y = y0 + m.top - 3;
        svg.text(x, y, g.col_label[j], fs + attr("transform", "rotate(-90 " + svg_num(x) + " " + svg_num(y) + ")"));
    }
    svg.close_group();
    svg.open_group(attr("class", "labels") + which + attr("data-axis", "rows"));
    for (int i = 0; i < g.rows; i++)
        svg.text(x0 + m.left - 3, y0 + m.top + (i + 0.5) * m.cell + m.font * 0.35, g.row_label[i],
                 fs + attr("text-anchor", "end"));
    svg.close_group();
    // One unit square per cell (the group scales it), its opacity the probability (%.6g).
    svg.open_group(attr("class", "heatmap") + which + attr("data-rows", g.rows) + attr("data-cols", g.cols) +
                   attr("fill", "#08306b") +
                   attr("transform", "translate(" + svg_num(x0 + m.left) + " " + svg_num(y0 + m.top) +
                                         ") scale(" + svg_num(m.cell) + ")"));
    for (int i = 0; i < g.rows; i++)
        for (int j = 0; j < g.cols; j++)
            svg.rect(j, i, 1, 1, attr("fill-opacity", std::clamp(g.at(l, h, i, j), 0.0f, 1.0f)));
    svg.close_group();
    svg.rect(x0 + m.left, y0 + m.top, g.cols * m.cell, g.rows * m.cell,
             attr("fill", "none") + attr("stroke", "#bbbbbb") + attr("stroke-width", 0.5));
}

// The paper's line view of layer l: query labels on the left, key labels on the right, one
// line per (head, query, key) of weight >= 0.01 with that opacity, in the head's colour.
struct LineGeometry { double left, gap, right, row, width, height; };

LineGeometry line_geometry(const Grid& g) {
    LineGeometry m;
    m.row = 16;
    m.left = 8 + 6.5 * longest(g.row_label);
    m.gap = 150;
    m.right = 8 + 6.5 * longest(g.col_label);
    m.width = m.left + m.gap + m.right + 20;
    m.height = 34 + m.row * std::max(g.rows, g.cols) + 10;
    return m;
}

void draw_lines(Svg& svg, const Grid& g, int l, double x0, double y0, const LineGeometry& m) {
    svg.text(x0, y0 + 12, g.title + ", layer " + std::to_string(l + 1),
             attr("font-size", 11) + attr("font-weight", "bold"));
    const double xa = x0 + m.left, xb = xa + m.gap, top = y0 + 34;
    for (int i = 0; i < g.rows; i++)
        svg.text(xa - 6, top + (i + 0.5) * m.row + 4, g.row_label[i], attr("font-size", 11) + attr("text-anchor", "end"));
    for (int j = 0; j < g.cols; j++)
        svg.text(xb + 6, top + (j + 0.5) * m.row + 4, g.col_label[j], attr("font-size", 11));
    svg.open_group(attr("class", "lines") + attr("data-kind", g.kind) + attr("data-layer", l + 1) +
                   attr("stroke-width", 2));
    for (int h = 0; h < g.heads; h++)
        for (int i = 0; i < g.rows; i++)
            for (int j = 0; j < g.cols; j++) {
                const float p = g.at(l, h, i, j);
                if (p < 0.01f) continue;
                svg.line(xa, top + (i + 0.5) * m.row, xb, top + (j + 0.5) * m.row,
                         attr("stroke", head_colour(h)) + attr("stroke-opacity", svg_num(std::min(p, 1.0f))));
            }
    svg.close_group();
}

std::vector<Grid> make_grids(const Tokenizer& tok, bool words, const std::vector<int>& source,
                             const std::vector<int>& target, const AttentionMaps& maps) {
    std::vector<int> dec_in(1, BOS_ID);
    dec_in.insert(dec_in.end(), target.begin(), target.end() - 1);
    Groups src = make_groups(tok, source, words), out = make_groups(tok, target, words),
           in = make_groups(tok, dec_in, words);
    return {make_grid("Encoder self-attention", "enc", maps.enc, maps.n_enc, maps.H, maps.S, maps.S, src, src),
            make_grid("Decoder self-attention", "dec", maps.dec, maps.n_dec, maps.H, maps.T, maps.T, out, in),
            make_grid("Encoder-decoder attention", "cross", maps.cross, maps.n_dec, maps.H, maps.T, maps.S, out, src)};
}

}  // namespace

std::string attention_svg(const Tokenizer& tok, const InspectOptions& opt, long line_number,
                          const std::vector<int>& source, const std::vector<int>& target,
                          const AttentionMaps& maps) {
    const std::string src_text = source.empty() ? "" : tok.decode(source), tgt_text = tok.decode(target);
    const std::string head = "line " + std::to_string(line_number) + ": " + shorten(src_text, 150);
    if (source.empty() || target.empty()) {
        Svg svg(420, 60);
        svg.open_group(attr("data-source", src_text) + attr("data-translation", tgt_text));
        svg.text(10, 22, head, attr("font-size", 13) + attr("font-weight", "bold"));
        svg.text(10, 44, "an empty line: nothing to attend to", attr("font-size", 12));
        return svg.finish();
    }
    const std::vector<Grid> grids = make_grids(tok, opt.words, source, target, maps);
    const double margin = 10;
    double width = 560, height = 60;
    for (const Grid& g : grids) {
        const MapGeometry m = map_geometry(g);
        width = std::max(width, 2 * margin + g.heads * m.width);
        height += 24 + g.layers * m.height;
    }
    const int enc_l = opt.layer > 0 ? opt.layer - 1 : maps.n_enc - 1;
    const int dec_l = opt.layer > 0 ? opt.layer - 1 : maps.n_dec - 1;
    double lines_w = margin, lines_h = 0;
    for (const Grid& g : grids) {
        const LineGeometry m = line_geometry(g);
        lines_w += m.width;
        lines_h = std::max(lines_h, m.height);
    }
    width = std::max(width, lines_w + margin);
    height += 40 + lines_h;
    Svg svg(std::ceil(width), std::ceil(height));
    svg.open_group(attr("data-source", src_text) + attr("data-translation", tgt_text) +
                   attr("data-words", opt.words ? "1" : "0"));
    svg.text(margin, 20, head, attr("font-size", 13) + attr("font-weight", "bold"));
    svg.text(margin, 40, "\xE2\x86\x92 " + shorten(tgt_text, 150), attr("font-size", 13));
    double y = 60;
    for (const Grid& g : grids) {   // heat maps: a row of heads per layer
        const MapGeometry m = map_geometry(g);
        svg.text(margin, y + 16, g.title + (opt.words ? " (words)" : " (BPE pieces)") +
                                     ": rows attend to columns",
                 attr("font-size", 12) + attr("font-weight", "bold"));
        y += 24;
        for (int l = 0; l < g.layers; l++, y += m.height)
            for (int h = 0; h < g.heads; h++) draw_heatmap(svg, g, l, h, margin + h * m.width, y, m);
    }
    svg.text(margin, y + 18, "Line view (opacity = weight; colours: heads 1, 2, ... as in the titles above)",
             attr("font-size", 12) + attr("font-weight", "bold"));
    y += 40;
    double x = margin;
    for (const Grid& g : grids) {
        const LineGeometry m = line_geometry(g);
        draw_lines(svg, g, g.kind == "enc" ? enc_l : dec_l, x, y, m);
        x += m.width;
    }
    return svg.finish();
}

bool inspect_translation(Model* m, const Tokenizer& tok, const InspectOptions& opt,
                         long line_number, const std::vector<int>& source,
                         const std::vector<int>& target, bool picture, std::string* suffix,
                         std::string* error) {
    suffix->clear();
    AttentionMaps maps;
    const bool empty = source.empty() || target.empty();
    if (!empty) model_attention(m, source, target, &maps);
    if (opt.alignment) {
        std::vector<std::pair<int, int>> pairs;
        if (!empty) {
            int n_src = 0, n_tgt = 0;
            const int layer = (opt.alignment_layer > 0 ? opt.alignment_layer : default_alignment_layer(m->cfg)) - 1;
            pairs = hard_alignment(cross_attention_mean(maps, layer), maps.T, maps.S,
                                   piece_words(tok, source, &n_src), piece_words(tok, target, &n_tgt, true));
        }
        *suffix = " ||| " + format_alignment(pairs);
    }
    if (opt.dir.empty() || !picture) return true;
    char name[32];
    std::snprintf(name, sizeof name, "%06ld.svg", line_number);
    return write_file_replacing((fs::path(opt.dir) / name).string(),
                             attention_svg(tok, opt, line_number, source, target, maps), error);
}
