// test/ref_case.h — reading the PyTorch reference's case files (test/ref/*.safetensors,
// written by test/reference.py): the config in __metadata__, F32 tensors, the padded batch.
#pragma once
#include <string>
#include <vector>

#include "test/check.h"
#include "model/checkpoint.h"
#include "toolkit/decode.h"
#include "toolkit/json.h"
#include "transformer.h"

struct RefCase {
    Config cfg;
    double lr_scale = 1;
    int warmup = 4000, steps = 10;
};

inline double json_number(const Json& j, const char* key, double fallback) {
    const Json* v = j.get(key);
    if (!v) return fallback;
    return v->type == Json::BOOL ? (v->boolean ? 1 : 0) : v->number;
}

// The reference writes the config plus lr_scale and warmup; dropout is 0 in every case.
inline bool parse_case_config(const std::string& text, RefCase* rc) {
    Json j;
    std::string err;
    if (!json_parse(text, &j, &err)) return false;
    Config& c = rc->cfg;
    c.n_enc = (int)json_number(j, "n_enc", 0);
    c.n_dec = (int)json_number(j, "n_dec", 0);
    c.d_model = (int)json_number(j, "d_model", 0);
    c.d_ff = (int)json_number(j, "d_ff", 0);
    c.n_heads = (int)json_number(j, "n_heads", 0);
    c.d_k = (int)json_number(j, "d_k", 0);
    c.d_v = (int)json_number(j, "d_v", 0);
    c.vocab = (int)json_number(j, "vocab", 0);
    c.max_len = (int)json_number(j, "max_len", 0);
    c.pre_ln = json_number(j, "pre_ln", 0) != 0;
    c.learned_pos = json_number(j, "learned_pos", 0) != 0;
    c.label_smoothing = (float)json_number(j, "label_smoothing", 0);
    c.p_drop = c.p_attn_drop = c.p_relu_drop = 0.0f;
    rc->lr_scale = json_number(j, "lr_scale", 1);
    rc->warmup = (int)json_number(j, "warmup", 4000);
    return config_error(c).empty();
}

inline std::vector<float> read_f32(SafeTensorsFile& f, const std::string& name) {
    const TensorEntry* t = f.find(name);
    std::vector<float> v(t ? t->numel() : 0);
    std::string err;
    if (!t || !f.read(name, "F32", v.data(), v.size(), &err))
        check(false, "read %s: %s", name.c_str(), t ? err.c_str() : "missing");
    return v;
}

inline bool read_batch(SafeTensorsFile& f, Batch* b) {
    const TensorEntry* src = f.find("batch.src");
    const TensorEntry* tgt = f.find("batch.tgt_in");
    if (!src || !tgt || src->shape.size() != 2 || tgt->shape.size() != 2) return false;
    b->B = (int)src->shape[0];
    b->S = (int)src->shape[1];
    b->T = (int)tgt->shape[1];
    b->src.resize(src->numel());
    b->tgt_in.resize(tgt->numel());
    b->labels.resize(tgt->numel());
    std::string err;
    if (!f.read("batch.src", "I32", b->src.data(), b->src.size(), &err) ||
        !f.read("batch.tgt_in", "I32", b->tgt_in.data(), b->tgt_in.size(), &err) ||
        !f.read("batch.labels", "I32", b->labels.data(), b->labels.size(), &err))
        return false;
    b->src_tokens = b->tgt_tokens = 0;
    for (int t : b->src) b->src_tokens += t != PAD_ID;
    for (int t : b->labels) b->tgt_tokens += t != PAD_ID;
    return true;
}

// ---------------------------------------------------------------------------------------------
// The decoding reference case (decode.safetensors): a small model the reference trained on a
// copy task, its source sentences, the decoding options and the reference's results.
struct DecodeCase {
    std::vector<std::vector<int>> sources;
    std::vector<std::vector<int>> greedy, beam;   // best hypothesis' tokens, </s> included
    std::vector<float> greedy_logprob, beam_logprob, beam_score;
    DecodeOptions opt;                            // alpha, max length; beam = the case's beam
};

// Rows of a (rows, cols) I32 tensor, each cut at its first `pad`.
inline std::vector<std::vector<int>> read_rows(SafeTensorsFile& f, const std::string& name, int pad) {
    const TensorEntry* t = f.find(name);
    std::vector<int> flat(t ? t->numel() : 0);
    std::string err;
    if (!t || t->shape.size() != 2 || !f.read(name, "I32", flat.data(), flat.size(), &err)) {
        check(false, "read %s", name.c_str());
        return {};
    }
    std::vector<std::vector<int>> out(t->shape[0]);
    for (size_t r = 0; r < out.size(); r++)
        for (int64_t c = 0; c < t->shape[1] && flat[r * t->shape[1] + c] != pad; c++)
            out[r].push_back(flat[r * t->shape[1] + c]);
    return out;
}

// Loads the case; the model's parameters go to m on its backend (a CPU one when none is set).
inline bool load_decode_case(const std::string& path, Model* m, DecodeCase* dc) {
    SafeTensorsFile f;
    std::string err;
    RefCase rc;
    if (!check(f.open(path, &err), "open decode reference (%s)", err.c_str()) ||
        !check(parse_case_config(f.metadata["config"], &rc), "decode reference: config"))
        return false;
    model_allocate(m, rc.cfg, false);
    std::vector<float> params(m->layout.total);
    if (!check(read_parameters(f, m->layout, "param.", params.data(), &err), "decode reference: parameters (%s)", err.c_str()))
        return false;
    model_set_params(m, params.data());
    dc->sources = read_rows(f, "dec.src", PAD_ID);
    dc->greedy = read_rows(f, "greedy.tokens", -1);
    dc->beam = read_rows(f, "beam.tokens", -1);
    dc->greedy_logprob = read_f32(f, "greedy.logprob");
    dc->beam_logprob = read_f32(f, "beam.logprob");
    dc->beam_score = read_f32(f, "beam.score");
    dc->opt.alpha = std::stof(f.metadata["alpha"]);
    dc->opt.max_len_a = std::stof(f.metadata["max_len_a"]);
    dc->opt.max_len_b = std::stoi(f.metadata["max_len_b"]);
    dc->opt.beam = std::stoi(f.metadata["beam"]);
    return !dc->sources.empty();
}
