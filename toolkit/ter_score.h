// ter_score.h — TER, translation edit rate (Snover et al., 2006), identical to sacreBLEU 2.6.0's
// TER with its defaults: nrefs:1|case:lc|tok:tercom|norm:no|punct:yes|asian:no, and with its
// options (TerOptions: case-sensitive, normalized, no punctuation, Asian support).
//
// Each line is rstripped, lowercased as Python's str.lower() does (toolkit/unicode_lower.h),
// normalized as the options say (ter_tokenize; a reference twice, as sacreBLEU does) and split on
// Python's white space. Its edits are the fewest word insertions, deletions,
// substitutions and shifts (a run of up to 10 words moved, Tercom's greedy search) that turn the
// hypothesis into a reference; with several references, the fewest over them, divided by their
// mean length. TER = 100 * sum of edits / sum of reference lengths (lower is better). Edits and
// lengths agree with sacreBLEU exactly (test/test_sacrebleu.py).
#pragma once
#include <string>
#include <string_view>
#include <vector>

// sacreBLEU's TER options (its CLI's --ter-*; the signature's case, norm, punct and asian fields).
// Tercom's tokenizer applies them to each rstripped line (ter_tokenize).
struct TerOptions {
    bool case_sensitive = false;   // keep case (case:mixed); else Python's str.lower() first (case:lc)
    bool normalized = false;       // Tercom's normalization: XML entities, punctuation split off (norm:yes)
    bool no_punct = false;         // remove . , ? : ; ! " ( ) (punct:no)
    bool asian_support = false;    // with normalized: CJK split to characters; with no_punct: CJK
                                   // punctuation removed too (asian:yes)
};

struct TerStats {
    double edits = 0;     // summed over lines, each the fewest over its references
    double ref_len = 0;   // summed mean reference length (words)
    double score = 0;     // 0..100 and above (more edits than reference words), unrounded
};

// Scores hyps[i] against ref_streams[k][i] for every stream k; throws std::invalid_argument when
// the sizes differ. An empty reference has length 0: a hypothesis against it costs one edit a word.
TerStats corpus_ter_multi(const std::vector<std::string>& hyps,
                          const std::vector<std::vector<std::string>>& ref_streams, const TerOptions& opt = {});
// Each line's edits and mean reference length alone (score left 0), summed by corpus_ter_multi.
std::vector<TerStats> ter_segment_stats(const std::vector<std::string>& hyps,
                                        const std::vector<std::vector<std::string>>& ref_streams,
                                        const TerOptions& opt = {});
// 100 * edits / ref_len (100 when ref_len is 0 and there are edits, else 0), as sacreBLEU.
double ter_compute_score(double edits, double ref_len);

// sacreBLEU's TercomTokenizer on one (rstripped) line: lowercased unless opt.case_sensitive,
// normalized, punctuation removed as opt says; words joined by one space.
std::string ter_tokenize(std::string_view line, const TerOptions& opt);

// One line's edits against one reference, both given as words (already lowercased).
int ter_edits(const std::vector<std::string_view>& hyp, const std::vector<std::string_view>& ref);

// Python's str.lower() on UTF-8 (Final_Sigma included); invalid bytes pass unchanged.
std::string py_lower(std::string_view s);

// "nrefs:1|case:lc|tok:tercom|norm:no|punct:yes|asian:no"
std::string ter_signature(int nrefs = 1, const TerOptions& opt = {});

// "TER = 54.37", the score with `width` decimals.
std::string format_ter(const TerStats& s, int width = 2);
