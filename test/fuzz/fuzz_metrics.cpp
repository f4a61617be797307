// test/fuzz/fuzz_metrics.cpp — ./bleu's tokenizers and scores on arbitrary bytes (invalid UTF-8
// included): sacreBLEU's BLEU tokenizers, Tercom's, and BLEU, chrF and TER of a hypothesis
// against a reference. The first byte picks the options (BLEU's tokenizer and smoothing, chrF's
// orders and switches, TER's four flags); the rest, up to its first '\n', is the hypothesis and
// after it the reference. Besides never crashing (the sanitizers watch), the tokenizers that only
// add spaces (intl, zh, char, none; Tercom's without normalization or punctuation removal, case
// kept) must keep every other byte, and a text scored against itself must score BLEU 100 when it
// has 4 or more tokens, chrF 100 when it has n-grams of every order, TER 0 (valid UTF-8).
#include "test/fuzz/fuzz.h"
#include "toolkit/bleu_score.h"
#include "toolkit/ter_score.h"

// Whether s is valid UTF-8 (what sacreBLEU can read at all).
static bool valid_utf8(const std::string& s) { return invalid_utf8_at(s) < 0; }

// The bytes of s that are not Python white space, in order.
static std::string non_space(const std::string& s) {
    std::string out;
    for (std::string_view w : py_split(s)) out.append(w);
    return out;
}

static void check_tokenizers(const std::string& text, uint8_t switches) {
    for (const char* name : {"13a", "intl", "zh", "char", "none"}) {
        const std::string tokens = bleu_tokenize(text, name);
        if (std::string(name) != "13a")   // 13a also drops <skipped> and unescapes entities
            FUZZ_CHECK(non_space(tokens) == non_space(text), "a BLEU tokenizer keeps every non-space byte");
    }
    TerOptions ter;
    ter.case_sensitive = true;
    FUZZ_CHECK(non_space(ter_tokenize(text, ter)) == non_space(text), "Tercom's plain tokenizer keeps every non-space byte");
    ter.case_sensitive = switches & 1, ter.normalized = switches & 2, ter.no_punct = switches & 4, ter.asian_support = switches & 8;
    (void)ter_tokenize(text, ter);
}

static void check_self_scores(const std::string& text, uint8_t switches) {
    const char* tokenizers[] = {"13a", "intl", "zh", "char"};
    const char* smoothing[] = {"exp", "floor", "add-k", "none"};
    BleuOptions b;
    b.tokenize = tokenizers[switches & 3];
    b.smooth_method = smoothing[(switches >> 2) & 3];
    b.lowercase = switches & 16;
    b = checked_bleu_options(b);
    const BleuStats s = corpus_bleu({text}, {text}, b);
    if (s.sys_len >= 4) FUZZ_CHECK(std::abs(s.bleu - 100.0) < 1e-9, "BLEU of a text against itself is 100");
    ChrfOptions c;
    c.char_order = 1 + (switches & 7);
    c.word_order = (switches >> 3) & 3;
    c.whitespace = switches & 32, c.lowercase = switches & 64, c.eps_smoothing = switches & 128;
    const ChrfStats f = corpus_chrf({text}, {text}, c);
    bool every_order = true;
    for (const auto& order : f.stats) every_order = every_order && order[0] > 0;
    if (every_order) FUZZ_CHECK(std::abs(f.score - 100.0) < 1e-9, "chrF of a text against itself is 100");
    // TER: sacreBLEU tokenizes a reference twice, so normalization may split it more; and in invalid
    // UTF-8 removing punctuation can join bytes into a capital that the second pass lowers
    TerOptions t;
    t.case_sensitive = switches & 1;
    t.no_punct = switches & 4, t.asian_support = switches & 8;
    if (valid_utf8(text)) FUZZ_CHECK(corpus_ter_multi({text}, {{text}}, t).edits == 0, "TER of a text against itself is 0");
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size > 1 << 14) return 0;
    const uint8_t switches = size ? data[0] : 0;
    const std::string rest = fuzz_rest(data, size, 1);
    const size_t newline = rest.find('\n');
    const std::string hyp = rest.substr(0, newline), ref = newline == std::string::npos ? "" : rest.substr(newline + 1);
    check_tokenizers(rest, switches);
    check_self_scores(hyp, switches);
    BleuOptions b;
    b.tokenize = (switches & 1) ? "intl" : "zh";
    (void)corpus_bleu({hyp}, {ref}, b);
    (void)corpus_chrf({hyp}, {ref});
    (void)corpus_ter_multi({hyp}, {{ref}}, TerOptions{true, true, true, true});
    return 0;
}
