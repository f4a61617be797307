// cli/line_check.h — ./translate's rules for one input line, shared by stdin mode
// (cli/translate.cpp) and the HTTP server (cli/serve.cpp), so both accept and refuse the same
// lines with the same messages:
//   - the spaces, tabs and '\r's (CRLF text) at either end are dropped, as the training data's
//     lines lose theirs (toolkit/parallel_data.cpp): the model never saw them, and a line of
//     only spaces and tabs is an empty line;
//   - invalid UTF-8 is an error naming the line and the byte, unless replace_invalid (each
//     bad byte becomes U+FFFD);
//   - split_sentences: the line is cut after each sentence end (cli/sentences.h) into pieces
//     translated on their own (their translations are joined by a space);
//   - a line (or, with split_sentences, a sentence) of more than max_input_tokens tokens is an
//     error, unless split_long: then the line is cut into its sentences, and a sentence still
//     over the limit into runs that end at a clause mark, else at a word boundary, else at
//     the limit (cli/sentences.h).
//
//   LineRules rules{max_input_tokens, replace_invalid, split_long, split_sentences};
//   if (!check_line(tok, line, rules, "line 7", &pieces, &err)) ...   err: "line 7: invalid ..."
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "cli/sentences.h"
#include "tokenizer.h"

struct LineRules {
    int max_input_tokens = 1024;   // longest accepted line in tokens
    bool replace_invalid = false;  // invalid UTF-8 -> U+FFFD instead of an error
    bool split_long = false;       // over-long lines in pieces instead of an error
    bool split_sentences = false;  // every line cut into its sentences
};


// Checks and encodes one line by the rules above. *pieces gets its token ids (one piece, or
// several when split; no </s>); false + *err ("WHERE: what is wrong (the option that
// helps)") on bad input. *clean (optional) gets the text that was encoded.
inline bool check_line(const Tokenizer& tok, std::string line, const LineRules& rules, const std::string& where,
                       std::vector<std::vector<int>>* pieces, std::string* err, std::string* clean = nullptr) {
    const long bad = invalid_utf8_at(line);   // (checked first: the byte's place in the line as given)
    line = std::string(trim(line, " \t\r"));   // as read_text_lines trims the training data
    if (bad >= 0 && !rules.replace_invalid) {
        *err = where + ": invalid UTF-8 at byte " + std::to_string(bad) + " (--replace-invalid substitutes U+FFFD)";
        return false;
    }
    if (bad >= 0) line = replace_invalid_utf8(line);
    if (clean) *clean = line;
    pieces->clear();
    const size_t limit = (size_t)std::max(1, rules.max_input_tokens);
    std::vector<int> ids;   // the whole line's, encoded only when it is not cut into sentences first
    if (!rules.split_sentences) {
        ids = tok.encode(line);
        if (ids.size() <= limit || !rules.split_long) {
            if (ids.size() > limit) {
                *err = where + ": " + std::to_string(ids.size()) + " tokens, more than --max-input-tokens " +
                       std::to_string(rules.max_input_tokens) + " (--split-long translates it in pieces)";
                return false;
            }
            pieces->push_back(std::move(ids));
            return true;
        }
    }
    const std::vector<std::string_view> texts = sentences::split(line);
    for (std::string_view text : texts) {
        std::vector<int> sentence = texts.size() == 1 && !rules.split_sentences ? std::move(ids) : tok.encode(text);
        if (sentence.size() <= limit) {
            pieces->push_back(std::move(sentence));
            continue;
        }
        if (!rules.split_long) {
            *err = where + ": a sentence of " + std::to_string(sentence.size()) + " tokens, more than --max-input-tokens " +
                   std::to_string(rules.max_input_tokens) + " (--split-long translates it in pieces)";
            return false;
        }
        size_t from = 0;
        for (size_t end : sentences::cut(tok, sentence, limit)) {
            pieces->emplace_back(sentence.begin() + from, sentence.begin() + end);
            from = end;
        }
    }
    return true;
}
