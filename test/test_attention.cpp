// test/test_attention.cpp — looking inside (toolkit/attention_view.h, toolkit/curves.h,
// toolkit/svg.h): hard word alignment on constructed attention with known answers, pieces to
// words, XML escaping, model_attention against the decoder it explains (the teacher-forced
// pass reproduces every hypothesis' log-probability from greedy and beam search; with the
// query projection of a layer zeroed every row is exactly uniform over the keys its masks
// allow; rows sum to 1, the causal half is 0), and, given OUT_DIR, the files that
// test/test_pictures.sh checks with python3 and rsvg-convert: pieces.svg and words.svg (one
// translation's picture) with maps.json (the probabilities model_attention returned), and
// curves.svg from a synthetic log.csv.
//
//   build/test_attention [OUT_DIR]      (make test runs it through test/test_pictures.sh)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "test/check.h"
#include "tokenizer.h"
#include "toolkit/attention_view.h"
#include "toolkit/curves.h"
#include "toolkit/decode.h"
#include "toolkit/files.h"
#include "toolkit/svg.h"

// ---------------------------------------------------------------------------------------------
// Alignment and words
// ---------------------------------------------------------------------------------------------
static void test_hard_alignment() {
    // Source pieces: w0 | w1 w1 | w2 | </s>;  target pieces: w0 w0 | w1 | w2 | </s>.
    const std::vector<int> src_word = {0, 1, 1, 2, -1}, tgt_word = {0, 0, 1, 2, -1};
    const int S = 5, T = 5;
    const std::vector<float> attn = {
        // target word 0, first piece: source word 2 (0.4) beats word 0 (0.35)...
        0.35f, 0.05f, 0.05f, 0.40f, 0.15f,
        // ... second piece: word 0 0.5, word 2 0.2: averaged, word 0 (0.425) beats 2 (0.30)
        0.50f, 0.10f, 0.10f, 0.20f, 0.10f,
        // target word 1: source word 1 as the sum of its two pieces (0.3 + 0.3 > 0.4)
        0.40f, 0.30f, 0.30f, 0.00f, 0.00f,
        // target word 2: a tie between source words 0 and 2 goes to the lower index
        0.30f, 0.10f, 0.10f, 0.30f, 0.20f,
        // </s> row: ignored (belongs to no word), however it attends
        0.00f, 0.00f, 0.00f, 0.00f, 1.00f};
    std::string got = format_alignment(hard_alignment(attn, T, S, src_word, tgt_word));
    check(got == "0-0 1-1 0-2", "hard alignment on constructed attention: '%s' (want '0-0 1-1 0-2')", got.c_str());
    // Crossing alignment (a permutation), and a source of no words at all.
    const std::vector<float> perm = {0, 0, 1, 1, 0, 0, 0, 1, 0};
    got = format_alignment(hard_alignment(perm, 3, 3, {0, 1, 2}, {0, 1, 2}));
    check(got == "2-0 0-1 1-2", "crossing alignment: '%s' (want '2-0 0-1 1-2')", got.c_str());
    got = format_alignment(hard_alignment(perm, 3, 3, {-1, -1, -1}, {0, 1, 2}));
    check(got.empty(), "a source without words aligns nothing: '%s'", got.c_str());
}

// The expected word of every byte piece of text (byte pieces: one piece per byte), by walking
// the text: a byte belongs to the run of non-spaces it is in; spaces to the next word.
static std::vector<int> expected_byte_words(const std::string& text, int* words) {
    std::vector<int> word(text.size(), -1);
    int n = 0;
    for (size_t i = 0; i < text.size(); i++)
        if (text[i] != ' ' && (i == 0 || text[i - 1] == ' ')) n++;
    *words = n;
    int current = -1;
    for (size_t i = 0; i < text.size(); i++) {
        if (text[i] != ' ' && (i == 0 || text[i - 1] == ' ')) current++;
        word[i] = text[i] == ' ' ? std::min(current + 1, n - 1) : current;
    }
    return word;
}

static void test_piece_words() {
    Tokenizer tok;   // byte pieces only: one piece per byte
    for (const std::string text : {"a < b & \"c\"", "  two  spaces ", "one", "   "}) {
        std::vector<int> ids = tok.encode(text);
        int n = 0, want_n = 0;
        std::vector<int> got = piece_words(tok, ids, &n);
        std::vector<int> want = expected_byte_words(text, &want_n);
        check(got == want && n == want_n, "piece_words('%s'): %d words (want %d), every piece's word as expected",
              text.c_str(), n, want_n);
    }
    std::vector<int> ids = tok.encode("a b");
    ids.push_back(EOS_ID);
    int n = 0;
    std::vector<int> w = piece_words(tok, ids, &n);
    check(w.back() == -1 && n == 2, "</s> belongs to no word (%d), 2 words (%d)", w.back(), n);
    // the specials' ends: <pad> (id 0) belongs to no word, the byte 0x00 (the first piece past the
    // specials) is a character of its word like any other
    ids = tok.encode(std::string("x\0y z", 5));
    ids.insert(ids.begin(), PAD_ID);
    w = piece_words(tok, ids, &n);
    check(w == std::vector<int>({-1, 0, 0, 0, 1, 1}) && n == 2,
          "<pad> then 'x', byte 0x00 (piece %d), 'y z': words %d %d %d %d %d %d (want -1 0 0 0 1 1), %d words (want 2)",
          ids.size() > 2 ? ids[2] : -1, w.size() > 0 ? w[0] : -9, w.size() > 1 ? w[1] : -9, w.size() > 2 ? w[2] : -9,
          w.size() > 3 ? w[3] : -9, w.size() > 4 ? w[4] : -9, w.size() > 5 ? w[5] : -9, n);
}

// inspect_options_error: --attention-layer up to the fewer of the encoder's and the decoder's
// layers, --alignment-layer up to the decoder's, each taken at its last valid value.
static void test_inspect_options() {
    Config c;
    c.n_enc = 3, c.n_dec = 2;
    for (const int layer : {2, 3}) {
        InspectOptions view, align;
        view.layer = layer, align.alignment_layer = layer;
        const std::string view_error = inspect_options_error(view, c), align_error = inspect_options_error(align, c);
        const bool want_error = layer > 2;
        check(view_error.empty() != want_error && align_error.empty() != want_error,
              "a model of 3 encoder and 2 decoder layers, layer %d: --attention-layer %s, --alignment-layer %s (want both %s)",
              layer, view_error.empty() ? "taken" : ("refused: " + view_error).c_str(),
              align_error.empty() ? "taken" : ("refused: " + align_error).c_str(), want_error ? "refused" : "taken");
    }
}

static void test_escape() {
    // (0x80: the lowest byte past ASCII, a continuation byte alone; U+FFFE and U+FFFF: not XML
    // characters; the '!' after é: the byte after a multi-byte character is read)
    const std::string got = xml_escape("a<b & \"c\" 'd'>\x01\x80\xC3(\xC3\xA9!\xEF\xBF\xBE\xEF\xBF\xBF.");
    const std::string fffd = "\xEF\xBF\xBD";
    const std::string want =
        "a&lt;b &amp; &quot;c&quot; &apos;d&apos;&gt;" + fffd + fffd + fffd + "(\xC3\xA9!" + fffd + fffd + ".";
    check(got == want, "xml_escape: entities, a control byte, a lone 0x80, invalid UTF-8, U+FFFE and U+FFFF as "
          "U+FFFD, é kept: '%s'", got.c_str());
}

// ---------------------------------------------------------------------------------------------
// model_attention against the decoder
// ---------------------------------------------------------------------------------------------
static Config small_config() {
    Config c;
    // 3 encoder layers, 2 decoder: each kind's last layer is its own in the pictures' line view
    c.n_enc = 3, c.n_dec = 2, c.d_model = 32, c.d_ff = 64, c.n_heads = 4, c.d_k = 8, c.d_v = 8;
    c.vocab = 260;   // the byte tokenizer's ids, so that pictures can label the pieces
    c.max_len = 64;
    c.p_drop = 0.1f;   // must not apply: model_attention runs without dropout
    return c;
}

static bool rows_sum_to_one(const std::vector<float>& p, int rows, int cols, double* worst) {
    *worst = 0;
    for (size_t r = 0; r < p.size() / cols; r++) {
        double s = 0;
        for (int j = 0; j < cols; j++) s += p[r * cols + j];
        *worst = std::max(*worst, std::fabs(s - 1));
    }
    (void)rows;
    return *worst < 1e-5;
}

// The teacher-forced pass's log-probability of the hypothesis (from its logits).
static double teacher_forced_logprob(Model& m, const std::vector<int>& target) {
    std::vector<float> logits;
    model_logits(&m, &logits);
    const int V = m.cfg.vocab;
    double sum = 0;
    for (size_t t = 0; t < target.size(); t++) {
        const float* z = &logits[t * V];
        double mx = *std::max_element(z, z + V), se = 0;
        for (int v = 0; v < V; v++) se += std::exp((double)z[v] - mx);
        sum += z[target[t]] - mx - std::log(se);
    }
    return sum;
}

static void check_maps(const AttentionMaps& a, const char* what) {
    double w1 = 0, w2 = 0, w3 = 0;
    bool ok = rows_sum_to_one(a.enc, a.S, a.S, &w1);
    ok = rows_sum_to_one(a.dec, a.T, a.T, &w2) && ok;
    ok = rows_sum_to_one(a.cross, a.T, a.S, &w3) && ok;
    check(ok, "%s: every row of every map sums to 1 (max |sum - 1| %.1e %.1e %.1e)", what, w1, w2, w3);
    float above = 0;
    for (size_t m = 0; m < (size_t)a.n_dec * a.H; m++)
        for (int i = 0; i < a.T; i++)
            for (int j = i + 1; j < a.T; j++) above = std::max(above, a.dec[(m * a.T + i) * a.T + j]);
    check(above == 0.0f, "%s: decoder self-attention is 0 above the diagonal (max %.1e)", what, above);
}

static void test_against_decoder(Model* m, const std::vector<std::vector<int>>& sources) {
    for (int beam : {1, 4}) {
        DecodeOptions opt;
        opt.beam = beam;
        opt.max_len_a = 0, opt.max_len_b = 12;
        std::vector<std::vector<Hypothesis>> hyps = decode_batch(m, sources, opt);
        double worst = 0;
        bool no_pad = true;
        for (size_t i = 0; i < sources.size(); i++) {
            const Hypothesis& h = hyps[i][0];
            for (int t : h.tokens) no_pad &= t != PAD_ID;
            AttentionMaps a;
            model_attention(m, sources[i], h.tokens, &a);
            worst = std::max(worst, std::fabs(teacher_forced_logprob(*m, h.tokens) - h.logprob));
            if (i == 0) check_maps(a, beam == 1 ? "greedy" : "beam 4");
        }
        check(no_pad, "beam %d: no hypothesis holds <pad> (a <pad> input would be masked in the teacher-forced pass)", beam);
        check(worst < 1e-4, "beam %d: the teacher-forced pass gives each best hypothesis' log-probability "
              "(%zu sentences, max |diff| %.2e < 1e-4): it is the computation the search ran", beam,
              sources.size(), worst);
    }
}

// With layer 0's query projections zeroed, every score is 0: rows are uniform over the keys
// the masks allow (1/S for encoder and cross-attention, 1/(i+1) for decoder row i).
static void test_uniform(Model* m, const std::vector<int>& source, const std::vector<int>& target) {
    std::vector<float> p(m->layout.total), saved;
    model_get_params(m, p.data());
    saved = p;
    for (const LinearP* q : {&m->layout.enc[0].self_attn.q, &m->layout.dec[0].self_attn.q, &m->layout.dec[0].cross_attn.q}) {
        std::fill(p.begin() + q->w, p.begin() + q->w + (size_t)q->out * q->in, 0.0f);
        std::fill(p.begin() + q->b, p.begin() + q->b + q->out, 0.0f);
    }
    model_set_params(m, p.data());
    AttentionMaps a;
    model_attention(m, source, target, &a);
    const int S = a.S, T = a.T;
    double err_enc = 0, err_dec = 0, err_cross = 0;
    for (int h = 0; h < a.H; h++) {
        for (int i = 0; i < S; i++)
            for (int j = 0; j < S; j++) err_enc = std::max(err_enc, std::fabs(a.enc[((size_t)h * S + i) * S + j] - 1.0 / S));
        for (int i = 0; i < T; i++) {
            for (int j = 0; j < T; j++)
                err_dec = std::max(err_dec, std::fabs(a.dec[((size_t)h * T + i) * T + j] - (j <= i ? 1.0 / (i + 1) : 0.0)));
            for (int j = 0; j < S; j++) err_cross = std::max(err_cross, std::fabs(a.cross[((size_t)h * T + i) * S + j] - 1.0 / S));
        }
    }
    check(err_enc < 1e-6 && err_dec < 1e-6 && err_cross < 1e-6,
          "query projections of layer 1 zeroed: uniform rows as the masks allow (max error enc %.1e, "
          "decoder 1/(i+1) %.1e, cross 1/S %.1e)", err_enc, err_dec, err_cross);
    model_set_params(m, saved.data());
}

// ---------------------------------------------------------------------------------------------
// Files for test/test_pictures.sh
// ---------------------------------------------------------------------------------------------
static std::string json_array(const std::vector<float>& v) {
    std::string s = "[";
    char buf[32];
    for (size_t i = 0; i < v.size(); i++) {
        std::snprintf(buf, sizeof buf, "%s%.9g", i ? "," : "", v[i]);
        s += buf;
    }
    return s + "]";
}

// Whether the picture `file` can be read and holds `text`.
static bool svg_says(const std::string& file, const std::string& text) {
    std::string svg;
    return read_file(file, &svg) && svg.find(text) != std::string::npos;
}

static void write_files(Model* m, const Tokenizer& tok, const std::string& dir) {
    // words of 24 characters (the first: many pieces) and of more (cut to 24 in the labels), with
    // two-byte characters
    const std::string line =
        "\xC3\xA9t\xC3\xA9-twenty-four-letters! a < b & \"c\" 'd' \xC3\xA9t\xC3\xA9-past-twenty-four-letters";
    std::vector<int> source = tok.encode(line);
    source.push_back(EOS_ID);
    DecodeOptions opt;
    opt.beam = 4;
    opt.max_len_a = 0, opt.max_len_b = 10;
    Hypothesis h = decode_batch(m, {source}, opt)[0][0];
    AttentionMaps a;
    model_attention(m, source, h.tokens, &a);
    std::string err;
    InspectOptions io;
    bool ok = write_file_replacing(dir + "/pieces.svg", attention_svg(tok, io, 1, source, h.tokens, a), &err);
    io.words = true;
    io.layer = 1;
    ok = ok && write_file_replacing(dir + "/words.svg", attention_svg(tok, io, 1, source, h.tokens, a), &err);
    // an empty source line with a translation: no maps to draw (none were computed), the line said empty
    const std::string empty_source = attention_svg(tok, io, 2, {}, h.tokens, AttentionMaps());
    check(empty_source.find("an empty line: nothing to attend to") != std::string::npos &&
              empty_source.find("class=\"heatmap\"") == std::string::npos,
          "an empty source line with a %zu-token translation: its picture says the line is empty and draws no map (%zu bytes)",
          h.tokens.size(), empty_source.size());
    // and inspect_translation on it: no attention computed, no pairs, that picture written
    InspectOptions both;
    both.alignment = true, both.dir = dir;
    std::string suffix;
    const bool inspected = inspect_translation(m, tok, both, 9, {}, h.tokens, true, &suffix, &err);
    check(inspected && suffix == " ||| " && svg_says(dir + "/000009.svg", "an empty line: nothing to attend to"),
          "inspect_translation of an empty source line with a translation: %s, alignment '%s' (want ' ||| '), "
          "000009.svg an empty line's picture", inspected ? "done" : err.c_str(), suffix.c_str());
    char head[160];
    std::snprintf(head, sizeof head, "{\"S\": %d, \"T\": %d, \"H\": %d, \"n_enc\": %d, \"n_dec\": %d, ", a.S, a.T,
                  a.H, a.n_enc, a.n_dec);
    ok = ok && write_file_replacing(dir + "/maps.json", std::string(head) + "\"enc\": " + json_array(a.enc) +
                                 ", \"dec\": " + json_array(a.dec) + ", \"cross\": " + json_array(a.cross) + "}\n", &err);
    // Three logs, each written as log{name}.csv and drawn as curves{name}.svg:
    // "": as resumed runs, other helpers' events and missing values leave it (unknown event
    // names, a non-finite loss, a step that goes back after a resume, BLEU at the end);
    // "_hours": a long run, wall time past 3 hours drawn in hours, steps in the hundred thousands;
    // "_flat": a flat stretch late in a run, losses within 0.003 of 2.12, whose ticks need five
    // significant digits (2.1235) to name their places, and steps past 10,000.
    const struct { const char* name; const char* csv; } logs[] = {
        {"",
         "event,step,epoch,train_loss,lr,dev_loss,bleu_dev,bleu_test,elapsed_s,extra\n"
         "train,10,0.1,9.5,0.0001,,,,12.0,x\n"
         "train,20,0.2,8.1,0.0002,,,,24.5,\n"
         "dev,20,0.2,,0.0002,7.9,,,30.0\n"
         "nonfinite,25,0.25,inf,0.00025,,,,33.0\n"
         "train,30,0.3,7.0,0.0003,,,,40.0\n"
         "train,28,0.28,7.2,0.00028,,,,41.0\n"
         "eval,40,0.4,,0.0004,6.0,3.5,,55.0\n"
         "final,40,0.4,,,6.1,4.0,4.5,70.0\n"},
        {"_hours",
         "event,step,epoch,train_loss,lr,dev_loss,bleu_dev,bleu_test,elapsed_s\n"
         "train,1000,0.5,6.25,0.0007,,,,600\n"
         "eval,50000,12,,0.00028,2.1,24.5,,9000\n"
         "train,100000,25,1.75,0.0002,,,,14400\n"
         "final,100000,25,,,2.0,26.75,27.5,15300\n"},
        {"_flat",
         "event,step,epoch,train_loss,lr,dev_loss,bleu_dev,bleu_test,elapsed_s\n"
         "train,12340,3,2.1234,0.0001,,,,3000\n"
         "train,12343,3,2.1256,0.0001,,,,3001\n"
         "dev,12346,3,,0.0001,2.1241,,,3002\n"},
        // "_steps_first": columns read by name in any order, step first, no wall time; a row
        // shorter than the header, one longer, a blank line (and one of a lone \r), a value
        // with trailing text (not drawn)
        {"_steps_first",
         "step,train_loss,dev_loss\n"
         "100,5.0\n"
         "\n"
         "200,4.0,4.5,7,8\n"
         "\r\n"
         "300,3.5x,4.25\n"
         "400,3.0,3.75\n"},
        // "_elapsed_first": wall time first, 10 h (an axis of 2 h steps); BLEU 10 to 50 (steps
        // of 10), losses 5 to 30 (steps of 5): each step a fifth of its axis exactly
        {"_elapsed_first",
         "elapsed_s,event,step,train_loss,bleu_dev\n"
         "3600,train,100,30,10\n"
         "36000,eval,200,5,50\n"},
        // "_three_hours": exactly 3 hours of wall time, still in minutes
        {"_three_hours",
         "event,step,train_loss,elapsed_s\n"
         "train,10,4,5400\n"
         "train,20,3,10800\n"},
        // "_step0": one row, at step 0 (an x axis of 0 to 1); "_empty": the header alone
        {"_step0", "event,step,train_loss,elapsed_s\ntrain,0,2.5,1\n"},
        {"_empty", "event,step,epoch,train_loss,lr,dev_loss,bleu_dev,bleu_test,elapsed_s\n"},
        // "_million": steps to a million, where tick labels take an exponent (1e+06)
        {"_million", "event,step,train_loss,elapsed_s\ntrain,500000,2,100\ntrain,1000000,1.5,200\n"},
    };
    for (const auto& l : logs) {
        const std::string csv = dir + "/log" + l.name + ".csv";
        ok = ok && write_file_replacing(csv, l.csv, &err);
        ok = ok && draw_training_curves(csv, dir + "/curves" + l.name + ".svg", &err);
    }
    check(ok, "pictures written to %s %s", dir.c_str(), err.c_str());
    // wall time in hours past 3 hours only
    const bool hours = svg_says(dir + "/curves_elapsed_first.svg", "wall time (h)");
    const bool minutes = svg_says(dir + "/curves_three_hours.svg", "wall time (min)");
    check(hours && minutes, "curves: 10 hours of wall time drawn in hours (%d), exactly 3 in minutes (%d)", hours, minutes);
    const bool empty = svg_says(dir + "/curves_empty.svg", "no rows yet") &&
                       svg_says(dir + "/curves_empty.svg", "(0 rows of log.csv)");
    check(empty, "curves: a log of its header alone says 'no rows yet' (0 rows)");
    // tick labels without an exponent below a million, with one from a million
    const bool plain = svg_says(dir + "/curves_hours.svg", ">100000</text>") && !svg_says(dir + "/curves_hours.svg", "e+");
    const bool exponent = svg_says(dir + "/curves_million.svg", ">1e+06</text>");
    check(plain && exponent, "curves: step 100000 labelled '100000' (%d), a million '1e+06' (%d)", plain, exponent);
}

static void test_curves_refusals() {
    std::string err;
    bool refused = training_curves_svg("", &err).empty() && !err.empty();
    check(refused, "curves: an empty log is refused (%s)", err.c_str());
    err.clear();
    refused = training_curves_svg("event,epoch\ntrain,1\n", &err).empty() && !err.empty();
    check(refused, "curves: a log without a step column is refused (%s)", err.c_str());
    err.clear();
    refused = !draw_training_curves("/nonexistent/log.csv", "/nonexistent/curves.svg", &err) &&
              err.find("No such file or directory") != std::string::npos;
    check(refused, "curves: a missing log is an error saying why (%s)", err.c_str());
    err.clear();
    refused = !draw_training_curves("/", "/nonexistent/curves.svg", &err) && err.find("Is a directory") != std::string::npos;
    check(refused, "curves: a folder for the log is an error saying why (%s)", err.c_str());
    err.clear();
    refused = training_curves_svg("event,step\ntrain,10\ntrain,abc\n", &err).empty() && err == "line 3: no step";
    check(refused, "curves: a row without a step is refused, naming its line (%s)", err.c_str());
    const std::string one = training_curves_svg("event,step,train_loss\ntrain,10,2.5\n", &err);
    check(one.find("(1 row of log.csv)") != std::string::npos, "curves: one row's title says '1 row'");
}

int main(int argc, char** argv) {
    test_hard_alignment();
    test_piece_words();
    test_inspect_options();
    test_escape();
    test_curves_refusals();
    Model m;
    model_init(&m, small_config(), 7);
    Tokenizer tok;
    std::vector<std::vector<int>> sources;
    for (const char* s : {"sun moon", "a < b & c", "the star", "x", "rain on the sea, then fire"}) {
        sources.push_back(tok.encode(s));
        sources.back().push_back(EOS_ID);
    }
    test_against_decoder(&m, sources);
    test_uniform(&m, sources[1], {40, 50, 60, EOS_ID});
    if (argc > 1) write_files(&m, tok, argv[1]);
    return check_summary("attention");
}
