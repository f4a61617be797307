// test/ref_case.h — reading the PyTorch reference's case files (test/ref/*.safetensors,
// written by test/reference.py): the config in __metadata__, F32 tensors, the padded batch.
#pragma once
#include <string>
#include <vector>

#include "test/check.h"
#include "model/checkpoint.h"
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

