// test/test_ops.cpp — every op of the op interface (transformer.h's Backend) on its own, with
// the backend as a parameter: today it checks the CPU ops; with the CUDA backend it checks
// each GPU op against float64 and against the CPU op.
//
//   build/test_ops [--device cpu|cuda] [--precision fp32|bf16] [--against-cpu] [--section TEXT]
//
// (default cpu, fp32; run from anywhere). The backend comes from make_backend(); when it
// cannot be had (--device cuda in a build without the CUDA backend, or on a machine without a GPU) the
// program prints "SKIP test_ops on <device>: <reason>" and "ops: 0 passed, 0 failed, 1 skipped", exit 0:
// a skip is never counted as passed.
//
// For each op, in transformer.h's order (device memory; §3.4/§3.5 embeddings; linear layers;
// §3.3 ReLU; §5.4 dropout, the residual connection, LayerNorm; §3.2 attention; §3.2.3
// attention over the decoding cache; the loss and top-k; §6.1 the search's bookkeeping; §5.3
// Adam):
//  - forward against a float64 evaluation written here from the formulas in transformer.h's
//    comments (plain double loops, never the cpu:: code), on random inputs of several shapes,
//    odd sizes included; dropout masks come from numerics.h's dropout_keep (the contract:
//    element i of the op's output tensor, for attention element i of probs (B, H, Lq, Lk));
//  - backward against central differences of that float64 forward: L = sum(dy * f(inputs)),
//    dL/d(input) per entry (every entry for small shapes, a random FD_MAX of them for large
//    ones). Parameter gradients (dW, db, dg, dE, dpe) are pre-filled with random values to
//    check that they accumulate; activation gradients with beta 0 are pre-filled with NaN to
//    check that they are overwritten, with beta 1 (and 0.5) with random values;
//  - exact ops bit for bit: copies, copy_rows, convert_weights, the positional table
//    (numerics.h's sinusoid), ReLU, dropout masks, cache_reorder, the key transpose, top-k
//    token ids, sampled token ids (logsoftmax_sample against its contract in float64), scale,
//    Adam's weight copy; search_select driven step by step through whole searches (greedy,
//    beam, n-best, target prefixes, ties) against a plain host search written here: every
//    step's rows, and the finished hypotheses' tokens, log-probabilities and scores;
//  - when the device is not the CPU (or with --against-cpu, which exercises this path on
//    the CPU), every op also runs on a CPU backend with the same inputs and the two results
//    are compared: this is how each CUDA op is checked against its CPU op.
// All memory goes through the backend (alloc, upload, download, release). floatX buffers go
// up as floats (fp32) or as bfloat16 rounded to nearest even (bf16); every input is rounded
// to what the backend holds BEFORE the float64 reference is computed from it.
//
// Tolerances: max |got - want| <= tol * max |want| (test/check.h's check_close), stated on
// every line:
//                                                fp32     bf16
//   forward outputs vs float64                   1e-5     1e-2   (GPU: outputs stored in bf16;
//                                                                 CPU: products on bf16 operands)
//   backward outputs vs central differences      1e-5     3e-2
//   against the CPU backend, forward / backward  1e-5     1e-2 / 3e-2
//   Adam (fp32 state in every mode): the step p' - p, m, v vs float64 1e-5;
//   global_norm (a double sum of exact squares) 1e-12.
#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "test/check.h"
#include "transformer.h"
#ifdef _OPENMP
#include <omp.h>
#endif

namespace {

using Vec = std::vector<float>;
using DVec = std::vector<double>;
using IVec = std::vector<int>;

// =============================================================================================
// Tolerances (see the header)
// =============================================================================================
struct Tolerances {
    double fwd;        // forward outputs vs float64
    double bwd;        // backward outputs vs central differences of the float64 forward
    double cross_fwd;  // against the CPU backend: forward outputs
    double cross_bwd;  // against the CPU backend: backward outputs
};
const Tolerances FP32_TOL = {1e-5, 1e-5, 1e-5, 1e-5};
const Tolerances BF16_TOL = {1e-2, 3e-2, 1e-2, 3e-2};
Tolerances TOL = FP32_TOL;
const double ADAM_TOL = 1e-5;    // fp32 in every mode
const double NORM_TOL = 1e-12;   // global_norm: double sums
// Entries of one tensor checked by finite differences. Each costs two float64 evaluations of the
// whole op (~75% of the run under AddressSanitizer, which checks the backends' memory accesses,
// not the gradients' values): a sanitizer build (make test-asan) checks 200 of them; make test's
// build checks 1200.
#ifdef __SANITIZE_ADDRESS__
const size_t FD_MAX = 200;
#else
const size_t FD_MAX = 1200;
#endif
const double FD_STEP = 1e-6;     // relative step of the central differences

// =============================================================================================
// Random inputs, bfloat16, backend memory
// =============================================================================================
std::mt19937_64 rng(0x7E57095ull);
double uniform01() { return (double)(rng() >> 11) * (1.0 / 9007199254740992.0); }
float uniform(float lo, float hi) { return lo + (hi - lo) * (float)uniform01(); }
int randint(int n) { return (int)(rng() % (uint64_t)n); }

// float -> bfloat16 bits, round to nearest even (NaN stays NaN).
uint16_t bf16_bits(float x) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    if ((u & 0x7F800000u) == 0x7F800000u) return (uint16_t)((u >> 16) | ((u & 0xFFFFu) ? 0x40u : 0u));
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
float bf16_round(float x) {
    uint32_t u = (uint32_t)bf16_bits(x) << 16;
    std::memcpy(&x, &u, 4);
    return x;
}
// The value a floatX element of backend b holds for x.
float held(const Backend& b, float x) { return b.floatx_size() == 2 ? bf16_round(x) : x; }
Vec held(const Backend& b, Vec v) {
    for (float& x : v) x = held(b, x);
    return v;
}

// n floats uniform in [lo, hi), as floatX values of backend b (rand_x) or as floats (rand_f).
Vec rand_f(size_t n, float lo = -1.0f, float hi = 1.0f) {
    Vec v(n);
    for (float& x : v) x = uniform(lo, hi);
    return v;
}
Vec rand_x(const Backend& b, size_t n, float lo = -1.0f, float hi = 1.0f) {
    return held(b, rand_f(n, lo, hi));
}
IVec rand_tokens(size_t n, int V) {
    IVec v(n);
    for (int& t : v) t = randint(V);
    return v;
}
DVec D(const Vec& v) { return DVec(v.begin(), v.end()); }
double dot(const DVec& a, const DVec& b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); i++) s += a[i] * b[i];
    return s;
}
uint64_t site_seed(uint32_t site) { return dropout_site_seed(0x5EEDull, 7, site); }

std::string fmt(const char* f, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, f);
    std::vsnprintf(buf, sizeof buf, f, ap);
    va_end(ap);
    return buf;
}

// Backend memory, released when it goes out of scope.
class Mem {
public:
    Mem() = default;
    Mem(Backend& b, size_t bytes) : b_(&b), p_(b.alloc(bytes)) {}
    Mem(Mem&& o) noexcept : b_(o.b_), p_(o.p_) { o.p_ = nullptr; }
    Mem& operator=(Mem&& o) noexcept {
        std::swap(b_, o.b_);
        std::swap(p_, o.p_);
        return *this;
    }
    Mem(const Mem&) = delete;
    Mem& operator=(const Mem&) = delete;
    ~Mem() {
        if (p_) b_->release(p_);
    }
    void* get() const { return p_; }
    floatX* x() const { return static_cast<floatX*>(p_); }
    float* f() const { return static_cast<float*>(p_); }
    int* i() const { return static_cast<int*>(p_); }

private:
    Backend* b_ = nullptr;
    void* p_ = nullptr;
};

// Host -> backend: floats as floatX (put_x), as float (put_f), ints, bytes.
Mem put_x(Backend& b, const Vec& v) {
    Mem m(b, v.size() * b.floatx_size());
    if (b.floatx_size() == sizeof(float)) {
        b.upload(m.get(), v.data(), v.size() * sizeof(float));
    } else {
        std::vector<uint16_t> h(v.size());
        for (size_t i = 0; i < v.size(); i++) h[i] = bf16_bits(v[i]);
        b.upload(m.get(), h.data(), h.size() * sizeof(uint16_t));
    }
    return m;
}
template <class T>
Mem put(Backend& b, const std::vector<T>& v) {
    Mem m(b, v.size() * sizeof(T));
    b.upload(m.get(), v.data(), v.size() * sizeof(T));
    return m;
}
Mem put_f(Backend& b, const Vec& v) { return put(b, v); }
Mem put_i(Backend& b, const IVec& v) { return put(b, v); }

// Backend -> host: n floatX as floats, n floats, n ints.
Vec get_x(Backend& b, const floatX* p, size_t n) {
    Vec v(n);
    if (b.floatx_size() == sizeof(float)) {
        b.download(v.data(), p, n * sizeof(float));
        return v;
    }
    std::vector<uint16_t> h(n);
    b.download(h.data(), p, n * sizeof(uint16_t));
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)h[i] << 16;
        std::memcpy(&v[i], &u, 4);
    }
    return v;
}
template <class T>
std::vector<T> get(Backend& b, const void* p, size_t n) {
    std::vector<T> v(n);
    b.download(v.data(), p, n * sizeof(T));
    return v;
}
Vec get_f(Backend& b, const float* p, size_t n) { return get<float>(b, p, n); }
IVec get_i(Backend& b, const int* p, size_t n) { return get<int>(b, p, n); }

// p + n floatX elements.
floatX* at(const Backend& b, floatX* p, size_t n) {
    return reinterpret_cast<floatX*>(reinterpret_cast<char*>(p) + n * b.floatx_size());
}

// =============================================================================================
// Comparisons (each one check line)
// =============================================================================================
bool close(const std::string& what, const Vec& got, const Vec& want, double tol) {
    if (got.size() != want.size())
        return check(false, "%s: %zu values, expected %zu", what.c_str(), got.size(), want.size());
    return check_close(what.c_str(), got.data(), want.data(), got.size(), tol);
}
bool close(const std::string& what, const Vec& got, const DVec& want, double tol) {
    return close(what, got, Vec(want.begin(), want.end()), tol);
}
bool close_scalar(const std::string& what, double got, double want, double tol) {
    const double rel = std::fabs(got - want) / std::max(std::fabs(want), 1e-30);
    return check(std::isfinite(got) && rel <= tol, "%-52s got=%.12g want=%.12g rel=%.3e tol=%.0e",
                 what.c_str(), got, want, rel, tol);
}
// Bit for bit.
template <class T>
bool same(const std::string& what, const std::vector<T>& got, const std::vector<T>& want) {
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < got.size() && i < want.size(); i++)
        if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0 && bad++ == 0) first = i;
    const bool ok = bad == 0 && got.size() == want.size();
    return check(ok, "%-52s n=%-8zu bitwise: %zu differ%s", what.c_str(), want.size(), bad,
                 ok ? "" : fmt(" (first at %zu: %.9g, want %.9g)", first, (double)got[first],
                               (double)want[first]).c_str());
}
// Every entry finite: a beta-0 output pre-filled with NaN was written everywhere.
bool all_written(const std::string& what, const Vec& got) {
    size_t bad = 0;
    for (float v : got) bad += !std::isfinite(v);
    return check(bad == 0, "%-52s n=%-8zu %zu left unwritten (pre-filled NaN)", what.c_str(),
                 got.size(), bad);
}
// The zeros of y are exactly the elements dropout_keep drops (y had no zeros before).
bool check_mask(const std::string& what, const Vec& y, uint64_t seed, float p) {
    size_t bad = 0, kept = 0;
    for (size_t i = 0; i < y.size(); i++) {
        const bool keep = dropout_keep(seed, i, p);
        kept += keep;
        bad += (y[i] != 0.0f) != keep;
    }
    return check(bad == 0, "%-52s n=%-8zu mask = dropout_keep: %zu differ (kept %zu)",
                 what.c_str(), y.size(), bad, kept);
}

// Against the CPU backend's result for the same inputs: within a tolerance, or, for exact
// ops, bit for bit (a bf16 backend: the CPU's float result rounded to bfloat16).
void vs_cpu(const std::string& what, const Vec& got, const Vec& cpu_got, double tol) {
    close(what + " vs CPU", got, cpu_got, tol);
}
void vs_cpu_exact(const Backend& be, const std::string& what, const Vec& got, const Vec& cpu_got) {
    same(what + " vs CPU", got, held(be, cpu_got));
}

// ---- Finite differences -----------------------------------------------------------------
// The entries of a tensor of n to check: all of them, or FD_MAX chosen at random.
std::vector<size_t> fd_points(size_t n) {
    std::vector<size_t> idx(n);
    std::iota(idx.begin(), idx.end(), 0);
    if (n > FD_MAX) {
        std::shuffle(idx.begin(), idx.end(), rng);
        idx.resize(FD_MAX);
        std::sort(idx.begin(), idx.end());
    }
    return idx;
}
// dL/dx[i] for i in idx by central differences of loss() (x is perturbed in place, restored).
DVec fd_grad(DVec& x, const std::vector<size_t>& idx, const std::function<double()>& loss) {
    DVec g(idx.size());
    for (size_t k = 0; k < idx.size(); k++) {
        const size_t i = idx[k];
        const double x0 = x[i], h = FD_STEP * std::max(1.0, std::fabs(x0));
        x[i] = x0 + h;
        const double lp = loss();
        x[i] = x0 - h;
        const double lm = loss();
        x[i] = x0;
        g[k] = (lp - lm) / (2 * h);
    }
    return g;
}
// A backend gradient at idx (minus its pre-fill when it accumulates) against FD.
void check_grad(const std::string& what, const Vec& got, const Vec* prefill,
                const std::vector<size_t>& idx, const DVec& fd) {
    Vec g(idx.size());
    for (size_t k = 0; k < idx.size(); k++)
        g[k] = (float)((double)got[idx[k]] - (prefill ? (double)(*prefill)[idx[k]] : 0.0));
    close(what + (prefill ? " - prefill" : "") + fmt(" vs FD (%zu of %zu)", idx.size(), got.size()),
          g, fd, TOL.bwd);
}
// FD of loss() w.r.t. every checked entry of x, compared with the backend's gradient.
void grad_vs_fd(const std::string& what, DVec& x, const std::function<double()>& loss,
                const Vec& got, const Vec* prefill) {
    const std::vector<size_t> idx = fd_points(x.size());
    check_grad(what, got, prefill, idx, fd_grad(x, idx, loss));
}

// =============================================================================================
// The device and its memory
// =============================================================================================
void test_memory(Backend& be, Backend*) {
    using Bytes = std::vector<uint8_t>;
    auto rand_bytes = [](size_t n) {
        Bytes v(n);
        for (auto& c : v) c = (uint8_t)rng();
        return v;
    };
    check(be.alloc(0) == nullptr, "alloc(0) returns nullptr");
    for (size_t bytes : {(size_t)1, (size_t)13, (size_t)4096, (size_t)1000003}) {
        Bytes host = rand_bytes(bytes);
        Mem m(be, bytes);
        check(m.get() && (uintptr_t)m.get() % 64 == 0, "alloc(%zu) is 64-byte aligned", bytes);
        be.upload(m.get(), host.data(), bytes);
        same(fmt("upload + download %zu bytes", bytes), get<uint8_t>(be, m.get(), bytes), host);
    }
    // copy: 1000 bytes from offset 3 of one buffer to offset 17 of another, the rest untouched.
    const size_t n = 1031;
    Bytes a = rand_bytes(n), b = rand_bytes(n), want = b;
    std::copy(a.begin() + 3, a.begin() + 1003, want.begin() + 17);
    Mem ma = put(be, a), mb = put(be, b);
    be.copy((char*)mb.get() + 17, (char*)ma.get() + 3, 1000);
    be.copy(mb.get(), ma.get(), 0);
    same("copy 1000 bytes, offsets 3 -> 17 (and 0 bytes)", get<uint8_t>(be, mb.get(), n), want);
    // fill_zero: bytes [5, 782) of a; the rest untouched.
    want = a;
    std::fill(want.begin() + 5, want.begin() + 782, 0);
    be.fill_zero((char*)ma.get() + 5, 777);
    be.fill_zero(ma.get(), 0);
    same("fill_zero 777 bytes at offset 5 (and 0 bytes)", get<uint8_t>(be, ma.get(), n), want);
}

// dst (rows, cols; ld_dst) = src (rows, cols; ld_src); dst's other columns untouched.
void test_copy_rows(Backend& be, Backend* cpu) {
    struct Case { int rows, cols, ld_src, ld_dst, src_col; const char* what; };
    // The last: model.cpp's decoding copy of a qkv row's keys and values (H=2, dk=7, dv=4:
    // qkv row 2*14+8 = 36, keys at column 14) into a cache slab row (14+8 = 22).
    const Case cases[] = {{1, 5, 5, 5, 0, "dense"}, {3, 16, 40, 16, 0, "ld_src > cols"},
                          {17, 67, 101, 80, 0, "both strided"}, {7, 22, 36, 22, 14, "qkv -> slab"}};
    for (const Case& c : cases) {
        Vec src = rand_x(be, (size_t)c.rows * c.ld_src), dst = rand_x(be, (size_t)c.rows * c.ld_dst);
        auto run = [&](Backend& b) {
            Mem s = put_x(b, src), d = put_x(b, dst);
            b.copy_rows(d.x(), c.ld_dst, at(b, s.x(), c.src_col), c.ld_src, c.rows, c.cols);
            return get_x(b, d.x(), dst.size());
        };
        Vec want = dst;
        for (int r = 0; r < c.rows; r++)
            for (int j = 0; j < c.cols; j++)
                want[(size_t)r * c.ld_dst + j] = src[(size_t)r * c.ld_src + c.src_col + j];
        const std::string name = fmt("copy_rows %s %dx%d", c.what, c.rows, c.cols);
        Vec got = run(be);
        same(name, got, want);
        if (cpu) vs_cpu_exact(be, name, got, run(*cpu));
    }
}

// w (n) = p (n) in floatX: the same floats (fp32), rounded to nearest even (bf16).
void test_convert_weights(Backend& be, Backend* cpu) {
    // The test's own bfloat16 rounding, on hand-picked cases: ties go to the even neighbour.
    const float in[] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-20f,
                        -2.0f - 0x1p-7f - 0x1p-8f, 0x1p-130f};
    const float out[] = {1.0f, 1.0f + 0x1p-6f, 1.0f + 0x1p-7f, -2.0f - 0x1p-6f, 0x1p-130f};
    bool ok = true;
    for (int i = 0; i < 5; i++) ok = ok && bf16_round(in[i]) == out[i];
    check(ok, "bf16 upload helper rounds to nearest even (test's own)");
    for (size_t n : {(size_t)1, (size_t)7, (size_t)1000, (size_t)4099}) {
        Vec p = rand_f(n, -3.0f, 3.0f);
        for (size_t i = 0; i < n; i++) {   // bf16 ties and near-ties, large and small values
            uint32_t u;
            std::memcpy(&u, &p[i], 4);
            const uint32_t low[] = {0x8000u, 0x7FFFu, 0x8001u, 0x18000u};
            if (i % 6 < 4) u = (u & 0xFFFE0000u) | low[i % 6];
            std::memcpy(&p[i], &u, 4);
            if (i % 6 == 4) p[i] *= 1e30f;
            if (i % 6 == 5) p[i] *= 1e-30f;
        }
        auto run = [&](Backend& b) {
            Mem pm = put_f(b, p), w(b, n * b.floatx_size());
            b.convert_weights(w.x(), pm.f(), n);
            return get_x(b, w.x(), n);
        };
        const std::string name = fmt("convert_weights n=%zu (ties to even)", n);
        Vec got = run(be);
        same(name, got, held(be, p));
        if (cpu) vs_cpu_exact(be, name, got, run(*cpu));
    }
}

// =============================================================================================
// §3.4 Embeddings, §3.5 Positional Encoding
// =============================================================================================
// pe (L, d) = numerics.h's sinusoid: bit for bit; and against sin/cos in double.
void test_positional_table(Backend& be, Backend* cpu) {
    const int shapes[][2] = {{1, 5}, {7, 16}, {50, 67}, {256, 512}};
    for (const auto& sh : shapes) {
        const int L = sh[0], d = sh[1];
        auto run = [&](Backend& b) {
            Mem pe(b, (size_t)L * d * b.floatx_size());
            b.positional_table(pe.x(), L, d);
            return get_x(b, pe.x(), (size_t)L * d);
        };
        Vec exact((size_t)L * d);
        DVec f64((size_t)L * d);
        for (int pos = 0; pos < L; pos++)
            for (int c = 0; c < d; c++) {
                const double angle = pos / std::pow(10000.0, (double)(c - c % 2) / d);
                f64[(size_t)pos * d + c] = c % 2 ? std::cos(angle) : std::sin(angle);
                exact[(size_t)pos * d + c] = held(be, sinusoid(pos, c, d));
            }
        const std::string name = fmt("positional_table L=%d d=%d", L, d);
        Vec got = run(be);
        same(name + " = sinusoid() (numerics.h)", got, exact);
        close(name + " vs float64 sin/cos", got, f64, TOL.fwd);
        if (cpu) vs_cpu_exact(be, name, got, run(*cpu));
    }
}

// x (B, L, d) = dropout(E[tokens] * sqrt(d) + pe[pos0 + l]), in float64.
DVec ref_embedding(const IVec& tok, const DVec& E, const DVec& pe, int pos0, int B, int L, int d,
                   float p, uint64_t seed) {
    DVec x((size_t)B * L * d);
    for (int r = 0; r < B * L; r++)
        for (int c = 0; c < d; c++) {
            const size_t i = (size_t)r * d + c;
            const double v = E[(size_t)tok[r] * d + c] * std::sqrt((double)d) +
                             pe[(size_t)(pos0 + r % L) * d + c];
            x[i] = p <= 0 ? v : dropout_keep(seed, i, p) ? v / (1.0 - p) : 0.0;
        }
    return x;
}

void test_embedding_forward(Backend& be, Backend* cpu) {
    struct Case { int B, L, d, V, pos0; float p; const char* what; };
    const Case cases[] = {{1, 1, 5, 7, 0, 0.0f, "one token"}, {3, 7, 16, 7, 4, 0.1f, "pos0=4"},
                          {2, 17, 67, 50, 0, 0.3f, "odd d"},
                          {5, 1, 16, 50, 9, 0.0f, "decoding t=9"}};
    uint32_t site = 100;
    for (const Case& c : cases) {
        const size_t n = (size_t)c.B * c.L * c.d;
        const IVec tok = rand_tokens((size_t)c.B * c.L, c.V);   // PAD too: it is not masked here
        const Vec E = rand_x(be, (size_t)c.V * c.d, -0.5f, 0.5f);
        const Vec pe = rand_x(be, (size_t)(c.pos0 + c.L + 1) * c.d);
        const uint64_t seed = site_seed(site++);
        auto run = [&](Backend& b) {
            Mem t = put_i(b, tok), e = put_x(b, E), pm = put_x(b, pe), x(b, n * b.floatx_size());
            b.embedding_forward(x.x(), t.i(), e.x(), pm.x(), c.pos0, c.B, c.L, c.d, c.p, seed);
            return get_x(b, x.x(), n);
        };
        const std::string name =
            fmt("embedding_forward %s B=%d L=%d d=%d p=%.1f", c.what, c.B, c.L, c.d, c.p);
        Vec got = run(be);
        close(name + " vs float64", got,
              ref_embedding(tok, D(E), D(pe), c.pos0, c.B, c.L, c.d, c.p, seed), TOL.fwd);
        if (c.p > 0) check_mask(name, got, seed, c.p);
        if (cpu) vs_cpu(name, got, run(*cpu), TOL.cross_fwd);
    }
}

// dE[tokens] += sqrt(d) dropout'(dx); dpe[l] += dropout'(dx) (learned PE; the training
// forward's pos0 is 0). Against FD of ref_embedding w.r.t. E and pe.
void test_embedding_backward(Backend& be, Backend* cpu) {
    struct Case { int B, L, d, V; float p; bool learned; };
    const Case cases[] = {{1, 1, 5, 7, 0.0f, true}, {3, 7, 16, 7, 0.1f, true},
                          {2, 17, 67, 50, 0.3f, true}, {4, 5, 8, 50, 0.2f, false},
                          {8, 40, 24, 3, 0.1f, false},    // runs of about 100 rows a token
                          {6, 50, 100, 4, 0.1f, true}};   // long runs over 4 column groups, the last partial
    uint32_t site = 200;
    for (const Case& c : cases) {
        const size_t n = (size_t)c.B * c.L * c.d;
        const int Lpe = c.L + 2;   // rows past L must stay as they were
        const IVec tok = rand_tokens((size_t)c.B * c.L, c.V);   // V=7: rows share tokens
        const Vec dx = rand_x(be, n);
        const Vec dE0 = rand_f((size_t)c.V * c.d), dpe0 = rand_f((size_t)Lpe * c.d);
        const uint64_t seed = site_seed(site++);
        struct Out { Vec dE, dpe; };
        auto run = [&](Backend& b) {
            Mem t = put_i(b, tok), g = put_x(b, dx), dE = put_f(b, dE0), dpe = put_f(b, dpe0);
            b.embedding_backward(dE.f(), c.learned ? dpe.f() : nullptr, g.x(), t.i(), c.B, c.L,
                                 c.d, c.p, seed);
            return Out{get_f(b, dE.f(), dE0.size()), get_f(b, dpe.f(), dpe0.size())};
        };
        const std::string name = fmt("embedding_backward B=%d L=%d d=%d V=%d p=%.1f%s", c.B, c.L,
                                     c.d, c.V, c.p, c.learned ? "" : " dpe=nullptr");
        Out got = run(be);
        DVec E = D(rand_f((size_t)c.V * c.d)), pe = D(rand_f((size_t)Lpe * c.d)), dy = D(dx);
        auto loss = [&] { return dot(dy, ref_embedding(tok, E, pe, 0, c.B, c.L, c.d, c.p, seed)); };
        grad_vs_fd(name + " dE", E, loss, got.dE, &dE0);
        if (c.learned) grad_vs_fd(name + " dpe", pe, loss, got.dpe, &dpe0);
        else same(name + " dpe untouched", got.dpe, dpe0);
        if (cpu) {
            Out ref = run(*cpu);
            vs_cpu(name + " dE", got.dE, ref.dE, TOL.cross_bwd);
            if (c.learned) vs_cpu(name + " dpe", got.dpe, ref.dpe, TOL.cross_bwd);
            if (be.precision() == Precision::FP32) {   // the same roundings in the same order
                same(name + " dE == CPU", got.dE, ref.dE);
                if (c.learned) same(name + " dpe == CPU", got.dpe, ref.dpe);
            }
        }
    }
}

// =============================================================================================
// Linear layers
// =============================================================================================
// Y (rows, out) = X (rows, in) W^T + b, in float64 (b may be nullptr). The dot products are
// summed in vector lanes (omp simd: the order of float64 additions is free, their error ~1e-16):
// the finite-difference checks evaluate this for every point they perturb.
DVec ref_linear(const DVec& X, const DVec& W, const DVec* b, int rows, int in, int out) {
    DVec Y((size_t)rows * out);
    for (int r = 0; r < rows; r++)
        for (int o = 0; o < out; o++) {
            const double* x = &X[(size_t)r * in];
            const double* w = &W[(size_t)o * in];
            double s = 0.0;
#pragma omp simd reduction(+ : s)
            for (int i = 0; i < in; i++) s += x[i] * w[i];
            Y[(size_t)r * out + o] = (b ? (*b)[o] : 0.0) + s;
        }
    return Y;
}

// A bias of `out` values `shift` elements into its allocation (shift 1: off every 16-byte
// boundary, as in a parameter layout of sizes that are not multiples of 8, which cuBLASLt's
// bias epilogue cannot read: the GPU adds such a bias itself).
static const floatX* shifted_bias(Backend& b, Mem* m, const Vec& bias, int shift) {
    Vec padded(shift, 0.0f);
    padded.insert(padded.end(), bias.begin(), bias.end());
    *m = put_x(b, padded);
    return (const floatX*)((const char*)m->x() + shift * b.floatx_size());
}

void test_linear_forward(Backend& be, Backend* cpu) {
    struct Case { int rows, in, out; bool bias; int bias_shift; };
    // The last: the tied pre-softmax projection, logits = h E^T (b nullptr, V = 1000).
    const Case cases[] = {{1, 5, 3, true, 0}, {3, 16, 7, false, 0}, {17, 67, 33, true, 0}, {17, 67, 33, true, 1},
                          {100, 300, 257, true, 0}, {5, 16, 1000, false, 0}};
    for (const Case& c : cases) {
        const Vec X = rand_x(be, (size_t)c.rows * c.in), W = rand_x(be, (size_t)c.out * c.in),
                  bias = rand_x(be, c.out);
        auto run = [&](Backend& b) {
            Mem x = put_x(b, X), w = put_x(b, W), bm;
            const floatX* bp = c.bias ? shifted_bias(b, &bm, bias, c.bias_shift) : nullptr;
            Mem y(b, (size_t)c.rows * c.out * b.floatx_size());
            b.linear_forward(y.x(), x.x(), w.x(), bp, c.rows, c.in, c.out);
            return get_x(b, y.x(), (size_t)c.rows * c.out);
        };
        const std::string name = fmt("linear_forward %dx%d->%d %s%s", c.rows, c.in, c.out,
                                     c.bias ? "b" : "b=nullptr", c.bias_shift ? " (b off 16-byte boundaries)" : "");
        const DVec b64 = D(bias);
        Vec got = run(be);
        close(name + " vs float64", got,
              ref_linear(D(X), D(W), c.bias ? &b64 : nullptr, c.rows, c.in, c.out), TOL.fwd);
        if (cpu) vs_cpu(name, got, run(*cpu), TOL.cross_fwd);
    }
}

// On the CPU, run() called by the first thread of a parallel region of 2 (into *out): the op's own
// parallel region then has a team of one thread while omp_get_max_threads() still counts 2 or more,
// as under OMP_THREAD_LIMIT or OMP_DYNAMIC's smaller teams. (The column sums had split the columns
// by that count: the one thread summed its share and left the others' columns undone.) false, and
// nothing run, off the CPU or with one OpenMP thread.
template <class Out, class Run>
bool run_in_team_of_one(Backend& be, Run run, Out* out) {
#ifdef _OPENMP
    if (be.device() != Device::CPU || omp_get_max_threads() < 2) return false;
    const int levels = omp_get_max_active_levels();
    omp_set_max_active_levels(1);   // the op's region nested inside: one thread
#pragma omp parallel num_threads(2)
    if (omp_get_thread_num() == 0) *out = run(be);
    omp_set_max_active_levels(levels);
    return true;
#else
    (void)be, (void)run, (void)out;
    return false;
#endif
}

// dX = dY W + dX_beta dX (or dX nullptr); dW += dY^T X; db += sum dY (or db nullptr).
void test_linear_backward(Backend& be, Backend* cpu) {
    enum { NO_DX, DX_BETA0, DX_BETA1, DX_BETA_HALF };
    const float beta[] = {0.0f, 0.0f, 1.0f, 0.5f};
    struct Case { int rows, in, out; bool bias; int dx; };
    // {6, 16, 1000}: the tied logits' backward in model.cpp (b nullptr, out = V).
    const Case cases[] = {{1, 5, 3, true, DX_BETA0},    {3, 16, 7, false, DX_BETA1},
                          {17, 67, 33, true, NO_DX},    {17, 67, 33, true, DX_BETA1},
                          {40, 96, 130, true, DX_BETA0}, {5, 9, 4, true, DX_BETA_HALF},
                          {6, 16, 1000, false, DX_BETA0}, {300, 64, 264, true, DX_BETA0},
                          {9000, 3, 5, true, NO_DX}};
    // 264 columns: the GPU's db by 16-byte loads (columns in whole packs), over two blocks of rows;
    // 9,000 rows: 36 chunks of 256 rows, more than the GPU's finishing sum has lanes (32)
    for (const Case& c : cases) {
        const size_t nx = (size_t)c.rows * c.in, nw = (size_t)c.out * c.in;
        const Vec X = rand_x(be, nx), W = rand_x(be, nw, -0.3f, 0.3f);
        const Vec dY = rand_x(be, (size_t)c.rows * c.out);
        const Vec dX0 = c.dx >= DX_BETA1 ? rand_x(be, nx) : Vec(nx, NAN);
        Vec dX0_scaled = dX0;   // what dX_beta * dX adds
        for (float& v : dX0_scaled) v *= beta[c.dx];
        const Vec dW0 = rand_f(nw), db0 = rand_f(c.out);
        struct Out { Vec dX, dW, db; };
        auto run = [&](Backend& b) {
            Mem x = put_x(b, X), w = put_x(b, W), dy = put_x(b, dY), dx = put_x(b, dX0);
            Mem dw = put_f(b, dW0), db = put_f(b, db0);
            b.linear_backward(c.dx == NO_DX ? nullptr : dx.x(), beta[c.dx],
                              dw.f(), c.bias ? db.f() : nullptr, dy.x(), x.x(), w.x(), c.rows,
                              c.in, c.out);
            return Out{get_x(b, dx.x(), nx), get_f(b, dw.f(), nw), get_f(b, db.f(), c.out)};
        };
        const char* dx_what[] = {"dX=nullptr", "dX beta 0", "dX beta 1", "dX beta 0.5"};
        const std::string name = fmt("linear_backward %dx%d->%d %s %s", c.rows, c.in, c.out,
                                     c.bias ? "b" : "b=nullptr", dx_what[c.dx]);
        Out got = run(be);
        DVec x64 = D(X), w64 = D(W), b64 = D(rand_f(c.out)), dy64 = D(dY);
        auto loss = [&] {
            return dot(dy64, ref_linear(x64, w64, c.bias ? &b64 : nullptr, c.rows, c.in, c.out));
        };
        if (c.dx != NO_DX)
            grad_vs_fd(name + " dX", x64, loss, got.dX, c.dx >= DX_BETA1 ? &dX0_scaled : nullptr);
        if (c.dx == DX_BETA0) all_written(name + " dX", got.dX);
        grad_vs_fd(name + " dW", w64, loss, got.dW, &dW0);
        if (c.bias) grad_vs_fd(name + " db", b64, loss, got.db, &db0);
        else same(name + " db untouched", got.db, db0);
        Out nested;
        if (c.bias && run_in_team_of_one(be, run, &nested)) same(name + " db in a team of 1 thread", nested.db, got.db);
        if (cpu) {
            Out ref = run(*cpu);
            if (c.dx != NO_DX) vs_cpu(name + " dX", got.dX, ref.dX, TOL.cross_bwd);
            vs_cpu(name + " dW", got.dW, ref.dW, TOL.cross_bwd);
            if (c.bias) vs_cpu(name + " db", got.db, ref.db, TOL.cross_bwd);
        }
    }
}

// =============================================================================================
// §3.3 Position-wise Feed-Forward Networks: the first layer and its ReLU, fused
// =============================================================================================
// Fused: Y = max(0, X W^T + b), the FFN's first layer: against float64, against the same
// backend's linear_forward followed by max(0, .) (on the GPU the epilogue's product may use
// another cuBLASLt algorithm, so within the forward tolerance), and against the CPU.
void test_linear_relu_forward(Backend& be, Backend* cpu) {
    struct Case { int rows, in, out; bool bias; int bias_shift; };
    const Case cases[] = {{1, 5, 3, true, 0}, {3, 16, 7, false, 0}, {17, 67, 33, true, 0}, {17, 67, 33, true, 1},
                          {100, 300, 257, true, 0}};
    for (const Case& c : cases) {
        const size_t n = (size_t)c.rows * c.out;
        const Vec X = rand_x(be, (size_t)c.rows * c.in), W = rand_x(be, (size_t)c.out * c.in),
                  bias = rand_x(be, c.out);
        struct Out { Vec fused, unfused; };
        auto run = [&](Backend& b) {
            Mem x = put_x(b, X), w = put_x(b, W), bm;
            Mem y(b, n * b.floatx_size()), y2(b, n * b.floatx_size());
            const floatX* bp = c.bias ? shifted_bias(b, &bm, bias, c.bias_shift) : nullptr;
            b.linear_relu_forward(y.x(), x.x(), w.x(), bp, c.rows, c.in, c.out);
            b.linear_forward(y2.x(), x.x(), w.x(), bp, c.rows, c.in, c.out);
            Vec unfused = get_x(b, y2.x(), n);
            for (float& v : unfused) v = v > 0.0f ? v : 0.0f;
            return Out{get_x(b, y.x(), n), unfused};
        };
        const std::string name = fmt("linear_relu_forward %dx%d->%d %s%s", c.rows, c.in, c.out,
                                     c.bias ? "b" : "b=nullptr", c.bias_shift ? " (b off 16-byte boundaries)" : "");
        const DVec b64 = D(bias);
        DVec want = ref_linear(D(X), D(W), c.bias ? &b64 : nullptr, c.rows, c.in, c.out);
        size_t zeros = 0;
        for (double& v : want) zeros += v <= 0 ? (v = 0.0, 1) : 0;
        Out got = run(be);
        close(name + fmt(" vs float64 (%zu of %zu clipped)", zeros, n), got.fused, want, TOL.fwd);
        close(name + " vs linear_forward + max(0, .)", got.fused, got.unfused, TOL.fwd);
        if (cpu) vs_cpu(name, got.fused, run(*cpu).fused, TOL.cross_fwd);
    }
}

// The ReLU's backward, from the y that linear_relu_forward stores; with db, the FFN's first bias
// gradient from the same pass: against float64, and bit for bit against relu_backward without
// db followed by linear_backward's db (the path it replaces). The GPU sums dx as it writes it
// where rows are whole 16-byte packs (cols a multiple of 8 in bf16, of 4 in fp32; 300 rows: two
// chunks of 256), else it sums afterwards (cols 17, 67).
void test_relu(Backend& be, Backend* cpu) {
    struct Case { int rows, cols; };
    for (const Case& c : {Case{1, 1}, Case{1, 17}, Case{8, 125}, Case{1, 4099}, Case{17, 67}, Case{300, 64},
                          Case{5, 2048}}) {
        const size_t n = (size_t)c.rows * c.cols;
        Vec x = rand_x(be, n), dy = rand_x(be, n), db0 = rand_f(c.cols);
        for (float& v : x) v = held(be, v < 0 ? v - 1e-3f : v + 1e-3f);   // away from the kink
        Vec y(n), dx(n);
        for (size_t i = 0; i < n; i++) {
            y[i] = x[i] > 0 ? x[i] : 0.0f;   // what linear_relu_forward stores
            dx[i] = x[i] > 0 ? dy[i] : 0.0f;
        }
        DVec db64(db0.begin(), db0.end());
        for (size_t i = 0; i < n; i++) db64[i % c.cols] += dx[i];
        const int in = 8;   // the unfused db: linear_backward's, over the same dx
        const Vec xin = rand_x(be, (size_t)c.rows * in), wv = rand_x(be, (size_t)c.cols * in);
        struct Out { Vec dx, dx_inplace, db, db_unfused; };
        auto run = [&](Backend& b) {
            Mem ym = put_x(b, y), g = put_x(b, dy), d(b, n * b.floatx_size()), gi = put_x(b, dy);
            Mem db = put_f(b, db0), db2 = put_f(b, db0);
            b.relu_backward(d.x(), nullptr, g.x(), ym.x(), c.rows, c.cols);
            b.relu_backward(gi.x(), db.f(), gi.x(), ym.x(), c.rows, c.cols);   // in place, as model.cpp
            Mem xm = put_x(b, xin), w = put_x(b, wv), dw = put_f(b, Vec((size_t)c.cols * in, 0.0f));
            b.linear_backward(nullptr, 0.0f, dw.f(), db2.f(), d.x(), xm.x(), w.x(), c.rows, in, c.cols);
            return Out{get_x(b, d.x(), n), get_x(b, gi.x(), n), get_f(b, db.f(), c.cols), get_f(b, db2.f(), c.cols)};
        };
        const std::string name = fmt("relu_backward %dx%d", c.rows, c.cols);
        Out got = run(be);
        same(name + " = dy where y > 0", got.dx, dx);
        same(name + " in place (dx == dy), with db", got.dx_inplace, dx);
        close(name + " db vs float64", got.db, db64, TOL.bwd);
        same(name + " db = linear_backward's", got.db, got.db_unfused);
        Out nested;
        if (run_in_team_of_one(be, run, &nested)) {
            same(name + " in place, with db, in a team of 1 thread", nested.dx_inplace, got.dx_inplace);
            same(name + " db in a team of 1 thread", nested.db, got.db);
        }
        DVec x64 = D(x), dy64 = D(dy);
        auto loss = [&] {
            double s = 0;
            for (size_t i = 0; i < n; i++) s += dy64[i] * std::max(0.0, x64[i]);
            return s;
        };
        grad_vs_fd(name, x64, loss, got.dx, nullptr);
        if (cpu) {
            Out ref = run(*cpu);
            vs_cpu_exact(be, name, got.dx, ref.dx);
            vs_cpu(name + " db", got.db, ref.db, TOL.cross_bwd);
        }
    }
}

// =============================================================================================
// §5.4 Residual Dropout, §3.1 the residual connection and LayerNorm
// =============================================================================================
// y = x * keep(i) / (1 - p), float64.
DVec ref_dropout(const DVec& x, float p, uint64_t seed) {
    DVec y(x.size());
    for (size_t i = 0; i < x.size(); i++)
        y[i] = p <= 0 ? x[i] : dropout_keep(seed, i, p) ? x[i] / (1.0 - p) : 0.0;
    return y;
}

void test_dropout(Backend& be, Backend* cpu) {
    struct Case { size_t n; float p; };
    const Case cases[] = {{1, 0.1f}, {17, 0.0f}, {1000, 0.1f}, {4099, 0.3f}, {65537, 0.5f}};
    uint32_t site = 300;
    for (const Case& c : cases) {
        const size_t n = c.n;
        Vec x = rand_x(be, n), dy = rand_x(be, n);
        for (float& v : x) v = held(be, v + (v < 0 ? -0.01f : 0.01f));   // no zeros
        const uint64_t seed = site_seed(site++);
        struct Out { Vec y, y_inplace, dx_inplace; };
        auto run = [&](Backend& b) {
            Mem xm = put_x(b, x), y(b, n * b.floatx_size()), xi = put_x(b, x), g = put_x(b, dy);
            b.dropout_forward(y.x(), xm.x(), n, c.p, seed);
            b.dropout_forward(xi.x(), xi.x(), n, c.p, seed);
            b.dropout_backward(g.x(), g.x(), n, c.p, seed);   // in place, as model.cpp
            return Out{get_x(b, y.x(), n), get_x(b, xi.x(), n), get_x(b, g.x(), n)};
        };
        const std::string name = fmt("dropout n=%zu p=%.1f", n, c.p);
        Out got = run(be);
        close(name + " forward vs float64", got.y, ref_dropout(D(x), c.p, seed), TOL.fwd);
        same(name + " forward in place", got.y_inplace, got.y);
        if (c.p > 0) check_mask(name + " forward", got.y, seed, c.p);
        else same(name + " forward = x", got.y, x);
        if (n >= 4096) {   // the kept fraction: 1 - p within 5 standard deviations
            size_t kept = 0;
            for (float v : got.y) kept += v != 0.0f;
            const double sd = std::sqrt(n * c.p * (1.0 - c.p)), want = n * (1.0 - c.p);
            check(std::fabs(kept - want) <= 5 * sd + 1, "%-52s kept %zu, expected %.0f +- %.0f (5 sd)",
                  (name + " kept fraction").c_str(), kept, want, 5 * sd);
        }
        DVec x64 = D(x), dy64 = D(dy);
        auto loss = [&] { return dot(dy64, ref_dropout(x64, c.p, seed)); };
        grad_vs_fd(name + " backward (in place)", x64, loss, got.dx_inplace, nullptr);
        if (c.p > 0) check_mask(name + " backward", got.dx_inplace, seed, c.p);
        if (cpu) {
            Out ref = run(*cpu);
            vs_cpu(name + " forward", got.y, ref.y, TOL.cross_fwd);
            vs_cpu(name + " backward", got.dx_inplace, ref.dx_inplace, TOL.cross_bwd);
        }
    }
}

// y = x + dropout(f). Its backward is dropout_backward (and a copy for x) in model.cpp.
void test_residual(Backend& be, Backend* cpu) {
    struct Case { size_t n; float p; bool inplace; };
    const Case cases[] = {{1, 0.0f, false}, {17, 0.1f, true}, {1000, 0.0f, true},
                          {4099, 0.3f, true}, {4099, 0.3f, false}};
    uint32_t site = 400;
    for (const Case& c : cases) {
        const size_t n = c.n;
        Vec f = rand_x(be, n), x = rand_x(be, n);
        for (float& v : f) v = held(be, v + (v < 0 ? -0.01f : 0.01f));
        const uint64_t seed = site_seed(site++);
        auto run = [&](Backend& b) {
            Mem fm = put_x(b, f), xm = put_x(b, x), y(b, n * b.floatx_size());
            floatX* out = c.inplace ? fm.x() : y.x();   // y == f, as model.cpp runs it
            b.residual_forward(out, fm.x(), xm.x(), n, c.p, seed);
            return get_x(b, out, n);
        };
        DVec want = ref_dropout(D(f), c.p, seed);
        for (size_t i = 0; i < n; i++) want[i] += x[i];
        const std::string name =
            fmt("residual_forward n=%zu p=%.1f%s", n, c.p, c.inplace ? " y==f" : "");
        Vec got = run(be);
        close(name + " vs float64", got, want, TOL.fwd);
        if (c.p > 0) {   // where f is dropped, y is x exactly
            size_t bad = 0;
            for (size_t i = 0; i < n; i++)
                if (!dropout_keep(seed, i, c.p)) bad += std::memcmp(&got[i], &x[i], 4) != 0;
            check(bad == 0, "%-52s n=%-8zu %zu dropped elements differ from x",
                  (name + " mask").c_str(), n, bad);
        }
        if (cpu) vs_cpu(name, got, run(*cpu), TOL.cross_fwd);
    }
}

// y (rows, d) = (x - mean) rstd g + b, rstd = 1/sqrt(biased var + 1e-5), float64.
DVec ref_layernorm(const DVec& x, const DVec& g, const DVec& b, int rows, int d,
                   DVec* mean = nullptr, DVec* rstd = nullptr) {
    DVec y((size_t)rows * d);
    if (mean) mean->assign(rows, 0.0);
    if (rstd) rstd->assign(rows, 0.0);
    for (int r = 0; r < rows; r++) {
        const double* xr = &x[(size_t)r * d];
        double mu = 0, var = 0;
        for (int c = 0; c < d; c++) mu += xr[c];
        mu /= d;
        for (int c = 0; c < d; c++) var += (xr[c] - mu) * (xr[c] - mu);
        const double rs = 1.0 / std::sqrt(var / d + 1e-5);
        for (int c = 0; c < d; c++) y[(size_t)r * d + c] = (xr[c] - mu) * rs * g[c] + b[c];
        if (mean) (*mean)[r] = mu;
        if (rstd) (*rstd)[r] = rs;
    }
    return y;
}

struct LnInputs { Vec x, g, b; };
LnInputs ln_inputs(const Backend& be, int rows, int d) {
    LnInputs in{rand_f((size_t)rows * d), rand_x(be, d, 0.5f, 1.5f), rand_x(be, d, -0.5f, 0.5f)};
    for (int r = 0; r < rows; r++) {   // rows with an offset and a scale of their own
        const float off = uniform(-3.0f, 3.0f), sc = uniform(0.2f, 3.0f);
        for (int c = 0; c < d; c++) in.x[(size_t)r * d + c] = in.x[(size_t)r * d + c] * sc + off;
    }
    in.x = held(be, in.x);
    return in;
}

// The GPU keeps a row in registers up to 4 groups of 16 bytes a lane (d 1024 in bf16, 512 in
// fp32; d = 300 leaves groups past d), past that it streams the row (d = 1100).
void test_layernorm_forward(Backend& be, Backend* cpu) {
    const int shapes[][2] = {{1, 5}, {3, 16}, {17, 67}, {64, 512}, {9, 300}, {20, 1024}, {5, 1100}};
    for (const auto& sh : shapes) {
        const int rows = sh[0], d = sh[1];
        const LnInputs in = ln_inputs(be, rows, d);
        struct Out { Vec y, mean, rstd; };
        auto run = [&](Backend& b) {
            Mem x = put_x(b, in.x), g = put_x(b, in.g), bb = put_x(b, in.b);
            Mem y(b, in.x.size() * b.floatx_size()), mean(b, rows * 4), rstd(b, rows * 4);
            b.layernorm_forward(y.x(), mean.f(), rstd.f(), x.x(), g.x(), bb.x(), rows, d);
            return Out{get_x(b, y.x(), in.x.size()), get_f(b, mean.f(), rows),
                       get_f(b, rstd.f(), rows)};
        };
        DVec mean, rstd;
        const DVec y = ref_layernorm(D(in.x), D(in.g), D(in.b), rows, d, &mean, &rstd);
        const std::string name = fmt("layernorm_forward rows=%d d=%d", rows, d);
        Out got = run(be);
        close(name + " y vs float64", got.y, y, TOL.fwd);
        close(name + " mean vs float64", got.mean, mean, TOL.fwd);
        close(name + " rstd vs float64", got.rstd, rstd, TOL.fwd);
        if (cpu) {
            Out ref = run(*cpu);
            vs_cpu(name + " y", got.y, ref.y, TOL.cross_fwd);
            vs_cpu(name + " mean", got.mean, ref.mean, TOL.cross_fwd);
            vs_cpu(name + " rstd", got.rstd, ref.rstd, TOL.cross_fwd);
        }
    }
}

// On the CPU, run() with one OpenMP thread gives bitwise what it gave with all of them (`got`):
// the sums over rows (LayerNorm's dg, db: fixed blocks of rows) do not depend on the thread count.
template <class Out, class Run>
void same_with_one_thread(Backend& be, const std::string& name, const Out& got, Run run) {
#ifdef _OPENMP
    if (be.device() != Device::CPU) return;
    const int saved = omp_get_max_threads();
    if (saved < 2) {
        check_skip("%s: one OpenMP thread here, so no other thread count to compare", name.c_str());
        return;
    }
    omp_set_num_threads(1);
    const Out one = run(be);
    omp_set_num_threads(saved);
    same(name + " dx, 1 thread = " + std::to_string(saved), one.dx, got.dx);
    same(name + " dg, 1 thread = " + std::to_string(saved), one.dg, got.dg);
    same(name + " db, 1 thread = " + std::to_string(saved), one.db, got.db);
    Out nested;
    if (run_in_team_of_one(be, run, &nested)) {
        same(name + " dx, in a team of 1 thread", nested.dx, got.dx);
        same(name + " dg, in a team of 1 thread", nested.dg, got.dg);
        same(name + " db, in a team of 1 thread", nested.db, got.db);
    }
#else
    (void)be, (void)name, (void)got, (void)run;
#endif
}

// dx = LN'(dy) + dx_beta dx; dg, db accumulate. mean, rstd from the backend's own forward.
// 100 rows: the CPU sums dg, db in blocks of 32 rows (the last one partial), then block by block.
void test_layernorm_backward(Backend& be, Backend* cpu) {
    struct Case { int rows, d; float beta; };
    // the GPU's one-pass kernel (a row in registers, blocks of 128 rows) over 1, 2, 3 blocks,
    // with groups past d (d = 300, 600); d = 1100 is past its registers (the two-pass kernels)
    std::vector<Case> cases = {{1, 5, 0.0f}, {3, 16, 1.0f}, {17, 67, 0.0f}, {17, 67, 1.0f},
                               {8, 512, 1.0f}, {1, 4, 0.5f}, {100, 67, 1.0f}, {300, 96, 1.0f},
                               {20, 600, 0.0f}, {5, 1100, 1.0f}};
    for (const Case& c : cases) {
        const int rows = c.rows, d = c.d;
        const size_t n = (size_t)rows * d;
        const LnInputs in = ln_inputs(be, rows, d);
        const Vec dy = rand_x(be, n), dx0 = c.beta != 0 ? rand_x(be, n) : Vec(n, NAN);
        const Vec dg0 = rand_f(d), db0 = rand_f(d);
        Vec dx0_scaled = dx0;   // what dx_beta * dx adds
        for (float& v : dx0_scaled) v *= c.beta;
        struct Out { Vec dx, dg, db; };
        auto run = [&](Backend& b) {
            Mem x = put_x(b, in.x), g = put_x(b, in.g), bb = put_x(b, in.b);
            Mem y(b, n * b.floatx_size()), mean(b, rows * 4), rstd(b, rows * 4);
            b.layernorm_forward(y.x(), mean.f(), rstd.f(), x.x(), g.x(), bb.x(), rows, d);
            Mem dym = put_x(b, dy), dx = put_x(b, dx0), dg = put_f(b, dg0), db = put_f(b, db0);
            b.layernorm_backward(dx.x(), c.beta, dg.f(), db.f(), dym.x(), x.x(), mean.f(), rstd.f(),
                                 g.x(), rows, d);
            return Out{get_x(b, dx.x(), n), get_f(b, dg.f(), d), get_f(b, db.f(), d)};
        };
        const std::string name = fmt("layernorm_backward rows=%d d=%d dx_beta %g", rows, d, c.beta);
        Out got = run(be);
        DVec x64 = D(in.x), g64 = D(in.g), b64 = D(in.b), dy64 = D(dy);
        auto loss = [&] { return dot(dy64, ref_layernorm(x64, g64, b64, rows, d)); };
        grad_vs_fd(name + " dx", x64, loss, got.dx, c.beta != 0 ? &dx0_scaled : nullptr);
        if (c.beta == 0) all_written(name + " dx", got.dx);
        grad_vs_fd(name + " dg", g64, loss, got.dg, &dg0);
        grad_vs_fd(name + " db", b64, loss, got.db, &db0);
        if (rows > 32) same_with_one_thread(be, name, got, run);
        if (cpu) {
            Out ref = run(*cpu);
            vs_cpu(name + " dx", got.dx, ref.dx, TOL.cross_bwd);
            vs_cpu(name + " dg", got.dg, ref.dg, TOL.cross_bwd);
            vs_cpu(name + " db", got.db, ref.db, TOL.cross_bwd);
        }
    }
}

// The fused post-LN block end: r = x + dropout(f), y = LN(r) (float64 reference).
DVec ref_residual_layernorm(const DVec& f, const DVec& x, const DVec& g, const DVec& b, int rows,
                            int d, float p, uint64_t seed, DVec* r = nullptr) {
    DVec sum = ref_dropout(f, p, seed);
    for (size_t i = 0; i < sum.size(); i++) sum[i] += x[i];
    if (r) *r = sum;
    return ref_layernorm(sum, g, b, rows, d);
}

// residual_layernorm_forward: y, r, mean, rstd against float64, and bit for bit against the
// same backend's residual_forward + layernorm_forward (the unfused path it replaces).
void test_residual_layernorm_forward(Backend& be, Backend* cpu) {
    struct Case { int rows, d; float p; bool r_is_f; };
    const Case cases[] = {{1, 5, 0.0f, false}, {3, 16, 0.1f, true}, {17, 67, 0.3f, false},
                          {64, 512, 0.1f, true}, {9, 300, 0.1f, false}, {20, 1024, 0.3f, true},
                          {5, 1100, 0.1f, false}};   // as test_layernorm_forward's
    uint32_t site = 450;
    for (const Case& c : cases) {
        const int rows = c.rows, d = c.d;
        const size_t n = (size_t)rows * d;
        const LnInputs in = ln_inputs(be, rows, d);   // x: rows with their own offset and scale
        const Vec f = rand_x(be, n);
        const uint64_t seed = site_seed(site++);
        struct Out { Vec y, r, mean, rstd, y2, r2, mean2, rstd2; };
        auto run = [&](Backend& b) {
            Mem fm = put_x(b, f), x = put_x(b, in.x), g = put_x(b, in.g), bb = put_x(b, in.b);
            Mem y(b, n * b.floatx_size()), rm(b, n * b.floatx_size()), mean(b, rows * 4), rstd(b, rows * 4);
            floatX* r = c.r_is_f ? fm.x() : rm.x();   // r == f, as model.cpp runs it
            b.residual_layernorm_forward(y.x(), r, mean.f(), rstd.f(), fm.x(), x.x(), g.x(), bb.x(), rows,
                                         d, c.p, seed);
            Out o;
            o.y = get_x(b, y.x(), n), o.r = get_x(b, r, n);
            o.mean = get_f(b, mean.f(), rows), o.rstd = get_f(b, rstd.f(), rows);
            Mem f2 = put_x(b, f), y2(b, n * b.floatx_size()), mean2(b, rows * 4), rstd2(b, rows * 4);
            b.residual_forward(f2.x(), f2.x(), x.x(), n, c.p, seed);
            b.layernorm_forward(y2.x(), mean2.f(), rstd2.f(), f2.x(), g.x(), bb.x(), rows, d);
            o.y2 = get_x(b, y2.x(), n), o.r2 = get_x(b, f2.x(), n);
            o.mean2 = get_f(b, mean2.f(), rows), o.rstd2 = get_f(b, rstd2.f(), rows);
            return o;
        };
        DVec r64;
        const DVec y64 = ref_residual_layernorm(D(f), D(in.x), D(in.g), D(in.b), rows, d, c.p, seed, &r64);
        const std::string name = fmt("residual_layernorm_forward rows=%d d=%d p=%.1f%s", rows, d, c.p,
                                     c.r_is_f ? " r==f" : "");
        Out got = run(be);
        close(name + " y vs float64", got.y, y64, TOL.fwd);
        close(name + " r vs float64", got.r, r64, TOL.fwd);
        same(name + " y = unfused", got.y, got.y2);
        same(name + " r = unfused", got.r, got.r2);
        same(name + " mean = unfused", got.mean, got.mean2);
        same(name + " rstd = unfused", got.rstd, got.rstd2);
        if (cpu) {
            Out ref = run(*cpu);
            vs_cpu(name + " y", got.y, ref.y, TOL.cross_fwd);
            vs_cpu(name + " r", got.r, ref.r, TOL.cross_fwd);
        }
    }
}

// residual_layernorm_backward: dx (the gradient of x, through r) and df (of f, through the
// dropout) against central differences of the float64 forward; dg, db accumulate; bit for bit
// against the same backend's layernorm_backward + copy + dropout_backward.
void test_residual_layernorm_backward(Backend& be, Backend* cpu) {
    struct Case { int rows, d; float p; };
    const Case cases[] = {{1, 5, 0.0f}, {3, 16, 0.1f}, {17, 67, 0.3f}, {8, 512, 0.1f}, {100, 67, 0.1f},
                          {300, 96, 0.1f}, {20, 300, 0.3f}, {5, 1100, 0.1f}};   // as test_layernorm_backward's
    uint32_t site = 470;
    for (const Case& c : cases) {
        const int rows = c.rows, d = c.d;
        const size_t n = (size_t)rows * d;
        const LnInputs in = ln_inputs(be, rows, d);
        const Vec f = rand_x(be, n), dy = rand_x(be, n), dg0 = rand_f(d), db0 = rand_f(d);
        const uint64_t seed = site_seed(site++);
        struct Out { Vec dx, df, dg, db, dx2, df2, dg2, db2; };
        auto run = [&](Backend& b) {
            Mem fm = put_x(b, f), x = put_x(b, in.x), g = put_x(b, in.g), bb = put_x(b, in.b);
            Mem y(b, n * b.floatx_size()), r(b, n * b.floatx_size()), mean(b, rows * 4), rstd(b, rows * 4);
            b.residual_layernorm_forward(y.x(), r.x(), mean.f(), rstd.f(), fm.x(), x.x(), g.x(), bb.x(), rows,
                                         d, c.p, seed);
            const Vec nan(n, NAN);
            Mem dym = put_x(b, dy), dx = put_x(b, nan), df = put_x(b, nan), dg = put_f(b, dg0), db = put_f(b, db0);
            b.residual_layernorm_backward(dx.x(), df.x(), dg.f(), db.f(), dym.x(), r.x(), mean.f(), rstd.f(),
                                          g.x(), rows, d, c.p, seed);
            Out o;
            o.dx = get_x(b, dx.x(), n), o.df = get_x(b, df.x(), n);
            o.dg = get_f(b, dg.f(), d), o.db = get_f(b, db.f(), d);
            Mem dx2(b, n * b.floatx_size()), df2(b, n * b.floatx_size()), dg2 = put_f(b, dg0), db2 = put_f(b, db0);
            b.layernorm_backward(df2.x(), 0.0f, dg2.f(), db2.f(), dym.x(), r.x(), mean.f(), rstd.f(), g.x(), rows, d);
            b.copy(dx2.x(), df2.x(), n * b.floatx_size());
            b.dropout_backward(df2.x(), df2.x(), n, c.p, seed);
            o.dx2 = get_x(b, dx2.x(), n), o.df2 = get_x(b, df2.x(), n);
            o.dg2 = get_f(b, dg2.f(), d), o.db2 = get_f(b, db2.f(), d);
            return o;
        };
        const std::string name = fmt("residual_layernorm_backward rows=%d d=%d p=%.1f", rows, d, c.p);
        Out got = run(be);
        DVec f64 = D(f), x64 = D(in.x), g64 = D(in.g), b64 = D(in.b), dy64 = D(dy);
        auto loss = [&] { return dot(dy64, ref_residual_layernorm(f64, x64, g64, b64, rows, d, c.p, seed)); };
        grad_vs_fd(name + " dx", x64, loss, got.dx, nullptr);
        grad_vs_fd(name + " df", f64, loss, got.df, nullptr);
        all_written(name + " dx", got.dx);
        all_written(name + " df", got.df);
        if (c.p > 0) {   // where f was dropped its gradient is exactly 0
            size_t bad = 0;
            for (size_t i = 0; i < n; i++) bad += !dropout_keep(seed, i, c.p) && got.df[i] != 0.0f;
            check(bad == 0, "%-52s n=%-8zu %zu dropped elements with a gradient", (name + " df mask").c_str(), n, bad);
        }
        grad_vs_fd(name + " dg", g64, loss, got.dg, &dg0);
        grad_vs_fd(name + " db", b64, loss, got.db, &db0);
        same(name + " dx = unfused", got.dx, got.dx2);
        same(name + " df = unfused", got.df, got.df2);
        same(name + " dg = unfused", got.dg, got.dg2);
        same(name + " db = unfused", got.db, got.db2);
        if (rows > 32) same_with_one_thread(be, name, got, run);
        if (cpu) {
            Out ref = run(*cpu);
            vs_cpu(name + " dx", got.dx, ref.dx, TOL.cross_bwd);
            vs_cpu(name + " df", got.df, ref.df, TOL.cross_bwd);
            vs_cpu(name + " dg", got.dg, ref.dg, TOL.cross_bwd);
            vs_cpu(name + " db", got.db, ref.db, TOL.cross_bwd);
        }
    }
}

// =============================================================================================
// §3.2.1 Scaled Dot-Product Attention, §3.2.2 Multi-Head Attention
// =============================================================================================
bool key_allowed(const IVec& keys, const AttentionShape& s, int b, int i, int j) {
    return keys[(size_t)b * s.Lk + j] != PAD_ID && !(s.causal && j > i);
}

// ctx (B, Lq, H*dv) = dropout(softmax(mask(Q K^T / sqrt(dk)))) V; probs (B, H, Lq, Lk), with
// the dropout mask over probs' flat index. float64.
void ref_attention(const AttentionShape& s, const DVec& q, const DVec& kv, const IVec& keys,
                   float p, uint64_t seed, DVec* ctx, DVec* probs) {
    ctx->assign((size_t)s.B * s.Lq * s.H * s.dv, 0.0);
    probs->assign((size_t)s.B * s.H * s.Lq * s.Lk, 0.0);
    DVec e(s.Lk);
    for (int b = 0; b < s.B; b++)
        for (int h = 0; h < s.H; h++)
            for (int i = 0; i < s.Lq; i++) {
                const double* qi = &q[((size_t)b * s.Lq + i) * s.q_stride + s.q_col + h * s.dk];
                double mx = -INFINITY, sum = 0;
                for (int j = 0; j < s.Lk; j++) {
                    if (!key_allowed(keys, s, b, i, j)) continue;
                    const double* kj = &kv[((size_t)b * s.Lk + j) * s.kv_stride + s.k_col + h * s.dk];
                    double dotp = 0;
                    for (int c = 0; c < s.dk; c++) dotp += qi[c] * kj[c];
                    e[j] = dotp / std::sqrt((double)s.dk);
                    mx = std::max(mx, e[j]);
                }
                for (int j = 0; j < s.Lk; j++)
                    if (key_allowed(keys, s, b, i, j)) sum += (e[j] = std::exp(e[j] - mx));
                const size_t row = (((size_t)b * s.H + h) * s.Lq + i) * s.Lk;
                double* out = &(*ctx)[((size_t)b * s.Lq + i) * s.H * s.dv + h * s.dv];
                for (int j = 0; j < s.Lk; j++) {
                    if (!key_allowed(keys, s, b, i, j)) continue;
                    const double P = e[j] / sum;
                    (*probs)[row + j] = P;
                    const double Pd = p <= 0 ? P : dropout_keep(seed, row + j, p) ? P / (1.0 - p) : 0.0;
                    const double* vj = &kv[((size_t)b * s.Lk + j) * s.kv_stride + s.v_col + h * s.dv];
                    for (int c = 0; c < s.dv; c++) out[c] += Pd * vj[c];
                }
            }
}

// pad_at >= 0: key pad_at of every sentence longer than pad_at + 1 is PAD, inside the
// sentence (the CPU's softmax takes another path for such keys than for a run without PAD).
struct AttnCase { const char* what; int B, Lq, Lk, H, dk, dv; bool self, causal; float p; int pad_at = -1; };
const AttnCase ATTN_CASES[] = {
    {"encoder self", 2, 5, 5, 2, 4, 3, true, false, 0.0f},
    {"decoder self causal", 3, 7, 7, 3, 5, 7, true, true, 0.1f},
    {"cross Lq!=Lk", 2, 6, 9, 2, 4, 6, false, false, 0.0f},
    {"cross p_attn", 3, 4, 11, 1, 16, 5, false, false, 0.2f},
    {"one key", 1, 1, 1, 1, 5, 5, true, true, 0.0f},
    {"larger self", 2, 20, 20, 4, 16, 16, true, false, 0.1f},
    // the GPU's tiled kernels: several tiles of 32 query rows and chunks of 64 keys
    {"decoder self causal, tiles and chunks", 2, 70, 70, 2, 8, 6, true, true, 0.1f},
    {"cross, 33 queries over 129 keys", 1, 33, 129, 2, 6, 5, false, false, 0.1f},
    // the model's head width over 100 positions: the GPU's fused kernels (TRANSFORMER_ATTENTION=fused)
    // with 16-byte staging and more than 48 KB of shared memory, over two tiles of 64 rows
    {"decoder self causal, d_k = d_v = 64, 100 positions", 1, 100, 100, 1, 64, 64, true, true, 0.1f},
    // d_k + d_v beyond the tiled kernels' shared memory: the GPU's row-wise kernels (cuBLASLt with
    // TRANSFORMER_ATTENTION=batched)
    {"cross, d_k + d_v = 1624 (wider than a tile)", 1, 3, 4, 1, 1024, 600, false, false, 0.0f},
    // PAD among a sentence's keys, not only after them
    {"encoder self, PAD inside", 3, 9, 9, 2, 4, 3, true, false, 0.0f, 3},
    {"decoder self causal, PAD inside", 2, 18, 18, 2, 5, 4, true, true, 0.1f, 6},
    // more keys than the CPU's vectorised softmax keeps in registers (256)
    {"cross, 300 keys", 2, 3, 300, 1, 4, 3, false, false, 0.0f},
    // the causal mask with more keys than queries (transformer.h allows it; the model's causal
    // attention is self-attention): the GPU's second tile of 32 keys is seen by no query, its dK
    // and dV are 0 (the tiled key kernel had read its shared accumulators before they were zeroed)
    {"cross causal, keys past the queries", 1, 4, 40, 1, 4, 3, false, true, 0.0f},
};

// Inputs laid out as model.cpp lays them out. Self-attention: q, k, v in one qkv buffer
// (B*L, 2*H*dk + H*dv), keys at column H*dk, values at 2*H*dk; cross-attention: q (B*Lq, H*dk)
// and kv (B*Lk, H*dk + H*dv), causal as the case says. Key tokens: sentence b's first len[b]
// keys, PAD after (the first sentence full); the decoder's start with <s>.
struct AttnData {
    AttentionShape s;
    Vec q, kv;   // self: q is empty and kv is the qkv buffer
    IVec keys;
    uint64_t seed;
};
AttnData attention_data(const Backend& be, const AttnCase& c, uint32_t site) {
    const int qk = c.H * c.dk, vv = c.H * c.dv;
    AttnData a;
    if (c.self) {
        a.s = {c.B, c.Lq, c.Lq, c.H, c.dk, c.dv, 2 * qk + vv, 0, 2 * qk + vv, qk, 2 * qk, c.causal};
        a.kv = rand_x(be, (size_t)c.B * c.Lq * (2 * qk + vv), -1.5f, 1.5f);
    } else {
        a.s = {c.B, c.Lq, c.Lk, c.H, c.dk, c.dv, qk, 0, qk + vv, 0, qk, c.causal};
        a.q = rand_x(be, (size_t)c.B * c.Lq * qk, -1.5f, 1.5f);
        a.kv = rand_x(be, (size_t)c.B * c.Lk * (qk + vv), -1.5f, 1.5f);
    }
    a.keys.assign((size_t)c.B * a.s.Lk, PAD_ID);
    for (int b = 0; b < c.B; b++) {
        const int len = b == 0 ? a.s.Lk : 1 + randint(a.s.Lk);
        for (int j = 0; j < len; j++) a.keys[(size_t)b * a.s.Lk + j] = 4 + randint(50);
        if (c.causal) a.keys[(size_t)b * a.s.Lk] = BOS_ID;
        if (c.pad_at >= 0 && len > c.pad_at + 1) a.keys[(size_t)b * a.s.Lk + c.pad_at] = PAD_ID;
    }
    a.seed = site_seed(site);
    return a;
}

void test_attention_forward(Backend& be, Backend* cpu) {
    uint32_t site = 500;
    for (const AttnCase& c : ATTN_CASES) {
        const AttnData a = attention_data(be, c, site++);
        const AttentionShape& s = a.s;
        const size_t n_ctx = (size_t)s.B * s.Lq * s.H * s.dv, n_probs = (size_t)s.B * s.H * s.Lq * s.Lk;
        struct Out { Vec ctx, probs; };
        auto run = [&](Backend& b) {
            Mem q = put_x(b, a.q), kv = put_x(b, a.kv), keys = put_i(b, a.keys);
            Mem ctx(b, n_ctx * b.floatx_size()), probs(b, n_probs * 4);
            b.attention_forward(ctx.x(), probs.f(), c.self ? kv.x() : q.x(), kv.x(), keys.i(), s,
                                c.p, a.seed);
            return Out{get_x(b, ctx.x(), n_ctx), get_f(b, probs.f(), n_probs)};
        };
        DVec ctx, probs;
        ref_attention(s, c.self ? D(a.kv) : D(a.q), D(a.kv), a.keys, c.p, a.seed, &ctx, &probs);
        const std::string name = fmt("attention_forward %s B=%d Lq=%d Lk=%d H=%d dk=%d dv=%d p=%.1f",
                                     c.what, s.B, s.Lq, s.Lk, s.H, s.dk, s.dv, c.p);
        Out got = run(be);
        close(name + " ctx vs float64", got.ctx, ctx, TOL.fwd);
        close(name + " probs vs float64", got.probs, probs, TOL.fwd);
        size_t masked = 0, bad = 0;
        for (int b = 0; b < s.B; b++)
            for (int h = 0; h < s.H; h++)
                for (int i = 0; i < s.Lq; i++)
                    for (int j = 0; j < s.Lk; j++)
                        if (!key_allowed(a.keys, s, b, i, j)) {
                            masked++;
                            bad += got.probs[(((size_t)b * s.H + h) * s.Lq + i) * s.Lk + j] != 0.0f;
                        }
        check(bad == 0, "%-52s %zu masked probs, %zu not exactly 0", (name + " mask").c_str(),
              masked, bad);
        if (cpu) {
            Out ref = run(*cpu);
            vs_cpu(name + " ctx", got.ctx, ref.ctx, TOL.cross_fwd);
            vs_cpu(name + " probs", got.probs, ref.probs, TOL.cross_fwd);
        }
    }
}

// Each padded sentence of a's batch again as a batch of its own, unpadded: its ctx rows bit for
// bit the same (no dropout). A sentence then decodes alike alone and in any batch; before the
// sums ran over the keys before the sentence's padding alone, a sentence of 53 keys padded to
// 65 differed in the last bit here and there (the softmax's vector loop and scalar remainder
// split the keys by their count), which int8's quantization turned into another token on 6
// of the test set's 1,581 lines.
void attention_padding_invariant(Backend& be, const AttnCase& c, const AttnData& a) {
    const AttentionShape& s = a.s;
    const int qk = s.H * s.dk, q_width = c.self ? s.kv_stride : qk, ctx_width = s.H * s.dv;
    auto run = [&](const AttentionShape& sh, const Vec& q, const Vec& kv, const IVec& keys) {
        Mem qm = put_x(be, q), kvm = put_x(be, kv), keysm = put_i(be, keys);
        const size_t n_ctx = (size_t)sh.B * sh.Lq * ctx_width;
        Mem ctx(be, n_ctx * be.floatx_size()), probs(be, (size_t)sh.B * sh.H * sh.Lq * sh.Lk * 4);
        be.attention_forward(ctx.x(), probs.f(), c.self ? kvm.x() : qm.x(), kvm.x(), keysm.i(), sh, 0.0f, a.seed);
        return get_x(be, ctx.x(), n_ctx);
    };
    const Vec batch = run(s, a.q, a.kv, a.keys);
    for (int b = 0; b < s.B; b++) {
        int len = s.Lk;
        while (len > 0 && a.keys[(size_t)b * s.Lk + len - 1] == PAD_ID) len--;
        if (len == s.Lk) continue;   // not padded
        AttentionShape one = s;
        one.B = 1, one.Lk = len, one.Lq = c.self ? len : s.Lq;
        auto rows = [](const Vec& v, size_t first, size_t n, int width) {
            return Vec(v.begin() + first * width, v.begin() + (first + n) * width);
        };
        const Vec kv = rows(a.kv, (size_t)b * s.Lk, len, s.kv_stride);
        const Vec q = c.self ? Vec() : rows(a.q, (size_t)b * s.Lq, s.Lq, q_width);
        const IVec keys(a.keys.begin() + (size_t)b * s.Lk, a.keys.begin() + (size_t)b * s.Lk + len);
        same(fmt("attention_forward %s: sentence %d of %d keys padded to %d == alone", c.what, b, len, s.Lk),
             run(one, q, kv, keys), rows(batch, (size_t)b * s.Lq, one.Lq, ctx_width));
    }
}

void test_attention_padding(Backend& be, Backend*) {
    uint32_t site = 550;
    for (const AttnCase& c : ATTN_CASES)
        if (c.B > 1) attention_padding_invariant(be, c, attention_data(be, c, site++));
    // The test set's case: 53 keys padded to 65, self-attention and cross-attention.
    for (bool self : {true, false}) {
        const AttnCase c{self ? "encoder self, 53 of 65" : "cross, 53 of 65", 2, self ? 65 : 7, 65, 2, 8, 8, self, false, 0.0f};
        AttnData a = attention_data(be, c, site++);
        for (int j = 0; j < 65; j++) a.keys[65 + j] = j < 53 ? 4 + j : PAD_ID;
        attention_padding_invariant(be, c, a);
    }
}

// dq, dkv written (pre-filled NaN) at the columns q, kv were read from; self-attention's dq
// and dkv are one buffer, as model.cpp passes them. Against FD of ref_attention's ctx.
void test_attention_backward(Backend& be, Backend* cpu) {
    uint32_t site = 600;
    for (const AttnCase& c : ATTN_CASES) {
        const AttnData a = attention_data(be, c, site++);
        const AttentionShape& s = a.s;
        const size_t n_ctx = (size_t)s.B * s.Lq * s.H * s.dv, n_probs = (size_t)s.B * s.H * s.Lq * s.Lk;
        const Vec dctx = rand_x(be, n_ctx);
        struct Out { Vec dq, dkv; };
        auto run = [&](Backend& b) {
            Mem q = put_x(b, a.q), kv = put_x(b, a.kv), keys = put_i(b, a.keys);
            Mem ctx(b, n_ctx * b.floatx_size()), probs(b, n_probs * 4);
            const floatX* qp = c.self ? kv.x() : q.x();
            b.attention_forward(ctx.x(), probs.f(), qp, kv.x(), keys.i(), s, c.p, a.seed);
            Mem dc = put_x(b, dctx), dq = put_x(b, Vec(a.q.size(), NAN));
            Mem dkv = put_x(b, Vec(a.kv.size(), NAN));
            b.attention_backward(c.self ? dkv.x() : dq.x(), dkv.x(), dc.x(), probs.f(), qp, kv.x(),
                                 s, c.p, a.seed);
            return Out{get_x(b, dq.x(), a.q.size()), get_x(b, dkv.x(), a.kv.size())};
        };
        const std::string name = fmt("attention_backward %s B=%d Lq=%d Lk=%d H=%d dk=%d dv=%d p=%.1f",
                                     c.what, s.B, s.Lq, s.Lk, s.H, s.dk, s.dv, c.p);
        Out got = run(be);
        DVec q64 = D(a.q), kv64 = D(a.kv), dctx64 = D(dctx), ctx, probs;
        auto loss = [&] {   // self: q and kv are the same buffer, perturbed together
            ref_attention(s, c.self ? kv64 : q64, kv64, a.keys, c.p, a.seed, &ctx, &probs);
            return dot(dctx64, ctx);
        };
        if (c.self) {
            grad_vs_fd(name + " dqkv", kv64, loss, got.dkv, nullptr);
            all_written(name + " dqkv", got.dkv);
        } else {
            grad_vs_fd(name + " dq", q64, loss, got.dq, nullptr);
            grad_vs_fd(name + " dkv", kv64, loss, got.dkv, nullptr);
            all_written(name + " dq", got.dq);
            all_written(name + " dkv", got.dkv);
        }
        if (cpu) {
            Out ref = run(*cpu);
            if (!c.self) vs_cpu(name + " dq", got.dq, ref.dq, TOL.cross_bwd);
            vs_cpu(name + (c.self ? " dqkv" : " dkv"), got.dkv, ref.dkv, TOL.cross_bwd);
        }
    }
}

// =============================================================================================
// §3.2.3 The decoder one position at a time: attention over cached keys/values
// =============================================================================================
// ctx (n, H*dv): row r's query over steps 0..t of the cache (rows, H*dk + H*dv), step j's slab
// from row step_row[j] on, step j < t at its row slots[r * ld + j], step t at row r. float64.
DVec ref_step_self(const DVec& q, const DVec& cache, const IVec& step_row, const IVec& slots, int ld, int t,
                   const StepShape& s) {
    const int ldc = s.H * s.dk + s.H * s.dv;
    DVec ctx((size_t)s.n * s.H * s.dv, 0.0), e(t + 1);
    for (int r = 0; r < s.n; r++)
        for (int h = 0; h < s.H; h++) {
            auto entry = [&](int j) {
                const int row = j < t ? slots[(size_t)r * ld + j] : r;
                return &cache[((size_t)step_row[j] + row) * ldc];
            };
            double mx = -INFINITY, sum = 0;
            for (int j = 0; j <= t; j++) {
                double dotp = 0;
                for (int c = 0; c < s.dk; c++)
                    dotp += q[(size_t)r * s.q_stride + h * s.dk + c] * entry(j)[h * s.dk + c];
                e[j] = dotp / std::sqrt((double)s.dk);
                mx = std::max(mx, e[j]);
            }
            for (int j = 0; j <= t; j++) sum += (e[j] = std::exp(e[j] - mx));
            for (int j = 0; j <= t; j++)
                for (int c = 0; c < s.dv; c++)
                    ctx[(size_t)r * s.H * s.dv + h * s.dv + c] +=
                        e[j] / sum * entry(j)[s.H * s.dk + h * s.dv + c];
        }
    return ctx;
}

// slots_dst row r = slots_src row parent[r] for columns < t - 1, column t - 1 = parent[r].
IVec ref_reorder(const IVec& src, const IVec& parent, int n, int t, int ld) {
    IVec dst = src;
    for (int r = 0; r < n; r++) {
        for (int j = 0; j < t - 1; j++) dst[(size_t)r * ld + j] = src[(size_t)parent[r] * ld + j];
        dst[(size_t)r * ld + t - 1] = parent[r];
    }
    return dst;
}

// Steps 0..steps-1 as model.cpp decodes: each step copy_rows the rows' keys/values from their
// qkv projection into slab t, then attention_step_self reads the slabs through step_row and the
// slots (random parents every step, reordered on the host by ref_reorder). Slab t begins at row
// step_row[t] = t * R: R - n rows lie between two slabs (none when R == n). The cache starts
// as large "poison" values, so a row read that step_row and the slots do not name shows.
void test_attention_step_self(Backend& be, Backend* cpu) {
    struct Case { int R, n, H, dk, dv, steps; };
    const Case cases[] = {{5, 4, 2, 4, 3, 6}, {1, 1, 1, 5, 5, 3}, {12, 12, 4, 16, 8, 9}, {9, 6, 3, 8, 8, 11}};
    for (const Case& c : cases) {
        const int qk = c.H * c.dk, vv = c.H * c.dv, ldq = 2 * qk + vv, ldc = qk + vv;
        const int ld = c.steps + 2;   // max_steps: the slots' row stride
        const StepShape s{c.n, c.H, c.dk, c.dv, ldq};
        const Vec cache0 = rand_x(be, (size_t)ld * c.R * ldc, -50.0f, 50.0f);
        IVec step_row(c.steps);
        for (int t = 0; t < c.steps; t++) step_row[t] = t * c.R;
        std::vector<Vec> qkv(c.steps);
        std::vector<IVec> slots(c.steps);
        IVec cur((size_t)c.R * ld, 0);
        for (int t = 0; t < c.steps; t++) {
            qkv[t] = rand_x(be, (size_t)c.n * ldq, -1.5f, 1.5f);
            if (t > 0) cur = ref_reorder(cur, rand_tokens(c.n, c.n), c.n, t, ld);
            slots[t] = cur;
        }
        auto run = [&](Backend& b) {
            Mem cache = put_x(b, cache0), ctx(b, (size_t)c.n * vv * b.floatx_size()), rows = put_i(b, step_row);
            Mem sl(b, cur.size() * sizeof(int));
            Vec all;
            for (int t = 0; t < c.steps; t++) {
                Mem q = put_x(b, qkv[t]);
                b.upload(sl.get(), slots[t].data(), slots[t].size() * sizeof(int));
                b.copy_rows(at(b, cache.x(), (size_t)step_row[t] * ldc), ldc, at(b, q.x(), qk), ldq,
                            c.n, ldc);
                b.attention_step_self(ctx.x(), q.x(), cache.x(), rows.i(), sl.i(), ld, t, s);
                Vec o = get_x(b, ctx.x(), (size_t)c.n * vv);
                all.insert(all.end(), o.begin(), o.end());
            }
            return all;
        };
        DVec cache64 = D(cache0), want;
        for (int t = 0; t < c.steps; t++) {
            for (int r = 0; r < c.n; r++)
                for (int j = 0; j < ldc; j++)
                    cache64[((size_t)step_row[t] + r) * ldc + j] = qkv[t][(size_t)r * ldq + qk + j];
            DVec o = ref_step_self(D(qkv[t]), cache64, step_row, slots[t], ld, t, s);
            want.insert(want.end(), o.begin(), o.end());
        }
        const std::string name = fmt("attention_step_self R=%d n=%d H=%d dk=%d dv=%d steps 0..%d",
                                     c.R, c.n, c.H, c.dk, c.dv, c.steps - 1);
        Vec got = run(be);
        close(name + " vs float64", got, want, TOL.fwd);
        if (cpu) vs_cpu(name, got, run(*cpu), TOL.cross_fwd);
    }
}

// One step late in a long output (t = 1699: 1700 keys), where fewer than the usual 8 warps fit
// a block's shared memory and the (row, head) pairs span several blocks: each block's warps
// must cover their own pairs, none skipped (the cache and slots random, not built step by step;
// the slabs of n rows one after another, from row 1 on).
void test_attention_step_self_long(Backend& be, Backend* cpu) {
    const int R = 3, n = 3, H = 4, dk = 4, dv = 3, t = 1699, ld = t + 2;
    const int qk = H * dk, vv = H * dv, ldq = 2 * qk + vv, ldc = qk + vv;
    const StepShape s{n, H, dk, dv, ldq};
    const Vec cache0 = rand_x(be, ((size_t)(t + 1) * n + 1) * ldc, -1.5f, 1.5f), q = rand_x(be, (size_t)n * ldq, -1.5f, 1.5f);
    const IVec slots = rand_tokens((size_t)R * ld, n);
    IVec step_row(t + 1);
    for (int j = 0; j <= t; j++) step_row[j] = 1 + j * n;
    auto run = [&](Backend& b) {
        Mem cache = put_x(b, cache0), qm = put_x(b, q), sl = put_i(b, slots), ctx(b, (size_t)n * vv * b.floatx_size());
        Mem rows = put_i(b, step_row);
        b.attention_step_self(ctx.x(), qm.x(), cache.x(), rows.i(), sl.i(), ld, t, s);
        return get_x(b, ctx.x(), (size_t)n * vv);
    };
    const DVec want = ref_step_self(D(q), D(cache0), step_row, slots, ld, t, s);
    const std::string name = fmt("attention_step_self R=%d n=%d H=%d dk=%d dv=%d step %d alone", R, n, H, dk, dv, t);
    Vec got = run(be);
    close(name + " vs float64", got, want, TOL.fwd);
    if (cpu) vs_cpu(name, got, run(*cpu), TOL.cross_fwd);
}

void test_cache_reorder(Backend& be, Backend* cpu) {
    struct Case { int n, t, ld; };
    const Case cases[] = {{1, 1, 4}, {5, 4, 6}, {8, 7, 7}, {16, 2, 10}};
    for (const Case& c : cases) {
        const IVec src = rand_tokens((size_t)c.n * c.ld, c.n), parent = rand_tokens(c.n, c.n);
        const IVec dst0((size_t)c.n * c.ld, -7);
        auto run = [&](Backend& b) {
            Mem sm = put_i(b, src), pm = put_i(b, parent), dm = put_i(b, dst0);
            b.cache_reorder(dm.i(), sm.i(), pm.i(), c.n, c.t, c.ld);
            IVec d = get_i(b, dm.i(), dst0.size()), cols;   // the columns < t: the contract
            for (int r = 0; r < c.n; r++)
                for (int j = 0; j < c.t; j++) cols.push_back(d[(size_t)r * c.ld + j]);
            return cols;
        };
        const IVec full = ref_reorder(src, parent, c.n, c.t, c.ld);
        IVec want;
        for (int r = 0; r < c.n; r++)
            for (int j = 0; j < c.t; j++) want.push_back(full[(size_t)r * c.ld + j]);
        const std::string name = fmt("cache_reorder n=%d t=%d ld=%d", c.n, c.t, c.ld);
        IVec got = run(be);
        same(name, got, want);
        if (cpu) same(name + " vs CPU", got, run(*cpu));
    }
}

// kt (B, H, dk, S) = the keys of kv (B*S, ld), head h's at column h*dk.
void test_attention_keys_transpose(Backend& be, Backend* cpu) {
    struct Case { int B, S, H, dk, dv; };
    const Case cases[] = {{1, 1, 1, 5, 5}, {3, 7, 2, 5, 3}, {2, 33, 4, 16, 16}};
    for (const Case& c : cases) {
        const int ld = c.H * c.dk + c.H * c.dv;
        const size_t nkt = (size_t)c.B * c.H * c.dk * c.S;
        const Vec kv = rand_x(be, (size_t)c.B * c.S * ld);
        auto run = [&](Backend& b) {
            Mem kvm = put_x(b, kv), kt(b, nkt * b.floatx_size());
            b.attention_keys_transpose(kt.x(), kvm.x(), c.B, c.S, c.H, c.dk, ld);
            return get_x(b, kt.x(), nkt);
        };
        Vec want(nkt);
        for (int b = 0; b < c.B; b++)
            for (int h = 0; h < c.H; h++)
                for (int i = 0; i < c.dk; i++)
                    for (int j = 0; j < c.S; j++)
                        want[(((size_t)b * c.H + h) * c.dk + i) * c.S + j] =
                            kv[((size_t)b * c.S + j) * ld + h * c.dk + i];
        const std::string name =
            fmt("attention_keys_transpose B=%d S=%d H=%d dk=%d", c.B, c.S, c.H, c.dk);
        Vec got = run(be);
        same(name, got, want);
        if (cpu) vs_cpu_exact(be, name, got, run(*cpu));
    }
}

// attention_step_cross's rows r of `got` (a row a sentence) against the same rows doubled,
// rows 2r and 2r + 1 both sentence r's: each bit for bit row r's.
void same_rows_in_runs_of_two(Backend& be, const std::string& name, const Vec& got, const Vec& kv,
                              const Vec& q, const IVec& len, int S, const StepShape& s) {
#ifdef USE_OPENBLAS
    check_skip("%s: the rows in runs of two go through OpenBLAS (BLAS=openblas), not our sgemm", name.c_str());
#else
    const int B = s.n, qk = s.H * s.dk, vv = s.H * s.dv, ld = qk + vv;
    Vec q2((size_t)2 * B * s.q_stride);
    IVec sentence2(2 * B);
    for (int r = 0; r < 2 * B; r++) {
        sentence2[r] = r / 2;
        std::copy_n(&q[(size_t)(r / 2) * s.q_stride], s.q_stride, &q2[(size_t)r * s.q_stride]);
    }
    Mem kvm = put_x(be, kv), qm = put_x(be, q2), lm = put_i(be, len), sm = put_i(be, sentence2);
    Mem kt(be, (size_t)B * qk * S * be.floatx_size()), ctx(be, (size_t)2 * B * vv * be.floatx_size());
    be.attention_keys_transpose(kt.x(), kvm.x(), B, S, s.H, s.dk, ld);
    be.attention_step_cross(ctx.x(), qm.x(), kt.x(), kvm.x(), ld, lm.i(), sm.i(), S, {2 * B, s.H, s.dk, s.dv, s.q_stride});
    const Vec two = get_x(be, ctx.x(), (size_t)2 * B * vv);
    for (int copy = 0; copy < 2; copy++) {
        Vec rows((size_t)B * vv);
        for (int r = 0; r < B; r++) std::copy_n(&two[(size_t)(2 * r + copy) * vv], vv, &rows[(size_t)r * vv]);
        same(name + fmt(" = runs of two, row %d of each", copy), got, rows);
    }
#endif
}

// Row r over its sentence b = sentence[r]: the first len[b] keys/values of kv (B*S, ld), the
// keys through attention_keys_transpose as model.cpp does. PAD keys/values past len[b] hold
// large "poison" values: reading them shows.
// Greedy's shape (n = 0: a row a sentence, sentence[r] = r, the CPU's every-head-at-once path):
// on the CPU each row also equals, bit for bit, the same row in a beam's run of two rows.
void test_attention_step_cross(Backend& be, Backend* cpu) {
    struct Case { int B, S, H, dk, dv, n, q_pad; };
    // 1700 keys: 7 warps a block, 12 (row, head) pairs over 2 blocks; 13000 keys: one warp's
    // scores take 52 KB, over the 48 KB a launch gets without asking. Greedy's: 12 and 16
    // sums a row (over 8 at a time), 40 keys (three 16-lane chunks), dv 20 (a masked one).
    const Case cases[] = {{3, 9, 2, 5, 3, 7, 0}, {1, 1, 1, 4, 4, 1, 0}, {2, 20, 4, 16, 8, 8, 3},
                          {1, 1700, 4, 4, 3, 3, 0}, {1, 13000, 1, 4, 3, 2, 0},
                          {4, 40, 4, 64, 64, 0, 0}, {3, 9, 3, 5, 20, 0, 2}};
    for (const Case& c0 : cases) {
        Case c = c0;
        const bool greedy = c.n == 0;
        if (greedy) c.n = c.B;
        const int qk = c.H * c.dk, vv = c.H * c.dv, ld = qk + vv, qs = qk + c.q_pad;
        const StepShape s{c.n, c.H, c.dk, c.dv, qs};
        IVec len(c.B), sentence = rand_tokens(c.n, c.B);
        if (greedy) std::iota(sentence.begin(), sentence.end(), 0);
        for (int b = 0; b < c.B; b++) len[b] = b == 0 ? c.S : 1 + randint(c.S);
        Vec kv = rand_x(be, (size_t)c.B * c.S * ld, -1.5f, 1.5f);
        for (int b = 0; b < c.B; b++)
            for (int j = len[b]; j < c.S; j++)
                for (int i = 0; i < ld; i++)
                    kv[((size_t)b * c.S + j) * ld + i] = held(be, uniform(-50, 50));
        const Vec q = rand_x(be, (size_t)c.n * qs, -1.5f, 1.5f);
        auto run = [&](Backend& b) {
            Mem kvm = put_x(b, kv), qm = put_x(b, q), lm = put_i(b, len), sm = put_i(b, sentence);
            Mem kt(b, (size_t)c.B * qk * c.S * b.floatx_size());
            Mem ctx(b, (size_t)c.n * vv * b.floatx_size());
            b.attention_keys_transpose(kt.x(), kvm.x(), c.B, c.S, c.H, c.dk, ld);
            b.attention_step_cross(ctx.x(), qm.x(), kt.x(), kvm.x(), ld, lm.i(), sm.i(), c.S, s);
            return get_x(b, ctx.x(), (size_t)c.n * vv);
        };
        DVec want((size_t)c.n * vv, 0.0), e(c.S);
        for (int r = 0; r < c.n; r++)
            for (int h = 0; h < c.H; h++) {
                const int b = sentence[r];
                auto row = [&](int j) { return &kv[((size_t)b * c.S + j) * ld]; };   // key j
                double mx = -INFINITY, sum = 0;
                for (int j = 0; j < len[b]; j++) {
                    double dotp = 0;
                    for (int i = 0; i < c.dk; i++)
                        dotp += (double)q[(size_t)r * qs + h * c.dk + i] * row(j)[h * c.dk + i];
                    e[j] = dotp / std::sqrt((double)c.dk);
                    mx = std::max(mx, e[j]);
                }
                for (int j = 0; j < len[b]; j++) sum += (e[j] = std::exp(e[j] - mx));
                for (int j = 0; j < len[b]; j++)
                    for (int i = 0; i < c.dv; i++)
                        want[(size_t)r * vv + h * c.dv + i] += e[j] / sum * row(j)[qk + h * c.dv + i];
            }
        const std::string name = fmt("attention_step_cross B=%d S=%d H=%d dk=%d dv=%d n=%d q_stride=%d",
                                     c.B, c.S, c.H, c.dk, c.dv, c.n, qs);
        Vec got = run(be);
        close(name + " vs float64", got, want, TOL.fwd);
        if (cpu) vs_cpu(name, got, run(*cpu), TOL.cross_fwd);
        if (greedy && be.device() == Device::CPU) same_rows_in_runs_of_two(be, name, got, kv, q, len, c.S, s);
    }
}

// =============================================================================================
// §3.4 The pre-softmax projection's loss: §5.4 Label Smoothing; decoding's top-k
// =============================================================================================
// One row's loss, PyTorch's convention: lse - (1 - eps) z_y - eps/V sum_k z_k. float64.
double ref_ce_row(const double* z, int V, int y, double eps, double* lse_out = nullptr) {
    double mx = -INFINITY, sum = 0, sum_z = 0;
    for (int k = 0; k < V; k++) mx = std::max(mx, z[k]);
    for (int k = 0; k < V; k++) {
        sum += std::exp(z[k] - mx);
        sum_z += z[k];
    }
    const double lse = mx + std::log(sum);
    if (lse_out) *lse_out = lse;
    return lse - (1.0 - eps) * z[y] - eps / V * sum_z;
}
// Labels: random non-PAD ids, every 4th row PAD.
IVec ce_labels(int rows, int V) {
    IVec labels(rows);
    for (int r = 0; r < rows; r++) labels[r] = r % 4 == 3 ? PAD_ID : 1 + randint(V - 1);
    return labels;
}

void test_crossentropy_forward(Backend& be, Backend* cpu) {
    struct Case { int rows, V; float eps, offset; };
    // V = 7 and 50: rows start off 16-byte boundaries (the GPU's head and tail); 37,000: the
    // paper's vocabulary, many 16-byte packs a thread.
    const Case cases[] = {{1, 7, 0.0f, 0}, {5, 50, 0.1f, 0}, {17, 1000, 0.1f, 0},
                          {17, 1000, 0.0f, 0}, {4, 50, 0.1f, 40}, {3, 37000, 0.1f, 0}};
    for (const Case& c : cases) {
        const Vec z = rand_x(be, (size_t)c.rows * c.V, c.offset - 4, c.offset + 4);
        const IVec labels = ce_labels(c.rows, c.V);
        // The op adds to the loss it is given (a batch's chunks accumulate on the device): it
        // starts from `before`, and the sum checked is what the op added.
        const double before = 1.25;
        struct Out { double sum; Vec lse; };
        auto run = [&](Backend& b) {
            Mem zm = put_x(b, z), lm = put_i(b, labels), lse(b, c.rows * 4);
            Mem loss = put(b, std::vector<double>{before});
            b.crossentropy_forward(lse.f(), (double*)loss.get(), zm.x(), lm.i(), c.rows, c.V, c.eps);
            return Out{get<double>(b, loss.get(), 1)[0] - before, get_f(b, lse.f(), c.rows)};
        };
        const DVec z64 = D(z);
        double sum = 0;
        DVec lse;
        std::vector<int> real;   // non-PAD rows: lse is defined there
        for (int r = 0; r < c.rows; r++) {
            if (labels[r] == PAD_ID) continue;
            double l;
            sum += ref_ce_row(&z64[(size_t)r * c.V], c.V, labels[r], c.eps, &l);
            lse.push_back(l);
            real.push_back(r);
        }
        auto lse_rows = [&](const Vec& v) {
            Vec out;
            for (int r : real) out.push_back(v[r]);
            return out;
        };
        const std::string name = fmt("crossentropy_forward rows=%d V=%d eps=%.1f%s", c.rows, c.V,
                                     c.eps, c.offset ? " logits+40" : "");
        Out got = run(be);
        close_scalar(name + " sum vs float64", got.sum, sum, TOL.fwd);
        close(name + " lse (non-PAD rows) vs float64", lse_rows(got.lse), lse, TOL.fwd);
        if (cpu) {
            Out ref = run(*cpu);
            close_scalar(name + " sum vs CPU", got.sum, ref.sum, TOL.cross_fwd);
            vs_cpu(name + " lse", lse_rows(got.lse), lse_rows(ref.lse), TOL.cross_fwd);
        }
    }
}

// In place: logits -> (softmax - q) * scale, PAD rows 0. Against FD of scale * sum of losses.
void test_crossentropy_backward(Backend& be, Backend* cpu) {
    struct Case { int rows, V; float eps, scale; };
    const Case cases[] = {{1, 7, 0.0f, 1.0f}, {5, 50, 0.1f, 1.0f / 3}, {6, 1000, 0.1f, 0.25f},
                          {4, 1000, 0.0f, 1.0f / 7}, {3, 8003, 0.1f, 0.5f}};
    for (const Case& c : cases) {
        const size_t n = (size_t)c.rows * c.V;
        const Vec z = rand_x(be, n, -4, 4);
        const IVec labels = ce_labels(c.rows, c.V);
        auto run = [&](Backend& b) {
            Mem zm = put_x(b, z), lm = put_i(b, labels), lse(b, c.rows * 4);
            Mem loss = put(b, std::vector<double>{0.0});
            b.crossentropy_forward(lse.f(), (double*)loss.get(), zm.x(), lm.i(), c.rows, c.V, c.eps);
            b.crossentropy_backward(zm.x(), lse.f(), lm.i(), c.rows, c.V, c.eps, c.scale);
            return get_x(b, zm.x(), n);
        };
        const std::string name = fmt("crossentropy_backward rows=%d V=%d eps=%.1f scale=%.3g",
                                     c.rows, c.V, c.eps, c.scale);
        Vec got = run(be);
        DVec z64 = D(z);
        auto loss = [&] {
            double s = 0;
            for (int r = 0; r < c.rows; r++)
                if (labels[r] != PAD_ID) s += ref_ce_row(&z64[(size_t)r * c.V], c.V, labels[r], c.eps);
            return c.scale * s;
        };
        grad_vs_fd(name + " dlogits", z64, loss, got, nullptr);
        Vec pad_got, pad_want;
        for (int r = 0; r < c.rows; r++)
            if (labels[r] == PAD_ID)
                for (int k = 0; k < c.V; k++) {
                    pad_got.push_back(got[(size_t)r * c.V + k]);
                    pad_want.push_back(0.0f);
                }
        if (!pad_want.empty()) same(name + " PAD rows = 0", pad_got, pad_want);
        if (cpu) vs_cpu(name, got, run(*cpu), TOL.cross_bwd);
    }
}

// crossentropy_forward_backward (training's, one pass on the GPU): bit for bit what the same
// backend's forward then backward give (lse, the loss added, dlogits), so the checks above hold
// for it; against the CPU's too.
void test_crossentropy_forward_backward(Backend& be, Backend* cpu) {
    struct Case { int rows, V; float eps, scale; };
    const Case cases[] = {{1, 7, 0.0f, 1.0f}, {5, 50, 0.1f, 1.0f / 3}, {4, 1000, 0.0f, 1.0f / 7},
                          {3, 8003, 0.1f, 0.5f}, {3, 37000, 0.1f, 0.25f}};
    for (const Case& c : cases) {
        const size_t n = (size_t)c.rows * c.V;
        const Vec z = rand_x(be, n, -4, 4);
        const IVec labels = ce_labels(c.rows, c.V);
        struct Out { double sum; Vec lse, dz; };
        auto run = [&](Backend& b, bool fused) {
            Mem zm = put_x(b, z), lm = put_i(b, labels), lse(b, c.rows * 4);
            Mem loss = put(b, std::vector<double>{1.25});
            if (fused) {
                b.crossentropy_forward_backward(lse.f(), (double*)loss.get(), zm.x(), lm.i(), c.rows, c.V, c.eps,
                                                c.scale);
            } else {
                b.crossentropy_forward(lse.f(), (double*)loss.get(), zm.x(), lm.i(), c.rows, c.V, c.eps);
                b.crossentropy_backward(zm.x(), lse.f(), lm.i(), c.rows, c.V, c.eps, c.scale);
            }
            return Out{get<double>(b, loss.get(), 1)[0], get_f(b, lse.f(), c.rows), get_x(b, zm.x(), n)};
        };
        const std::string name = fmt("crossentropy_forward_backward rows=%d V=%d eps=%.1f", c.rows, c.V, c.eps);
        const Out got = run(be, true), two = run(be, false);
        check(got.sum == two.sum, "%-52s %.17g vs %.17g", (name + " loss = forward's").c_str(), got.sum, two.sum);
        same(name + " lse = forward's", got.lse, two.lse);
        same(name + " dlogits = backward's", got.dz, two.dz);
        if (cpu) {
            const Out ref = run(*cpu, true);
            close_scalar(name + " loss vs CPU", got.sum, ref.sum, TOL.cross_fwd);
            vs_cpu(name + " dlogits", got.dz, ref.dz, TOL.cross_bwd);
        }
    }
}

// Per row of logits (row stride ld): the k best tokens, best first, ties to the lowest id,
// z - logsumexp(z); `banned` counts as -inf (in the sum too); past V: token -1, -inf. float64.
void ref_topk(const Vec& logits, int rows, int V, int ld, int k, int banned, IVec* tok, DVec* logp) {
    tok->assign((size_t)rows * k, -1);
    logp->assign((size_t)rows * k, -INFINITY);
    for (int r = 0; r < rows; r++) {
        DVec z(logits.begin() + (size_t)r * ld, logits.begin() + (size_t)r * ld + V);
        if (banned >= 0) z[banned] = -INFINITY;
        double mx = -INFINITY, sum = 0;
        for (double v : z) mx = std::max(mx, v);
        for (double v : z) sum += std::exp(v - mx);
        const double lse = mx + std::log(sum);
        IVec ids(V);
        std::iota(ids.begin(), ids.end(), 0);
        std::stable_sort(ids.begin(), ids.end(), [&](int a, int b) { return z[a] > z[b]; });
        for (int i = 0; i < k && i < V; i++) {
            (*tok)[(size_t)r * k + i] = ids[i];
            (*logp)[(size_t)r * k + i] = z[ids[i]] - lse;
        }
    }
}

void test_logsoftmax_topk(Backend& be, Backend* cpu) {
    enum { RANDOM, TIES, BANNED_BEST, ALL_EQUAL };
    struct Case { const char* what; int rows, V, ld, k, banned, kind; };
    const Case cases[] = {
        {"random, ld > V", 3, 50, 53, 4, -1, RANDOM},
        {"integer logits: ties to the lowest id", 5, 1000, 1000, 8, -1, TIES},
        {"banned = each row's best", 4, 1000, 1010, 8, EOS_ID, BANNED_BEST},
        {"V < k: token -1 past V", 2, 3, 3, 5, -1, RANDOM},
        {"V < k with banned", 2, 3, 4, 5, 1, RANDOM},
        {"k = 1 (greedy)", 7, 7, 7, 1, -1, RANDOM},
        {"all equal, banned", 2, 50, 50, 6, 2, ALL_EQUAL},
        {"V = 5000, ld > V", 2, 5000, 5003, 8, -1, RANDOM},
        {"integer logits, k = 64 (the GPU's largest)", 3, 3000, 3000, 64, -1, TIES},
        // 8,000 (the default model's vocabulary): at 37,000 the CPU op's float sum of
        // exponentials, unvectorised at -O1 (make test-asan), is only 1.5e-5 accurate
        {"integer logits, k = 16 of 8,000, banned", 2, 8000, 8000, 16, EOS_ID, TIES},
    };
    for (const Case& c : cases) {
        Vec z((size_t)c.rows * c.ld);
        for (int r = 0; r < c.rows; r++)
            for (int j = 0; j < c.ld; j++) {
                float v = j >= c.V ? 100.0f   // past V in the row stride: must not be read
                          : c.kind == TIES ? (float)randint(4)
                          : c.kind == ALL_EQUAL ? 0.5f
                          : uniform(-4, 4);
                if (c.kind == BANNED_BEST && j == c.banned) v = 10.0f;
                z[(size_t)r * c.ld + j] = held(be, v);
            }
        const size_t nk = (size_t)c.rows * c.k;
        struct Out { IVec tok; Vec logp; };
        auto run = [&](Backend& b) {
            Mem zm = put_x(b, z), tok(b, nk * sizeof(int)), lp(b, nk * sizeof(float));
            b.logsoftmax_topk(tok.i(), lp.f(), zm.x(), c.rows, c.V, c.ld, c.k, c.banned);
            return Out{get_i(b, tok.i(), nk), get_f(b, lp.f(), nk)};
        };
        IVec tok;
        DVec logp;
        ref_topk(z, c.rows, c.V, c.ld, c.k, c.banned, &tok, &logp);
        // An entry whose log-probability is -inf (past V, or the banned token when fewer than
        // k others exist) may name -1 or the banned token: compared as -1.
        auto tokens = [&](IVec t, const Vec& lp) {
            for (size_t i = 0; i < nk; i++)
                if (std::isinf(lp[i]) && (t[i] == c.banned || t[i] == -1)) t[i] = -1;
            return t;
        };
        const Vec ref_logp(logp.begin(), logp.end());
        // The finite log-probabilities within the tolerance, the -inf ones exactly.
        auto compare_logp = [&](const std::string& what, const Vec& got, const Vec& want,
                                double tol) {
            Vec g, w;
            size_t inf_bad = 0, n_inf = 0;
            for (size_t i = 0; i < nk; i++) {
                if (std::isinf(want[i])) {
                    n_inf++;
                    inf_bad += !(std::isinf(got[i]) && got[i] < 0);
                } else {
                    g.push_back(got[i]);
                    w.push_back(want[i]);
                }
            }
            close(what + " logp", g, w, tol);
            if (n_inf)
                check(inf_bad == 0, "%-52s %zu entries -inf, %zu are not",
                      (what + " logp -inf").c_str(), n_inf, inf_bad);
        };
        const std::string name = fmt("logsoftmax_topk %s rows=%d V=%d ld=%d k=%d banned=%d", c.what,
                                     c.rows, c.V, c.ld, c.k, c.banned);
        Out got = run(be);
        same(name + " tokens", tokens(got.tok, got.logp), tokens(tok, ref_logp));
        compare_logp(name + " vs float64", got.logp, ref_logp, TOL.fwd);
        if (cpu) {
            Out ref = run(*cpu);
            same(name + " tokens vs CPU", tokens(got.tok, got.logp), tokens(ref.tok, ref.logp));
            compare_logp(name + " vs CPU", got.logp, ref.logp, TOL.cross_fwd);
        }
    }
    // Rows of -inf logits with a banned token (every candidate tied at -inf): the k lowest ids but
    // the banned one, on every backend, compared as they are (the GPU's had named the banned
    // token, the CPU's never does; the log-probabilities are NaN on both: no sum to divide by).
    {
        const int rows = 2, V = 50, k = 4;
        const Vec z((size_t)rows * V, -INFINITY);
        const IVec want = {0, 1, 2, 4, 0, 1, 2, 4};   // EOS_ID (3) banned
        for (Backend* b : {&be, cpu}) {
            if (!b) continue;
            Mem zm = put_x(*b, z), tok(*b, rows * k * sizeof(int)), lp(*b, rows * k * sizeof(float));
            b->logsoftmax_topk(tok.i(), lp.f(), zm.x(), rows, V, V, k, EOS_ID);
            same(b == cpu ? "logsoftmax_topk rows of -inf, EOS banned: not among the k (the CPU)"
                          : "logsoftmax_topk rows of -inf, EOS banned: not among the k",
                 get_i(*b, tok.i(), rows * k), want);
        }
    }
}

// logp (rows) = z[tokens[r]] - logsumexp(z), 0 for PAD_ID. float64.
DVec ref_gather(const Vec& logits, const IVec& tokens, int rows, int V, int ld) {
    DVec out(rows, 0.0);
    for (int r = 0; r < rows; r++) {
        if (tokens[r] == PAD_ID) continue;
        const float* z = logits.data() + (size_t)r * ld;
        double mx = -INFINITY, sum = 0;
        for (int i = 0; i < V; i++) mx = std::max(mx, (double)z[i]);
        for (int i = 0; i < V; i++) sum += std::exp(z[i] - mx);
        out[r] = z[tokens[r]] - (mx + std::log(sum));
    }
    return out;
}

void test_logsoftmax_gather(Backend& be, Backend* cpu) {
    struct Case { int rows, V, ld; };
    for (const Case& c : {Case{5, 50, 50}, Case{9, 1000, 1003}, Case{3, 8000, 8000}}) {
        Vec z = rand_x(be, (size_t)c.rows * c.ld, -6, 6);
        IVec tokens = rand_tokens(c.rows, c.V);
        tokens[1] = PAD_ID;   // gives 0
        auto run = [&](Backend& b) {
            Mem zm = put_x(b, z), tm = put_i(b, tokens), out(b, c.rows * sizeof(float));
            b.logsoftmax_gather(out.f(), zm.x(), tm.i(), c.rows, c.V, c.ld);
            return get_f(b, out.f(), c.rows);
        };
        const std::string name = fmt("logsoftmax_gather rows=%d V=%d ld=%d (a PAD row)", c.rows, c.V, c.ld);
        Vec got = run(be);
        close(name + " vs float64", got, ref_gather(z, tokens, c.rows, c.V, c.ld), TOL.fwd);
        check(got[1] == 0.0f, "%-52s %g", (name + ": the PAD row is 0").c_str(), got[1]);
        if (cpu) close(name + " vs CPU", got, run(*cpu), TOL.cross_fwd);
    }
}

// Ensembles: out (rows, V) = log((1/K) sum_k softmax(z_k)) per row, float64.
DVec ref_ensemble(const std::vector<Vec>& z, int rows, int V, int ld) {
    const int K = (int)z.size();
    DVec out((size_t)rows * V);
    for (int r = 0; r < rows; r++) {
        DVec lse(K);
        for (int k = 0; k < K; k++) {
            const float* zk = z[k].data() + (size_t)r * ld;
            double mx = -INFINITY, sum = 0;
            for (int i = 0; i < V; i++) mx = std::max(mx, (double)zk[i]);
            for (int i = 0; i < V; i++) sum += std::exp(zk[i] - mx);
            lse[k] = mx + std::log(sum);
        }
        for (int i = 0; i < V; i++) {
            double p = 0;
            for (int k = 0; k < K; k++) p += std::exp(z[k][(size_t)r * ld + i] - lse[k]);
            out[(size_t)r * V + i] = std::log(p / K);
        }
    }
    return out;
}

// Members that agree, members that disagree (a token far ahead in one member only: the mean
// puts it near log(1/K)), every member count up to the limit, rows with padding, in place.
void test_logsoftmax_ensemble(Backend& be, Backend* cpu) {
    struct Case { int K, rows, V, ld; bool in_place; };
    for (const Case& c : {Case{1, 3, 50, 50, false}, Case{2, 5, 1000, 1003, true}, Case{3, 4, 8000, 8000, false},
                          Case{Backend::kMaxEnsemble, 2, 37, 40, true}}) {
        std::vector<Vec> z;
        for (int k = 0; k < c.K; k++) z.push_back(rand_x(be, (size_t)c.rows * c.ld, -8, 8));
        z[0][7] = held(be, 40.0f);   // row 0, token 7: member 0 alone is sure of it
        auto run = [&](Backend& b) {
            std::vector<Mem> zm;
            std::vector<const floatX*> p;
            for (const Vec& v : z) zm.push_back(put_x(b, v));
            for (const Mem& m : zm) p.push_back(m.x());
            Mem separate = c.in_place ? Mem() : Mem(b, (size_t)c.rows * c.ld * b.floatx_size());
            floatX* out = c.in_place ? zm[0].x() : separate.x();
            b.logsoftmax_ensemble(out, p.data(), c.K, c.rows, c.V, c.ld);
            const Vec all = get_x(b, out, (size_t)c.rows * c.ld);
            Vec v;
            for (int r = 0; r < c.rows; r++) v.insert(v.end(), all.begin() + (size_t)r * c.ld, all.begin() + (size_t)r * c.ld + c.V);
            return v;
        };
        const std::string name = fmt("logsoftmax_ensemble K=%d rows=%d V=%d ld=%d%s", c.K, c.rows, c.V, c.ld,
                                     c.in_place ? " in place" : "");
        const Vec got = run(be);
        const DVec want = ref_ensemble(z, c.rows, c.V, c.ld);
        close(name + " vs float64", got, Vec(want.begin(), want.end()), TOL.fwd);
        const double floor = -std::log((double)c.K) * (1 + TOL.fwd) - 1e-6;   // it keeps 1/K of the mass
        check(got[7] >= floor && got[7] <= 1e-6, "%-52s %.6f in [log 1/K, 0] = [%.6f, 0]",
              (name + ": the sure token").c_str(), got[7], -std::log((double)c.K));
        if (cpu) close(name + " vs CPU", got, run(*cpu), TOL.cross_fwd);
    }
    // Members that are one model: the mean is that model's log-softmax.
    Vec z = rand_x(be, 3 * 500, -6, 6);
    Mem zm = put_x(be, z), out(be, z.size() * be.floatx_size());
    const floatX* same[3] = {zm.x(), zm.x(), zm.x()};
    be.logsoftmax_ensemble(out.x(), same, 3, 3, 500, 500);
    const DVec want = ref_ensemble({z}, 3, 500, 500);
    close("logsoftmax_ensemble of one model thrice = its log-softmax", get_x(be, out.x(), z.size()),
          Vec(want.begin(), want.end()), TOL.fwd);
}

// A batch of no rows: the gradients that accumulate (+=) keep their values, bit for bit, and
// nothing runs (the GPU's column sums over 0 chunks of rows launch no empty grid). d = 2048 is
// past the fused LayerNorm backward's registers: its two-pass kernels and column sums.
void test_zero_rows(Backend& be, Backend*) {
    for (int d : {67, 2048}) {
        const Vec g0 = rand_f(d), b0 = rand_f(d), ones(d, 1.0f);
        Mem dg = put_f(be, g0), db = put_f(be, b0), g = put_x(be, ones), none(be, 64);
        be.layernorm_backward(none.x(), 0.0f, dg.f(), db.f(), none.x(), none.x(), none.f(), none.f(), g.x(), 0, d);
        same(fmt("layernorm_backward rows=0 d=%d: dg unchanged", d), get_f(be, dg.f(), d), g0);
        same(fmt("layernorm_backward rows=0 d=%d: db unchanged", d), get_f(be, db.f(), d), b0);
        be.relu_backward(none.x(), db.f(), none.x(), none.x(), 0, d);
        same(fmt("relu_backward rows=0 cols=%d: db unchanged", d), get_f(be, db.f(), d), b0);
    }
}

// The sampling op's contract (transformer.h), in float64: the threshold is the largest value
// of z whose kept set {z >= it} has >= topk tokens and >= topp of the tempered mass; the
// draw walks the kept tokens in id order to cumulative weight > u * kept total; a row that
// keeps none (its logits NaN) gets EOS_ID.
void ref_sample(const Vec& logits, const Vec& u, int rows, int V, int ld, double temperature, int topk,
                double topp, IVec* tokens, DVec* logp) {
    tokens->assign(rows, -1);
    logp->assign(rows, 0.0);
    for (int r = 0; r < rows; r++) {
        const float* z = logits.data() + (size_t)r * ld;
        double mx = -INFINITY, sum = 0, total = 0;
        for (int i = 0; i < V; i++) mx = std::max(mx, (double)z[i]);
        DVec w(V);
        for (int i = 0; i < V; i++) total += w[i] = std::exp((z[i] - mx) / temperature), sum += std::exp(z[i] - mx);
        Vec values(z, z + V);
        std::sort(values.begin(), values.end(), std::greater<float>());
        double tau = values[V - 1];   // neither cut asked: every token
        for (float v : values) {
            if (topk <= 0 && topp >= 1) break;   // descending: the first value that passes is the largest
            int count = 0;
            double mass = 0;
            for (int i = 0; i < V; i++)
                if (z[i] >= v) count++, mass += w[i];
            if ((topk <= 0 || count >= topk) && (topp >= 1 || mass >= topp * total)) { tau = v; break; }
        }
        double kept = 0, acc = 0;
        for (int i = 0; i < V; i++)
            if (z[i] >= tau) kept += w[i];
        for (int i = 0; i < V && (*tokens)[r] < 0; i++)
            if (z[i] >= tau && (acc += w[i]) > u[r] * kept) (*tokens)[r] = i;
        if ((*tokens)[r] < 0) (*tokens)[r] = EOS_ID;   // no token kept: a row of NaN
        (*logp)[r] = z[(*tokens)[r]] - (mx + std::log(sum));
    }
}

void test_logsoftmax_sample(Backend& be, Backend* cpu) {
    struct Case { const char* what; int rows, V, ld; float temperature; int topk; float topp; bool ties; };
    const Case cases[] = {
        {"top-k 1 (the argmax)", 16, 300, 300, 1.0f, 1, 1.0f, false},
        {"top-k 5", 64, 300, 307, 1.0f, 5, 1.0f, false},
        {"top-k 5, integer logits (ties kept)", 32, 200, 200, 1.0f, 5, 1.0f, true},
        {"top-k 3, temperature 0.5", 32, 100, 100, 0.5f, 3, 1.0f, false},
        {"top-k >= V (all kept)", 16, 20, 20, 1.0f, 50, 1.0f, false},
        {"top-p 0.5", 64, 300, 300, 1.0f, 0, 0.5f, false},
        {"top-p 0.9, temperature 2", 64, 1000, 1001, 2.0f, 0, 0.9f, false},
        {"top-p 1 (all kept), temperature 0.7", 32, 300, 300, 0.7f, 0, 1.0f, false},
        {"top-k 10 and top-p 0.6", 32, 300, 300, 1.0f, 10, 0.6f, false},
    };
    for (const Case& c : cases) {
        Vec z((size_t)c.rows * c.ld);
        for (size_t i = 0; i < z.size(); i++) z[i] = held(be, c.ties ? (float)randint(6) : uniform(-3, 3));
        Vec u = rand_f(c.rows, 0.0f, 1.0f);
        auto run = [&](Backend& b, IVec* tok) {
            Mem zm = put_x(b, z), um = put_f(b, u), tm(b, c.rows * sizeof(int));
            b.logsoftmax_sample(tm.i(), um.f(), um.f(), zm.x(), c.rows, c.V, c.ld, c.temperature, c.topk, c.topp);
            *tok = get_i(b, tm.i(), c.rows);
            return get_f(b, um.f(), c.rows);   // logp wrote over the uniforms
        };
        const std::string name = fmt("logsoftmax_sample %s rows=%d V=%d", c.what, c.rows, c.V);
        IVec want_tok, got_tok;
        DVec want_lp;
        ref_sample(z, u, c.rows, c.V, c.ld, c.temperature, c.topk, c.topp, &want_tok, &want_lp);
        Vec got_lp = run(be, &got_tok);
        same(name + " tokens vs float64", got_tok, want_tok);
        close(name + " logp vs float64", got_lp, want_lp, TOL.fwd);
        if (cpu) {
            IVec cpu_tok;
            Vec cpu_lp = run(*cpu, &cpu_tok);
            same(name + " tokens vs CPU", got_tok, cpu_tok);
            close(name + " logp vs CPU", got_lp, cpu_lp, TOL.cross_fwd);
        }
    }
    // Rows of NaN logits (a diverged model) keep no token: EOS_ID, never an id outside the
    // vocabulary; the finite rows beside them draw as the contract says.
    {
        const int rows = 4, V = 50;
        Vec z = rand_x(be, (size_t)rows * V, -3, 3), u = rand_f(rows, 0.0f, 1.0f);
        for (int r : {1, 3}) std::fill(z.begin() + (size_t)r * V, z.begin() + (size_t)(r + 1) * V, NAN);
        IVec want;
        DVec want_lp;
        ref_sample(z, u, rows, V, V, 1.0f, 5, 1.0f, &want, &want_lp);
        for (Backend* b : {&be, cpu}) {
            if (!b) continue;
            Mem zm = put_x(*b, z), um = put_f(*b, u), tm(*b, rows * sizeof(int));
            b->logsoftmax_sample(tm.i(), um.f(), um.f(), zm.x(), rows, V, V, 1.0f, 5, 1.0f);
            same(b == cpu ? "logsoftmax_sample rows of NaN: EOS_ID (the CPU)" : "logsoftmax_sample rows of NaN: EOS_ID",
                 get_i(*b, tm.i(), rows), want);
        }
    }
    // The draw follows the distribution: one row repeated with u = (i + 0.5) / N gives each
    // kept token about N * its tempered probability among the kept (within 1 + N * 1e-5).
    const int N = 4000, V = 12, topk = 4;
    const float temperature = 0.8f;
    Vec row = held(be, rand_f(V, -2, 2)), z, u(N);
    for (int i = 0; i < N; i++) z.insert(z.end(), row.begin(), row.end()), u[i] = (i + 0.5f) / N;
    Mem zm = put_x(be, z), um = put_f(be, u), tm(be, N * sizeof(int));
    be.logsoftmax_sample(tm.i(), um.f(), um.f(), zm.x(), N, V, V, temperature, topk, 1.0f);
    IVec tok = get_i(be, tm.i(), N);
    Vec sorted = row;
    std::sort(sorted.begin(), sorted.end(), std::greater<float>());
    double kept = 0, worst = 0;
    for (int j = 0; j < V; j++)
        if (row[j] >= sorted[topk - 1]) kept += std::exp((row[j] - sorted[0]) / temperature);
    for (int j = 0; j < V; j++) {
        const double p = row[j] >= sorted[topk - 1] ? std::exp((row[j] - sorted[0]) / temperature) / kept : 0.0;
        worst = std::max(worst, std::fabs(std::count(tok.begin(), tok.end(), j) - N * p));
    }
    check(worst <= 1.0 + N * 1e-5, "%-52s max |count - N p| = %.2f (<= 1)",
          "logsoftmax_sample: counts over a uniform grid of u", worst);
}

// =============================================================================================
// §5.3 Optimizer
// =============================================================================================
void test_global_norm(Backend& be, Backend* cpu) {
    for (size_t n : {(size_t)0, (size_t)1, (size_t)63, (size_t)1000, (size_t)(1 << 20) + 7}) {
        Vec g = rand_f(n);
        for (size_t i = 0; i < n; i++) g[i] *= i % 10 == 3 ? 1e3f : i % 7 == 2 ? 1e-3f : 1.0f;
        double want = 0;
        for (float v : g) want += (double)v * v;
        want = std::sqrt(want);
        auto run = [&](Backend& b, double* again) {
            Mem gm = put_f(b, g);
            const double a = b.global_norm(gm.f(), n);
            if (again) *again = b.global_norm(gm.f(), n);
            return a;
        };
        const std::string name = fmt("global_norm n=%zu", n);
        double again;
        const double got = run(be, &again);
        close_scalar(name + " vs float64", got, want, NORM_TOL);
        check(std::memcmp(&got, &again, sizeof got) == 0, "%-52s bitwise the same twice",
              (name + " deterministic").c_str());
        if (cpu) close_scalar(name + " vs CPU", got, run(*cpu, nullptr), NORM_TOL);
    }
    // ./train skips a step whose gradient norm is not finite: one NaN or Inf anywhere in the
    // buffer must make the norm NaN or Inf (a reduction that dropped it would let Adam apply it).
    const size_t n = (1 << 20) + 7;
    for (float bad : {NAN, INFINITY, -INFINITY})
        for (size_t at : {(size_t)0, n / 2 + 1, n - 1}) {
            Vec g = rand_f(n);
            g[at] = bad;
            Mem gm = put_f(be, g);
            const double got = be.global_norm(gm.f(), n);
            check(std::isnan(bad) ? std::isnan(got) : std::isinf(got), "%-52s %g",
                  fmt("global_norm with %g at %zu of %zu is not finite", bad, at, n).c_str(), got);
        }
}

// x *= s: one float product per element, bit for bit.
void test_scale(Backend& be, Backend* cpu) {
    const size_t sizes[] = {0, 1, 17, 1000, 65537};
    const float factors[] = {0.37f, -2.5f, 0.0f, 1e-3f, 0.999f};
    for (int k = 0; k < 5; k++) {
        const size_t n = sizes[k];
        const float s = factors[k];
        const Vec x = rand_f(n, -10, 10);
        auto run = [&](Backend& b) {
            Mem xm = put_f(b, x);
            b.scale(xm.f(), n, s);
            return get_f(b, xm.f(), n);
        };
        Vec want(n);
        for (size_t i = 0; i < n; i++) want[i] = x[i] * s;
        const std::string name = fmt("scale n=%zu s=%g", n, s);
        Vec got = run(be);
        same(name, got, want);
        if (cpu) same(name + " vs CPU", got, run(*cpu));
    }
}

// y += x: one float sum per element, bit for bit.
void test_add_inplace(Backend& be, Backend* cpu) {
    const size_t sizes[] = {0, 1, 17, 1000, 65537};
    for (size_t n : sizes) {
        const Vec y = rand_f(n, -10, 10), x = rand_f(n, -1e3, 1e3);
        auto run = [&](Backend& b) {
            Mem ym = put_f(b, y), xm = put_f(b, x);
            b.add_inplace(ym.f(), xm.f(), n);
            return get_f(b, ym.f(), n);
        };
        Vec want(n);
        for (size_t i = 0; i < n; i++) want[i] = y[i] + x[i];
        const std::string name = fmt("add_inplace n=%zu", n);
        Vec got = run(be);
        same(name, got, want);
        if (cpu) same(name + " vs CPU", got, run(*cpu));
    }
}

// PyTorch's Adam: m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
// p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps); w (when given) = p in floatX.
// Each call's reference starts from the state the backend holds (float64 from those floats);
// the step p' - p is compared, not p (p is much larger than its step).
void test_adam(Backend& be, Backend* cpu) {
    struct Case { size_t n; float lr, b1, b2, eps; int64_t steps[3]; bool w, warm; };
    const Case cases[] = {
        {1, 1e-2f, 0.9f, 0.98f, 1e-9f, {1, 2, 3}, false, false},
        {17, 1e-2f, 0.9f, 0.98f, 1e-9f, {1, 2, 3}, true, false},
        {1000, 5e-3f, 0.9f, 0.999f, 1e-8f, {1, 2, 1000}, true, false},
        {65537, 1e-3f, 0.9f, 0.98f, 1e-9f, {1000, 1001, 1002}, false, true},
        // eps near sqrt(v): where eps stands (PyTorch: outside the square root) shows
        {33, 1e-2f, 0.9f, 0.98f, 5e-2f, {1, 2, 3}, false, false},
    };
    for (const Case& c : cases) {
        const size_t n = c.n;
        Vec p = rand_f(n, -0.01f, 0.01f), m(n, 0.0f), v(n, 0.0f);
        if (c.warm)
            for (size_t i = 0; i < n; i++) {
                m[i] = uniform(-0.01f, 0.01f);
                v[i] = m[i] * m[i] + uniform(1e-6f, 1e-4f);
            }
        for (int64_t step : c.steps) {
            Vec g = rand_f(n, -0.1f, 0.1f);
            for (size_t i = 0; i < n; i += 9) g[i] = 0.0f;
            struct Out { Vec p, m, v, w; };
            auto run = [&](Backend& b) {
                Mem pm = put_f(b, p), gm = put_f(b, g), mm = put_f(b, m), vm = put_f(b, v);
                Mem w(b, n * b.floatx_size());
                b.adam_step(pm.f(), gm.f(), mm.f(), vm.f(), c.w ? w.x() : nullptr, n, c.lr, c.b1,
                            c.b2, c.eps, step);
                return Out{get_f(b, pm.f(), n), get_f(b, mm.f(), n), get_f(b, vm.f(), n),
                           c.w ? get_x(b, w.x(), n) : Vec()};
            };
            DVec dp(n), m1(n), v1(n);
            const double b1 = c.b1, b2 = c.b2, lr = c.lr, eps = c.eps;
            for (size_t i = 0; i < n; i++) {
                m1[i] = b1 * m[i] + (1 - b1) * g[i];
                v1[i] = b2 * v[i] + (1 - b2) * (double)g[i] * g[i];
                dp[i] = -lr / (1 - std::pow(b1, (double)step)) * m1[i] /
                        (std::sqrt(v1[i]) / std::sqrt(1 - std::pow(b2, (double)step)) + eps);
            }
            auto step_of = [&](const Vec& p1) {
                Vec d(n);
                for (size_t i = 0; i < n; i++) d[i] = (float)((double)p1[i] - p[i]);
                return d;
            };
            const std::string name = fmt("adam_step n=%zu step=%lld lr=%g b2=%g eps=%g%s", n,
                                         (long long)step, c.lr, c.b2, c.eps, c.w ? " +w" : "");
            Out got = run(be);
            close(name + " p'-p vs float64", step_of(got.p), dp, ADAM_TOL);
            close(name + " m vs float64", got.m, m1, ADAM_TOL);
            close(name + " v vs float64", got.v, v1, ADAM_TOL);
            if (c.w) same(name + " w = p' in floatX", got.w, held(be, got.p));
            if (cpu) {
                Out ref = run(*cpu);
                vs_cpu(name + " p'-p", step_of(got.p), step_of(ref.p), ADAM_TOL);
                vs_cpu(name + " m", got.m, ref.m, ADAM_TOL);
                vs_cpu(name + " v", got.v, ref.v, ADAM_TOL);
            }
            p = got.p, m = got.m, v = got.v;   // the next step starts from the backend's state
        }
    }
}

// =============================================================================================
// The driver
// =============================================================================================
// =============================================================================================
// §6.1 Machine Translation: beam search's bookkeeping on the device (search_select)
// =============================================================================================
// A plain host search with the rules of toolkit/decode.h (vectors of hypotheses, std::sort,
// std::upper_bound), the reference the op is driven against step by step.
struct RefHyp { IVec tokens; float logprob = 0; int parent = -1; };   // parent: its row at the last step
struct RefSentence {
    int max_len = 0, prefix = 0;
    std::vector<RefHyp> alive{RefHyp{}};
    std::vector<RefHyp> finished;   // best first by score, equal scores in finishing order
    std::vector<float> scores;
    bool done = false;
};
struct SearchCase { const char* name; int B, beam, nbest, V, max_len_hi, prefix_hi; uint64_t seed; };

void ref_finish(RefSentence* s, const RefHyp& h, const std::vector<float>& lp) {
    const float score = h.logprob / lp[h.tokens.size()];
    const size_t pos = std::upper_bound(s->scores.begin(), s->scores.end(), score, std::greater<float>()) - s->scores.begin();
    s->scores.insert(s->scores.begin() + pos, score);
    s->finished.insert(s->finished.begin() + pos, h);
}

// One step for sentence s whose alive hypotheses are rows r0 ...; cand (n, kc) tokens, logp.
void ref_step(RefSentence* s, int r0, const IVec& tok, const Vec& lp_cand, int kc, int beam, int V, int t,
              int forced, float forced_logp, const std::vector<float>& lp) {
    const bool at_limit = t == s->max_len - 1;
    if (forced != PAD_ID || beam == 1) {
        RefHyp h = s->alive[0];
        h.parent = r0;
        const int w = forced != PAD_ID ? forced : tok[(size_t)r0 * kc];
        h.tokens.push_back(w);
        h.logprob += forced != PAD_ID ? forced_logp : lp_cand[(size_t)r0 * kc];
        s->alive.clear();
        if (at_limit || (forced == PAD_ID && w == EOS_ID)) ref_finish(s, h, lp), s->done = true;
        else s->alive.push_back(h);
        return;
    }
    struct Cand { float score; long long key; int i, w; };
    std::vector<Cand> cands;
    for (int i = 0; i < (int)s->alive.size(); i++)
        for (int c = 0; c < kc && tok[(size_t)(r0 + i) * kc + c] >= 0; c++) {
            const size_t e = (size_t)(r0 + i) * kc + c;
            cands.push_back({s->alive[i].logprob + lp_cand[e], (long long)i * V + tok[e], i, tok[e]});
        }
    std::sort(cands.begin(), cands.end(), [](const Cand& a, const Cand& b) {
        return a.score != b.score ? a.score > b.score : a.key < b.key;
    });
    if ((int)cands.size() > 2 * beam) cands.resize(2 * beam);
    std::vector<RefHyp> next;
    for (const Cand& c : cands) {
        RefHyp h = s->alive[c.i];
        h.parent = r0 + c.i;
        h.tokens.push_back(c.w);
        h.logprob = c.score;
        if (c.w == EOS_ID) ref_finish(s, h, lp);
        else if ((int)next.size() < beam) next.push_back(h);
    }
    if (at_limit) {
        for (const RefHyp& h : next) ref_finish(s, h, lp);
        next.clear();
    }
    s->alive = next;
    s->done = next.empty() || (!s->finished.empty() && s->scores[0] >= next[0].logprob / lp[s->max_len]);
}

// A SearchState's arrays in backend memory (the test's own layout).
struct SearchMem {
    Mem max_len, lp, first_row, alive, alive_logp, next_n, next_token, next_parent, next_logp, fin_n,
        fin_score, fin_logp, fin_step, fin_row, fin_token, hist, count;
    SearchState st{};
    SearchMem(Backend& b, const SearchCase& c, const IVec& limits, const Vec& lps, int steps) {
        const size_t B = c.B, R = B * c.beam, Bk = R, Bn = B * c.nbest;
        IVec rows(B), ones(B, 1), step0(3 * R, -1);
        for (size_t s = 0; s < B; s++) rows[s] = (int)s, step0[s] = BOS_ID, step0[2 * R + s] = (int)s;
        max_len = put_i(b, limits), lp = put_f(b, lps), first_row = put_i(b, rows), alive = put_i(b, ones);
        alive_logp = put_f(b, Vec(Bk, 0.0f)), next_n = Mem(b, B * 4), next_token = Mem(b, Bk * 4);
        next_parent = Mem(b, Bk * 4), next_logp = Mem(b, Bk * 4), fin_n = put_i(b, IVec(B, 0));
        fin_score = Mem(b, Bn * 4), fin_logp = Mem(b, Bn * 4), fin_step = Mem(b, Bn * 4);
        fin_row = Mem(b, Bn * 4), fin_token = Mem(b, Bn * 4), count = Mem(b, 4);
        IVec h((size_t)(steps + 1) * 3 * R, -5);
        std::copy(step0.begin(), step0.end(), h.begin());
        hist = put_i(b, h);
        st = SearchState{c.B, (int)R, c.beam, c.nbest, c.beam == 1 ? 1 : 2 * c.beam, c.V, steps,
                         max_len.i(), lp.f(), first_row.i(), alive.i(), alive_logp.f(), next_n.i(),
                         next_token.i(), next_parent.i(), next_logp.f(), fin_n.i(), fin_score.f(),
                         fin_logp.f(), fin_step.i(), fin_row.i(), fin_token.i(), hist.i(), count.i()};
    }
};

// Random candidates of step t (n rows, kc each, best first): distinct tokens (-1 past V),
// log-probabilities on a grid of 1/4 so that equal scores (ties) are common; a function of
// (seed, t, row) only, so every backend sees the same ones.
void search_candidates(const SearchCase& c, int t, int n, int kc, IVec* tok, Vec* lp) {
    tok->assign((size_t)n * kc, -1);
    lp->assign((size_t)n * kc, -INFINITY);
    for (int r = 0; r < n; r++) {
        uint64_t s = splitmix64(c.seed ^ ((uint64_t)t << 32) ^ (uint64_t)r);
        IVec perm(c.V);
        std::iota(perm.begin(), perm.end(), 0);
        for (int i = c.V - 1; i > 0; i--) std::swap(perm[i], perm[splitmix64_next(&s) % (uint64_t)(i + 1)]);
        Vec v;
        for (int j = 0; j < std::min(kc, c.V); j++) v.push_back(-0.25f * (float)(splitmix64_next(&s) % 13));
        std::sort(v.begin(), v.end(), std::greater<float>());
        for (int j = 0; j < std::min(kc, c.V); j++) (*tok)[(size_t)r * kc + j] = perm[j], (*lp)[(size_t)r * kc + j] = v[j];
    }
}

// The whole search of a case through the op, checked against the reference at every step (the
// next row count, every row's token, parent and sentence); returns each sentence's kept
// finished hypotheses as (tokens, logprob, score) flattened, for the comparison with the CPU.
Vec run_search_case(Backend& b, const SearchCase& c, const std::string& name) {
    const int kc = c.beam == 1 ? 1 : 2 * c.beam;
    uint64_t s = c.seed;
    IVec limits(c.B);
    std::vector<RefSentence> ref(c.B);
    int steps = 1;
    for (int i = 0; i < c.B; i++) {
        limits[i] = 1 + (int)(splitmix64_next(&s) % (uint64_t)c.max_len_hi);
        ref[i].prefix = c.prefix_hi ? (int)(splitmix64_next(&s) % (uint64_t)(c.prefix_hi + 1)) : 0;
        limits[i] = std::max(limits[i], ref[i].prefix + 1);
        ref[i].max_len = limits[i];
        steps = std::max(steps, limits[i]);
    }
    Vec lps;
    for (int n = 0; n <= steps; n++) lps.push_back((float)std::pow((5.0 + n) / 6.0, 0.6));
    SearchMem sm(b, c, limits, lps, steps);
    Mem forced_m(b, (size_t)sm.st.R * 4), forced_lp_m(b, (size_t)sm.st.R * 4);
    size_t bad_rows = 0, bad_counts = 0, step_count = 0;
    for (int t = 0, n = c.B; n > 0; t++, step_count++) {
        IVec first(c.B, -1), sentence;
        for (int i = 0, r = 0; i < c.B; i++)
            if (!ref[i].done) first[i] = r, r += (int)ref[i].alive.size();
        IVec tok, forced(n, PAD_ID);
        Vec lp, forced_lp(n, 0.0f);
        search_candidates(c, t, n, kc, &tok, &lp);
        bool any_forced = false;
        for (int i = 0; i < c.B; i++)
            if (first[i] >= 0 && t < ref[i].prefix) {
                forced[first[i]] = 4 + (int)(splitmix64(c.seed + t * 31 + i) % (uint64_t)(c.V - 4));
                forced_lp[first[i]] = -0.5f * (float)(1 + i % 3), any_forced = true;
            }
        Mem tm = put_i(b, tok), lm = put_f(b, lp);
        b.upload(forced_m.get(), forced.data(), forced.size() * 4);
        b.upload(forced_lp_m.get(), forced_lp.data(), forced_lp.size() * 4);
        b.search_select(sm.st, tm.i(), lm.f(), any_forced ? forced_m.i() : nullptr, forced_lp_m.f(), n, t);
        const int next = get_i(b, sm.count.i(), 1)[0];
        for (int i = 0; i < c.B; i++)
            if (first[i] >= 0) ref_step(&ref[i], first[i], tok, lp, kc, c.beam, c.V, t, forced[first[i]], forced_lp[first[i]], lps);
        IVec want_token, want_parent, want_sentence;   // the rows of step t + 1, from the reference
        for (int i = 0; i < c.B; i++) {
            if (ref[i].done) continue;
            for (const RefHyp& h : ref[i].alive) {
                want_token.push_back(h.tokens.back());
                want_parent.push_back(h.parent);
                want_sentence.push_back(i);
            }
        }
        bad_counts += next != (int)want_token.size();
        const IVec h = get_i(b, sm.hist.i() + (size_t)(t + 1) * 3 * sm.st.R, 3 * (size_t)sm.st.R);
        for (size_t r = 0; r < want_token.size() && next == (int)want_token.size(); r++)
            bad_rows += h[r] != want_token[r] || h[sm.st.R + r] != want_parent[r] || h[2 * sm.st.R + r] != want_sentence[r];
        n = next;
        if (step_count > 200) break;
    }
    check(bad_counts == 0 && bad_rows == 0, "%-52s %zu steps: row counts differ at %zu steps, %zu rows differ",
          name.c_str(), step_count, bad_counts, bad_rows);
    // The finished hypotheses: tokens rebuilt by walking the history's parents.
    const IVec fin_n = get_i(b, sm.fin_n.i(), c.B);
    const size_t Bn = (size_t)c.B * c.nbest;
    const IVec fstep = get_i(b, sm.fin_step.i(), Bn), frow = get_i(b, sm.fin_row.i(), Bn), ftok = get_i(b, sm.fin_token.i(), Bn);
    const Vec fscore = get_f(b, sm.fin_score.f(), Bn), flogp = get_f(b, sm.fin_logp.f(), Bn);
    const IVec hist = get_i(b, sm.hist.i(), (size_t)(steps + 1) * 3 * sm.st.R);
    size_t bad = 0, compared = 0;
    Vec flat;
    for (int i = 0; i < c.B; i++) {
        const size_t keep = std::min<size_t>(c.nbest, ref[i].finished.size());
        bad += (size_t)fin_n[i] != keep;
        for (size_t j = 0; j < keep && (size_t)fin_n[i] == keep; j++, compared++) {
            const size_t f = (size_t)i * c.nbest + j;
            IVec tokens(fstep[f] + 1);
            tokens[fstep[f]] = ftok[f];
            for (int k = fstep[f], r = frow[f]; k >= 1; k--) {
                tokens[k - 1] = hist[(size_t)k * 3 * sm.st.R + r];
                r = hist[(size_t)k * 3 * sm.st.R + sm.st.R + r];
            }
            const RefHyp& w = ref[i].finished[j];
            bad += tokens != w.tokens || flogp[f] != w.logprob || fscore[f] != ref[i].scores[j];
            flat.push_back(flogp[f]), flat.push_back(fscore[f]);
            for (int x : tokens) flat.push_back((float)x);
        }
    }
    check(bad == 0 && compared > 0, "%-52s %zu finished hypotheses kept: tokens, log-probability and score bitwise, %zu differ",
          name.c_str(), compared, bad);
    return flat;
}

void test_search_select(Backend& be, Backend* cpu) {
    const SearchCase cases[] = {
        {"greedy", 7, 1, 1, 9, 7, 0, 11},
        {"greedy, target prefixes", 6, 1, 1, 12, 6, 3, 12},
        {"beam 4", 8, 4, 1, 9, 9, 0, 13},
        {"beam 3, n-best 3, V < 2k (no candidate)", 5, 3, 3, 5, 8, 0, 14},
        {"beam 4, n-best 2, target prefixes", 6, 4, 2, 10, 9, 2, 15},
        {"beam 5, n-best 5, 40 sentences", 40, 5, 5, 30, 14, 0, 16},
        {"beam 2, one sentence, length 1", 1, 2, 2, 6, 1, 0, 17},
        {"beam 2, 2500 sentences (the GPU lays out runs of 3)", 2500, 2, 1, 12, 6, 0, 18},
    };
    for (const SearchCase& c : cases) {
        const std::string name = fmt("search_select %s", c.name);
        const Vec got = run_search_case(be, c, name);
        if (cpu) same(name + " vs CPU", got, run_search_case(*cpu, c, name + " (CPU)"));
    }
}

struct OpTest {
    const char* section;   // printed before the first test of a section
    void (*run)(Backend& be, Backend* cpu);
};
const OpTest TESTS[] = {
    {"The device and its memory", test_memory},
    {nullptr, test_copy_rows},
    {nullptr, test_convert_weights},
    {"§3.4 Embeddings, §3.5 Positional Encoding", test_positional_table},
    {nullptr, test_embedding_forward},
    {nullptr, test_embedding_backward},
    {"Linear layers", test_linear_forward},
    {nullptr, test_linear_backward},
    {"§3.3 Position-wise Feed-Forward Networks: the fused linear + ReLU, the ReLU's backward", test_linear_relu_forward},
    {nullptr, test_relu},
    {"§5.4 Residual Dropout, §3.1 residual connection and LayerNorm", test_dropout},
    {nullptr, test_residual},
    {nullptr, test_layernorm_forward},
    {nullptr, test_layernorm_backward},
    {nullptr, test_residual_layernorm_forward},
    {nullptr, test_residual_layernorm_backward},
    {nullptr, test_zero_rows},
    {"§3.2.1 Scaled Dot-Product Attention, §3.2.2 Multi-Head Attention", test_attention_forward},
    {nullptr, test_attention_backward},
    {"§3.2.1 Scaled Dot-Product Attention: a padded sentence as alone", test_attention_padding},
    {"§3.2.3 Decoding: attention over cached keys/values", test_attention_step_self},
    {nullptr, test_attention_step_self_long},
    {nullptr, test_cache_reorder},
    {nullptr, test_attention_keys_transpose},
    {nullptr, test_attention_step_cross},
    {"§3.4 the loss, §5.4 Label Smoothing; decoding's top-k", test_crossentropy_forward},
    {nullptr, test_crossentropy_backward},
    {nullptr, test_crossentropy_forward_backward},
    {nullptr, test_logsoftmax_topk},
    {nullptr, test_logsoftmax_gather},
    {nullptr, test_logsoftmax_sample},
    {nullptr, test_logsoftmax_ensemble},
    {"§6.1 Machine Translation: beam search's bookkeeping", test_search_select},
    {"§5.3 Optimizer", test_global_norm},
    {nullptr, test_scale},
    {nullptr, test_add_inplace},
    {nullptr, test_adam},
};

}  // namespace

int main(int argc, char** argv) {
    std::string device = "cpu", precision = "fp32", section;
    bool against_cpu = false;
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        if (a == "--device" && i + 1 < argc) device = argv[++i];
        else if (a == "--precision" && i + 1 < argc) precision = argv[++i];
        else if (a == "--section" && i + 1 < argc) section = argv[++i];
        else if (a == "--against-cpu") against_cpu = true;
        else device = "?";
    }
    if ((device != "cpu" && device != "cuda" && device != "auto") ||
        (precision != "fp32" && precision != "bf16")) {
        std::fprintf(stderr, "usage: %s [--device cpu|cuda|auto] [--precision fp32|bf16] "
                             "[--against-cpu] [--section TEXT: only the sections whose title holds TEXT]\n", argv[0]);
        return 2;
    }
    std::string error;
    std::unique_ptr<Backend> be = make_backend(device, precision, &error);
    if (!be) {
        check_skip("test_ops on %s: %s", device.c_str(), error.c_str());
        return check_summary("ops");
    }
    TOL = be->precision() == Precision::BF16 ? BF16_TOL : FP32_TOL;   // the GPU's, or the CPU's bf16 products
    std::unique_ptr<Backend> cpu;
    if (be->device() != Device::CPU || against_cpu) cpu = make_cpu_backend();
    std::printf("test_ops on %s%s%s\n", be->describe().c_str(), cpu ? "; against " : "",
                cpu ? cpu->describe().c_str() : "");
    std::printf("tolerances (max|got-want| / max|want|): forward vs float64 %.0e, backward vs "
                "finite differences %.0e (at most %zu entries a tensor), against the CPU %.0e / %.0e, Adam %.0e, "
                "global_norm %.0e\n", TOL.fwd, TOL.bwd, FD_MAX, TOL.cross_fwd, TOL.cross_bwd, ADAM_TOL, NORM_TOL);
    bool wanted = false, any = false;
    for (const OpTest& t : TESTS) {
        if (t.section) wanted = std::string(t.section).find(section) != std::string::npos;
        if (!wanted) continue;
        if (t.section) std::printf("--- %s\n", t.section);
        t.run(*be, cpu.get());
        any = true;
    }
    if (!any) {
        std::fprintf(stderr, "%s: no section's title holds '%s'\n", argv[0], section.c_str());
        return 2;
    }
    return check_summary("ops");
}
