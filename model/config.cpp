// config.cpp — the model configuration (presets, validation, JSON for checkpoints, the printed
// table) and the parameter layout: the name, shape and offset of every tensor in the one
// contiguous parameter buffer (names and shapes as DESIGN.md and PyTorch's nn.Linear).
#include <cmath>
#include <cstdio>
#include <functional>

#include "toolkit/json.h"
#include "transformer.h"

// ---------------------------------------------------------------------------------------------
// Presets: the paper's Table 3 base and big models, and two CPU-sized ones.
static Config make_preset(int n, int d, int dff, int h, int vocab, float p_drop) {
    Config c;
    c.n_enc = c.n_dec = n;
    c.d_model = d;
    c.d_ff = dff;
    c.n_heads = h;
    c.d_k = c.d_v = d / h;
    c.vocab = vocab;
    c.p_drop = p_drop;
    return c;
}

bool config_preset(const std::string& name, Config* cfg) {
    if (name == "tiny") *cfg = make_preset(2, 128, 512, 4, 8000, 0.1f);
    else if (name == "small") *cfg = make_preset(3, 256, 1024, 4, 8000, 0.1f);
    else if (name == "base") *cfg = make_preset(6, 512, 2048, 8, 37000, 0.1f);
    else if (name == "big") *cfg = make_preset(6, 1024, 4096, 16, 37000, 0.3f);
    else return false;
    return true;
}

std::string config_error(const Config& c) {
    auto positive = [](int v) { return v > 0 && v <= (1 << 24); };
    if (c.n_enc < 1 || c.n_enc > 64 || c.n_dec < 1 || c.n_dec > 64)
        return "layers must be in 1..64 (got encoder " + std::to_string(c.n_enc) + ", decoder " +
               std::to_string(c.n_dec) + ")";
    if (!positive(c.d_model) || !positive(c.d_ff) || !positive(c.n_heads) || !positive(c.d_k) ||
        !positive(c.d_v))
        return "d_model, d_ff, heads, d_k and d_v must be positive";
    if ((long long)c.n_heads * c.d_k > (1 << 24) || (long long)c.n_heads * c.d_v > (1 << 24))
        return "heads x d_k and heads x d_v must be at most 2^24";
    if (c.vocab < 5) return "vocabulary must have more than the 4 special tokens";
    if (c.vocab > (1 << 24)) return "vocabulary must have at most 2^24 ids";
    if (c.max_len < 2 || c.max_len > (1 << 24)) return "max_len must be in 2..2^24";
    for (float p : {c.p_drop, c.p_attn_drop, c.p_relu_drop})
        if (!(p >= 0.0f && p < 1.0f)) return "dropout probabilities must be in [0, 1)";
    if (!(c.label_smoothing >= 0.0f && c.label_smoothing < 1.0f))
        return "label smoothing must be in [0, 1)";
    return "";
}

// ---------------------------------------------------------------------------------------------
// JSON: one flat object, every field. The same key list serves writing, reading and comparing.
struct ConfigField {
    const char* key;
    enum Kind { WHOLE, REAL, FLAG } kind;   // an int, a float, a bool (written 0 or 1)
    std::function<double(const Config&)> get;
    std::function<void(Config*, double)> set;
};

static const std::vector<ConfigField>& config_fields() {
#define INT_FIELD(k, f) \
    {k, ConfigField::WHOLE, [](const Config& c) { return (double)c.f; }, [](Config* c, double v) { c->f = (int)v; }}
#define FLOAT_FIELD(k, f) \
    {k, ConfigField::REAL, [](const Config& c) { return (double)c.f; }, [](Config* c, double v) { c->f = (float)v; }}
#define BOOL_FIELD(k, f) \
    {k, ConfigField::FLAG, [](const Config& c) { return c.f ? 1.0 : 0.0; }, [](Config* c, double v) { c->f = v != 0; }}
    static const std::vector<ConfigField> fields = {
        INT_FIELD("n_enc", n_enc), INT_FIELD("n_dec", n_dec), INT_FIELD("d_model", d_model),
        INT_FIELD("d_ff", d_ff), INT_FIELD("n_heads", n_heads), INT_FIELD("d_k", d_k),
        INT_FIELD("d_v", d_v), INT_FIELD("vocab", vocab), INT_FIELD("max_len", max_len),
        FLOAT_FIELD("p_drop", p_drop), FLOAT_FIELD("p_attn_drop", p_attn_drop),
        FLOAT_FIELD("p_relu_drop", p_relu_drop), FLOAT_FIELD("label_smoothing", label_smoothing),
        BOOL_FIELD("pre_ln", pre_ln), BOOL_FIELD("learned_pos", learned_pos),
    };
#undef INT_FIELD
#undef FLOAT_FIELD
#undef BOOL_FIELD
    return fields;
}

static std::string number_text(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    return buf;
}

std::string config_to_json(const Config& cfg) {
    std::string out = "{";
    for (const ConfigField& f : config_fields()) {
        if (out.size() > 1) out += ", ";
        out += json_quote(f.key) + ": " + number_text(f.get(cfg));
    }
    return out + "}";
}

// Why a JSON value cannot be field f's ("" when it can): a number in range, whole for an int
// (2.5 layers is no model), 0 or 1 (or false/true) for a flag.
static std::string field_value_error(const ConfigField& f, const Json& v) {
    if (v.type == Json::BOOL) return f.kind == ConfigField::FLAG ? "" : "is true/false, not a number";
    if (v.type != Json::NUMBER) return "is not a number";
    if (!(std::fabs(v.number) <= (1 << 30))) return "is out of range";   // NaN too
    if (f.kind != ConfigField::REAL && v.number != std::floor(v.number))
        return "is not a whole number (" + number_text(v.number) + ")";
    if (f.kind == ConfigField::FLAG && v.number != 0 && v.number != 1)
        return "is not 0 or 1 (false or true): " + number_text(v.number);
    return "";
}

bool config_from_json(const std::string& text, Config* cfg, std::string* error) {
    Json j;
    std::string err;
    if (!json_parse(text, &j, &err) || j.type != Json::OBJECT) {
        *error = "config is not a JSON object" + (err.empty() ? std::string() : " (" + err + ")");
        return false;
    }
    Config c;
    for (const ConfigField& f : config_fields()) {
        const Json* v = j.get(f.key);
        if (!v) { *error = std::string("config has no \"") + f.key + "\""; return false; }
        const std::string bad = field_value_error(f, *v);
        if (!bad.empty()) { *error = std::string("config \"") + f.key + "\" " + bad; return false; }
        f.set(&c, v->type == Json::BOOL ? (v->boolean ? 1 : 0) : v->number);
    }
    std::string bad = config_error(c);
    if (!bad.empty()) { *error = "config: " + bad; return false; }
    *cfg = c;
    return true;
}

std::string config_difference(const Config& a, const Config& b) {
    for (const ConfigField& f : config_fields())
        if (f.get(a) != f.get(b))
            return std::string(f.key) + ": " + number_text(f.get(a)) + " vs " +
                   number_text(f.get(b));
    return "";
}

// Short form for the printed table (%g); JSON keeps number_text's 9 digits.
static std::string short_number(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", (double)(float)v);
    return buf;
}

void config_print(const Config& c, size_t n_params) {
    std::printf("+---------------------------+------------------+\n");
    auto row = [](const char* k, const std::string& v) {
        std::printf("| %-25s | %16s |\n", k, v.c_str());
    };
    row("encoder / decoder layers", std::to_string(c.n_enc) + " / " + std::to_string(c.n_dec));
    row("d_model", std::to_string(c.d_model));
    row("d_ff", std::to_string(c.d_ff));
    row("heads h", std::to_string(c.n_heads));
    row("d_k / d_v", std::to_string(c.d_k) + " / " + std::to_string(c.d_v));
    row("vocabulary (shared)", std::to_string(c.vocab));
    row("max length", std::to_string(c.max_len));
    row("P_drop (attn / relu)", short_number(c.p_drop) + " (" + short_number(c.p_attn_drop) + " / " +
                                    short_number(c.p_relu_drop) + ")");
    row("label smoothing", short_number(c.label_smoothing));
    row("layer norm", c.pre_ln ? "pre-LN" : "post-LN");
    row("positions", c.learned_pos ? "learned" : "sinusoidal");
    row("parameters", std::to_string(n_params));
    std::printf("+---------------------------+------------------+\n");
}

// ---------------------------------------------------------------------------------------------
// Layout. Tensors are appended in DESIGN.md's order; in each attention, the q, k, v weights
// come first and adjacent, then their biases (see AttentionP in transformer.h).
struct LayoutBuilder {
    ParamLayout* L;
    size_t add(const std::string& name, std::vector<int> shape) {
        size_t numel = 1;
        for (int s : shape) numel *= (size_t)s;
        TensorInfo t{name, shape, L->total, numel};
        L->tensors.push_back(t);
        L->total += numel;
        return t.offset;
    }
    LayerNormP layernorm(const std::string& p, int d) {
        LayerNormP n;
        n.g = add(p + ".weight", {d});
        n.b = add(p + ".bias", {d});
        return n;
    }
    LinearP linear(const std::string& p, int out, int in) {
        LinearP l{0, 0, out, in};
        l.w = add(p + ".weight", {out, in});
        l.b = add(p + ".bias", {out});
        return l;
    }
    AttentionP attention(const std::string& p, const Config& c) {
        AttentionP a;
        int qk = c.n_heads * c.d_k, vv = c.n_heads * c.d_v;
        a.q = {add(p + ".q_proj.weight", {qk, c.d_model}), 0, qk, c.d_model};
        a.k = {add(p + ".k_proj.weight", {qk, c.d_model}), 0, qk, c.d_model};
        a.v = {add(p + ".v_proj.weight", {vv, c.d_model}), 0, vv, c.d_model};
        a.q.b = add(p + ".q_proj.bias", {qk});
        a.k.b = add(p + ".k_proj.bias", {qk});
        a.v.b = add(p + ".v_proj.bias", {vv});
        a.out = linear(p + ".out_proj", c.d_model, vv);
        return a;
    }
    FeedForwardP ffn(const std::string& p, const Config& c) {
        return {linear(p + ".fc1", c.d_ff, c.d_model), linear(p + ".fc2", c.d_model, c.d_ff)};
    }
};

ParamLayout make_layout(const Config& c) {
    ParamLayout L;
    LayoutBuilder lb{&L};
    L.embed = lb.add("embed.weight", {c.vocab, c.d_model});
    if (c.learned_pos) L.pos_embed = lb.add("pos_embed.weight", {c.max_len, c.d_model});
    for (int i = 0; i < c.n_enc; i++) {
        std::string p = "encoder.layers." + std::to_string(i);
        EncoderLayerP e;
        e.self_attn = lb.attention(p + ".self_attn", c);
        e.norm1 = lb.layernorm(p + ".norm1", c.d_model);
        e.ffn = lb.ffn(p + ".ffn", c);
        e.norm2 = lb.layernorm(p + ".norm2", c.d_model);
        L.enc.push_back(e);
    }
    for (int i = 0; i < c.n_dec; i++) {
        std::string p = "decoder.layers." + std::to_string(i);
        DecoderLayerP d;
        d.self_attn = lb.attention(p + ".self_attn", c);
        d.norm1 = lb.layernorm(p + ".norm1", c.d_model);
        d.cross_attn = lb.attention(p + ".cross_attn", c);
        d.norm2 = lb.layernorm(p + ".norm2", c.d_model);
        d.ffn = lb.ffn(p + ".ffn", c);
        d.norm3 = lb.layernorm(p + ".norm3", c.d_model);
        L.dec.push_back(d);
    }
    if (c.pre_ln) {
        L.enc_norm = lb.layernorm("encoder.norm", c.d_model);
        L.dec_norm = lb.layernorm("decoder.norm", c.d_model);
    }
    return L;
}
