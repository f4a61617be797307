// test/test_sentences.cpp — where ./translate cuts lines (cli/sentences.h, cli/line_check.h:
// --split-sentences, --split-long).
//
// 1. sentences::split on chosen texts: . ! ? and runs of them, closing quotes, full-width marks
//    without spaces, decimals, "e.g." before a lowercase word, initials and titles, inverted
//    Spanish marks, several spaces, leading and trailing white space, empty text, stray bytes.
// 2. sentences::split on 20,000 random texts over an alphabet of marks, quotes, spaces, letters
//    and multi-byte characters: the pieces are non-empty (unless the text is), in order, and
//    only white space lies between them; each but the last ends with a mark or a closer.
// 3. sentences::cut: runs of at most the limit that give back the ids in order, ending at the
//    clause mark, else the word boundary, the text offers within the limit; random ids too.
// 4. check_line with the rules: a line within the limit is one piece whatever split_long says;
//    split_sentences gives the sentences' own encodings; a sentence over the limit is refused
//    without split_long (naming it) and cut with it; an over-long line under split_long alone
//    is cut into its sentences first.
#include <random>
#include <string>
#include <vector>

#include "cli/line_check.h"
#include "test/check.h"

namespace {

std::string show(const std::vector<std::string_view>& v) {
    std::string s;
    for (size_t i = 0; i < v.size(); i++) s += (i ? " | " : "") + std::string(v[i]);
    return s;
}

// 1.
void check_split_cases() {
    struct Case { const char* text; std::vector<const char*> want; };
    const Case cases[] = {
        {"Hello there. How are you? Fine!", {"Hello there.", "How are you?", "Fine!"}},
        {"It costs 3.5 dollars. Yes.", {"It costs 3.5 dollars.", "Yes."}},
        {"Take e.g. the red one. Then stop.", {"Take e.g. the red one.", "Then stop."}},
        {"Mr. Smith met J. Doe. They talked.", {"Mr. Smith met J. Doe.", "They talked."}},
        {"He said \"Stop!\" Then he left.", {"He said \"Stop!\"", "Then he left."}},
        {"(It ended.) And then?", {"(It ended.)", "And then?"}},
        {"\xC2\xBFQu\xC3\xA9 pasa? \xC2\xA1Nada! Bien.", {"\xC2\xBFQu\xC3\xA9 pasa?", "\xC2\xA1Nada!", "Bien."}},
        {"\xE4\xBD\xA0\xE5\xA5\xBD\xE3\x80\x82\xE6\x88\x91\xE5\xBE\x88\xE5\xA5\xBD\xEF\xBC\x81\xE8\xB0\xA2\xE8\xB0\xA2",
         {"\xE4\xBD\xA0\xE5\xA5\xBD\xE3\x80\x82", "\xE6\x88\x91\xE5\xBE\x88\xE5\xA5\xBD\xEF\xBC\x81", "\xE8\xB0\xA2\xE8\xB0\xA2"}},
        {"Wait... what?! No.", {"Wait... what?!", "No."}},
        {"Yea, hath God said? ye shall not eat. And the woman said", {"Yea, hath God said? ye shall not eat.", "And the woman said"}},
        {"One.   Two.\tThree.", {"One.", "Two.", "Three."}},
        {"  Leading and trailing.  ", {"  Leading and trailing.  "}},
        {"No end here", {"No end here"}},
        {"", {""}},
        {"a.\xFF Bb. Cc.", {"a.\xFF Bb.", "Cc."}},
        {"\xC3\xA9t\xC3\xA9. \xC3\x89t\xC3\xA9. \xC3\xA9t\xC3\xA9.", {"\xC3\xA9t\xC3\xA9.", "\xC3\x89t\xC3\xA9. \xC3\xA9t\xC3\xA9."}},
    };
    for (const Case& c : cases) {
        std::vector<std::string_view> want(c.want.begin(), c.want.end());
        const std::vector<std::string_view> got = sentences::split(c.text);
        check(got == want, "split(\"%s\") = [%s], want [%s]", c.text, show(got).c_str(), show(want).c_str());
    }
}

// 2.
void check_split_random() {
    const std::vector<std::string> alphabet = {"a", "b", "Z", ".", "!", "?", ",", "\"", ")", " ", " ", "\n", "\xE3\x80\x82",
                                               "\xC3\xA9", "\xC3\x89", "\xE2\x80\xA6", "Mr", "\xFF", "\xEF\xBC\x9F"};
    std::mt19937 rng(7);
    long bad = 0, cut = 0;
    for (int n = 0; n < 20000; n++) {
        std::string text;
        const int len = (int)(rng() % 40);
        for (int i = 0; i < len; i++) text += alphabet[rng() % alphabet.size()];
        const std::vector<std::string_view> pieces = sentences::split(text);
        size_t at = 0;
        bool ok = !pieces.empty();
        for (size_t p = 0; p < pieces.size() && ok; p++) {
            const size_t from = (size_t)(pieces[p].data() - text.data());
            for (size_t i = at; i < from && ok; i++) ok = p > 0 && (text[i] == ' ' || text[i] == '\n');
            ok = ok && (pieces[p].size() > 0 || text.empty()) && from + pieces[p].size() <= text.size();
            if (ok && p + 1 < pieces.size()) {
                int l;
                const uint32_t last = sentences::char_before(pieces[p], pieces[p].size(), &l);
                ok = sentences::is_sentence_end(last) || sentences::is_closer(last);
            }
            at = from + pieces[p].size();
        }
        ok = ok && at == text.size();
        bad += !ok;
        cut += pieces.size() > 1;
    }
    check(bad == 0 && cut > 1000, "split on 20,000 random texts: pieces in order, white space alone between them, each "
                                  "but the last ending with a mark or closer (%ld bad; %ld texts cut)", bad, cut);
}

std::string decode_run(const Tokenizer& tok, const std::vector<int>& ids, size_t from, size_t to) {
    return tok.decode(std::vector<int>(ids.begin() + from, ids.begin() + to));
}

// 3. With the byte-level tokenizer (every byte a token), so the expected cuts can be counted.
void check_cut() {
    const Tokenizer tok;
    struct Case { const char* text; size_t limit; std::vector<const char*> want; };
    const Case cases[] = {
        {"one two, three four five", 12, {"one two,", " three four ", "five"}},   // clause, then word
        {"abcdefghij", 4, {"abcd", "efgh", "ij"}},                               // no boundary: the limit
        {"aa bb cc dd", 5, {"aa bb", " cc ", "dd"}},                              // words
        {"x\xEF\xBC\x8Cy\xEF\xBC\x8Cz", 5, {"x\xEF\xBC\x8C", "y\xEF\xBC\x8Cz"}},   // a full-width comma, no space
    };
    for (const Case& c : cases) {
        const std::vector<int> ids = tok.encode(c.text);
        const std::vector<size_t> ends = sentences::cut(tok, ids, c.limit);
        std::vector<std::string> got;
        size_t from = 0;
        for (size_t e : ends) got.push_back(decode_run(tok, ids, from, e)), from = e;
        std::vector<std::string> want(c.want.begin(), c.want.end());
        std::string g, w;
        for (auto& s : got) g += "[" + s + "]";
        for (auto& s : want) w += "[" + s + "]";
        check(got == want, "cut(\"%s\", limit %zu) = %s, want %s", c.text, c.limit, g.c_str(), w.c_str());
    }
    std::mt19937 rng(11);
    long bad = 0;
    for (int n = 0; n < 2000; n++) {
        std::vector<int> ids(1 + rng() % 300);
        for (int& id : ids) id = Tokenizer::kFirstByte + (int)(rng() % 256);
        const size_t limit = 1 + rng() % 40;
        const std::vector<size_t> ends = sentences::cut(tok, ids, limit);
        size_t from = 0;
        bool ok = !ends.empty() && ends.back() == ids.size();
        for (size_t e : ends) ok = ok && e > from && e - from <= limit, from = e;
        bad += !ok;
    }
    check(bad == 0, "cut on 2,000 random byte sequences: runs of 1..limit tokens ending at the sequence's end (%ld bad)", bad);
}

// 4.
void check_rules() {
    std::vector<std::string> corpus;
    for (int i = 0; i < 50; i++) corpus.push_back("The cat sat. The dog ran! Where is the bird? It flew, it sang, it left.");
    const Tokenizer tok = Tokenizer::learn(corpus, 400);
    const std::string line = "The cat sat. The dog ran! Where is the bird?";
    const std::vector<int> whole = tok.encode(line);
    std::vector<std::vector<int>> pieces;
    std::string err;
    const int big = (int)whole.size();

    bool ok = check_line(tok, line, {big, false, true, false}, "line 1", &pieces, &err);
    check(ok && pieces.size() == 1 && pieces[0] == whole, "within the limit, split_long: one piece, the line's ids (%zu pieces)",
          pieces.size());

    ok = check_line(tok, line, {big, false, false, true}, "line 1", &pieces, &err);
    const std::vector<std::string> want = {"The cat sat.", "The dog ran!", "Where is the bird?"};
    bool same = ok && pieces.size() == want.size();
    for (size_t i = 0; same && i < want.size(); i++) same = pieces[i] == tok.encode(want[i]);
    check(same, "split_sentences: 3 pieces, each sentence's own encoding (%zu pieces)", pieces.size());

    const int sentence_tokens = (int)tok.encode("Where is the bird?").size();
    ok = check_line(tok, line, {sentence_tokens - 1, false, false, true}, "line 4", &pieces, &err);
    check(!ok && err.find("line 4: a sentence of " + std::to_string(sentence_tokens) + " tokens, more than --max-input-tokens") == 0 &&
              err.find("--split-long") != std::string::npos,
          "split_sentences, a sentence over the limit: refused (\"%s\")", err.c_str());

    ok = check_line(tok, line, {big - 1, false, true, false}, "line 1", &pieces, &err);
    same = ok && pieces.size() == want.size();
    for (size_t i = 0; same && i < want.size(); i++) same = pieces[i] == tok.encode(want[i]);
    check(same, "split_long, the line 1 token over the limit: cut into its 3 sentences (%zu pieces)", pieces.size());

    const std::string clauses = "It flew, it sang, it left.";
    const int limit = (int)tok.encode("It flew, it sang,").size();
    ok = check_line(tok, clauses, {limit, false, true, false}, "line 1", &pieces, &err);
    std::string first = ok && !pieces.empty() ? tok.decode(pieces[0]) : "";
    std::vector<int> all;
    for (auto& p : pieces) all.insert(all.end(), p.begin(), p.end());
    check(ok && pieces.size() == 2 && first == "It flew, it sang," && all == tok.encode(clauses),
          "split_long, one sentence over the limit: cut after its last clause mark within it (\"%s\", %zu pieces)",
          first.c_str(), pieces.size());
}

}  // namespace

int main() {
    check_split_cases();
    check_split_random();
    check_cut();
    check_rules();
    return check_summary("sentences");
}
