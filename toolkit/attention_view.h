// attention_view.h — looking inside a translation: the attention maps of every layer and head
// drawn as one SVG file (./translate --attention DIR), and hard word alignments read from
// the encoder-decoder attention (./translate --alignment).
//
// The probabilities come from model_attention (transformer.h): one teacher-forced forward
// over (source, produced target), no dropout, which computes what the cached decoder computed
// while searching, up to float rounding.
//
// Words are split by spaces (U+0020) as Moses, Marian and fairseq split them (a translation's
// also by the line breaks it prints as spaces: its words are those of the printed line). A BPE piece
// belongs to the word holding its first non-space byte (a piece of spaces only, to the next
// word); </s> and <s> belong to no word.
//
// The picture (attention_svg): a title (line number, source, translation), then heat maps
// (rows: queries, columns: keys; each cell a unit square, in row order, whose fill-opacity
// is its probability to 6 significant digits) for the encoder self-attention, the decoder self-attention and
// the encoder-decoder attention, one row of heads per layer; then the paper's line view of
// one layer: two columns of tokens, a line per (query, key) whose opacity is the weight,
// one colour per head (weights below 0.01 are not drawn).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "transformer.h"

struct Tokenizer;

struct InspectOptions {
    std::string dir;            // --attention DIR: one SVG per input line ("" = off)
    bool words = false;         // --attention-words: pieces merged into words
    int layer = 0;              // --attention-layer: the line view's layer, 1-based (0 = the last)
    bool alignment = false;     // --alignment: " ||| 0-0 1-2 ..." after each translation
    int alignment_layer = 0;    // --alignment-layer: 1-based decoder layer (0 = the default)
};

// The decoder layer (1-based) whose cross-attention --alignment reads by default.
int default_alignment_layer(const Config& cfg);
// "" when the layers asked for exist in the model, else a message naming the option.
std::string inspect_options_error(const InspectOptions& opt, const Config& cfg);

// The word (0-based, split by spaces) of each piece of ids, -1 for specials (and for pieces
// of a text with no word at all); *n_words receives the text's word count. line_breaks: '\n'
// and '\r' split words too (a translation's: Tokenizer::decode_text prints them as spaces).
std::vector<int> piece_words(const Tokenizer& tok, const std::vector<int>& ids, int* n_words,
                             bool line_breaks = false);

// Hard alignment from attention (T, S) (rows: target pieces, columns: source pieces, each row a
// distribution): for each target word, the source word with the most attention mass (the
// pieces' columns summed per source word, the word's pieces' rows averaged; ties to the lower
// index). src_word (S), tgt_word (T): each piece's word, -1 for none. Returns (source word,
// target word) pairs in target order, one per target word that has pieces.
std::vector<std::pair<int, int>> hard_alignment(const std::vector<float>& attention, int T, int S,
                                                const std::vector<int>& src_word,
                                                const std::vector<int>& tgt_word);
// "0-0 1-2 ..." (Moses: source index first).
std::string format_alignment(const std::vector<std::pair<int, int>>& pairs);
// The cross-attention of decoder layer `layer` (0-based) averaged over heads: (T, S).
std::vector<float> cross_attention_mean(const AttentionMaps& maps, int layer);

// The SVG document for one translated line. source and target are token ids as
// model_attention takes them (source with </s>); an empty source gives a picture that says
// the line was empty.
std::string attention_svg(const Tokenizer& tok, const InspectOptions& opt, long line_number,
                          const std::vector<int>& source, const std::vector<int>& target,
                          const AttentionMaps& maps);

// For one translated line: writes DIR/NNNNNN.svg (when opt.dir is set and picture) and sets
// *suffix to " ||| pairs" (when opt.alignment; else ""). source: the line's ids with </s>
// (empty for an empty line), target: the hypothesis' tokens. False + *error when the file
// cannot be written.
bool inspect_translation(Model* m, const Tokenizer& tok, const InspectOptions& opt,
                         long line_number, const std::vector<int>& source,
                         const std::vector<int>& target, bool picture, std::string* suffix,
                         std::string* error);
