// ter_score.h — TER, translation edit rate (Snover et al., 2006), identical to sacreBLEU 2.6.0's
// TER with its defaults: nrefs:1|case:lc|tok:tercom|norm:no|punct:yes|asian:no.
//
// Each line is rstripped, lowercased as Python's str.lower() does (toolkit/unicode_lower.h) and
// split on Python's white space. Its edits are the fewest word insertions, deletions,
// substitutions and shifts (a run of up to 10 words moved, Tercom's greedy search) that turn the
// hypothesis into a reference; with several references, the fewest over them, divided by their
// mean length. TER = 100 * sum of edits / sum of reference lengths (lower is better). Edits and
// lengths agree with sacreBLEU exactly (test/test_sacrebleu.py).
#pragma once
#include <string>
#include <string_view>
#include <vector>

struct TerStats {
    double edits = 0;     // summed over lines, each the fewest over its references
    double ref_len = 0;   // summed mean reference length (words)
    double score = 0;     // 0..100 and above (more edits than reference words), unrounded
};

// Scores hyps[i] against ref_streams[k][i] for every stream k; throws std::invalid_argument when
// the sizes differ. An empty reference has length 0: a hypothesis against it costs one edit a word.
TerStats corpus_ter_multi(const std::vector<std::string>& hyps,
                          const std::vector<std::vector<std::string>>& ref_streams);
// Each line's edits and mean reference length alone (score left 0), summed by corpus_ter_multi.
std::vector<TerStats> ter_segment_stats(const std::vector<std::string>& hyps,
                                        const std::vector<std::vector<std::string>>& ref_streams);
// 100 * edits / ref_len (100 when ref_len is 0 and there are edits, else 0), as sacreBLEU.
double ter_compute_score(double edits, double ref_len);

// One line's edits against one reference, both given as words (already lowercased).
int ter_edits(const std::vector<std::string_view>& hyp, const std::vector<std::string_view>& ref);

// Python's str.lower() on UTF-8 (Final_Sigma included); invalid bytes pass unchanged.
std::string py_lower(std::string_view s);

// "nrefs:1|case:lc|tok:tercom|norm:no|punct:yes|asian:no"
std::string ter_signature(int nrefs = 1);

// "TER = 54.37", the score with `width` decimals.
std::string format_ter(const TerStats& s, int width = 2);
