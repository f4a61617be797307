// test/test_train.cpp — the training run around the model: exact resume (N steps, stop,
// resume, N more == 2N steps, bitwise), a trainer killed while writing a checkpoint leaves
// the previous one intact, and checkpoint averaging (the element-wise mean; mismatched
// inputs refused). Fine-tuning (--init-from: the first loss and step replayed from the
// checkpoint with a fresh optimizer), Adam's betas and epsilon (the update against Adam's
// formula; kept by resume), and the best checkpoint surviving a resume. Uses small
// synthetic parallel corpora written to a temporary folder. --precision bf16 on the CPU (the
// linear layers' products on bf16 operands): its loss curve against fp32's over 200 steps, and
// resume bitwise (test/train_case.h, which test_cuda runs on the GPU).
//
//   make test   (or build/test_train, from the repository root)
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cpu/gemm_bf16.h"
#include "test/check.h"
#include "test/model_buffers.h"
#include "test/train_case.h"
#include "model/checkpoint.h"
#include "toolkit/parallel_data.h"
#include "toolkit/trainer.h"
#include "tokenizer.h"

namespace fs = std::filesystem;
static std::string g_tmp;

// A toy "translation": the target is the source's words reversed, with a suffix.
static void write_corpus(const std::string& dir, int pairs, uint64_t seed = 7, const char* split = "train") {
    fs::create_directories(dir);
    const char* words[] = {"alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta", "iota", "kappa"};
    FILE* en = std::fopen((dir + "/" + split + ".en").c_str(), "w");
    FILE* es = std::fopen((dir + "/" + split + ".es").c_str(), "w");
    uint64_t s = seed;
    for (int i = 0; i < pairs; i++) {
        std::vector<std::string> w(2 + i % 7);
        for (auto& x : w) { s = s * 6364136223846793005ull + 1442695040888963407ull; x = words[(s >> 33) % 10]; }
        for (size_t j = 0; j < w.size(); j++) std::fprintf(en, "%s%s", j ? " " : "", w[j].c_str());
        for (size_t j = w.size(); j-- > 0;) std::fprintf(es, "%so%s", j + 1 < w.size() ? " " : "", w[j].c_str());
        std::fprintf(en, "\n");
        std::fprintf(es, "\n");
    }
    std::fclose(en);
    std::fclose(es);
}

static TrainOptions small_run(const std::string& out, int64_t steps) {
    TrainOptions t;
    t.cfg.n_enc = t.cfg.n_dec = 2, t.cfg.d_model = 32, t.cfg.d_ff = 64, t.cfg.n_heads = 4;
    t.cfg.d_k = t.cfg.d_v = 8, t.cfg.max_len = 32, t.cfg.p_drop = 0.1f, t.cfg.p_attn_drop = 0.1f;
    t.data_dir = g_tmp + "/corpus";
    t.build_default_corpus = false;
    t.out_dir = out;
    t.vocab_size = 300;
    t.max_tokens = 200;
    t.accum = 2;
    t.warmup = 20;
    t.max_steps = steps;
    t.save_every_s = 0;
    t.save_every_steps = 5;
    t.keep = 10;
    t.eval_every_steps = 0;
    t.final_eval = false;
    t.quiet = true;
    return t;
}

// t continued as ./train --resume --max-steps N continues a run: the budget given again (without
// it, the checkpoint's: the run's own --max-steps, already reached).
static TrainOptions resumed(TrainOptions t) {
    t.resume = true;
    t.given.push_back("--max-steps");
    return t;
}

static bool load(const std::string& path, Model* m) {
    std::string err;
    bool ok = checkpoint_load(m, path, nullptr, &err);
    if (!ok) std::printf("  %s\n", err.c_str());
    return ok;
}


static void resume_is_exact() {
    const std::string a = g_tmp + "/straight", b = g_tmp + "/resumed";
    check(run_training(small_run(a, 30)) == 0, "train 30 steps straight through");
    check(run_training(small_run(b, 15)) == 0, "train 15 steps");
    check(run_training(resumed(small_run(b, 30))) == 0, "resume and train to step 30");
    Model ma, mb;
    if (!load(a + "/ckpt-00000030.safetensors", &ma) || !load(b + "/ckpt-00000030.safetensors", &mb)) {
        check(false, "step-30 checkpoints exist");
        return;
    }
    check(same_bits(host_params(ma), host_params(mb)) && same_bits(host_adam(ma), host_adam(mb)),
          "15 steps + resume + 15 steps == 30 steps: parameters and Adam state bitwise equal (%zu floats)",
          ma.layout.total);
    Model m15;
    load(b + "/ckpt-00000015.safetensors", &m15);
    check(!same_bits(host_params(m15), host_params(mb)), "the resumed run did train (step 15 != step 30)");
    TrainOptions again = small_run(b, 40);
    check(run_training(again) != 0, "refuses to start over in a folder holding checkpoints without --resume");
}

// The ops give the same bits for any thread count, so a run does not depend on the threads
// toolkit/thread_governor.h gives it: 8 steps (with dropout) on 1 thread and on 2, bitwise the
// same parameters and Adam state. The model is wide enough that the products split over threads.
// Each run is on a fresh thread with its governor off (a governor is per thread), so that it
// keeps the count it was given on a busy machine too (make test runs two suites at a time); a
// fresh thread's count is OpenMP's own, not what this thread's governor lowered it to.
static void thread_count_invariance() {
#ifdef _OPENMP
    int fresh = 0;
    std::thread([&] { fresh = omp_get_max_threads(); }).join();
    if (fresh < 2) {
        check_skip("training with 1 and 2 threads: this machine gives OpenMP 1 thread");
        return;
    }
    const char* given = std::getenv("TRANSFORMER_THREADS_GOVERNOR");
    const std::string saved = given ? given : "";
    setenv("TRANSFORMER_THREADS_GOVERNOR", "0", 1);
    Model m[2];
    int ran_with[2] = {0, 0};
    for (int threads : {1, 2}) {
        TrainOptions t = small_run(g_tmp + "/threads" + std::to_string(threads), 8);
        t.cfg.d_model = 128, t.cfg.d_ff = 512, t.cfg.d_k = t.cfg.d_v = 32, t.max_tokens = 600;
        int status = -1;
        std::thread([&] {
            omp_set_num_threads(threads);
            status = run_training(t);
            ran_with[threads - 1] = omp_get_max_threads();
        }).join();
        check(status == 0 && ran_with[threads - 1] == threads, "train 8 steps with %d OpenMP thread%s (%d at the end)",
              threads, threads > 1 ? "s" : "", ran_with[threads - 1]);
        load(t.out_dir + "/ckpt-00000008.safetensors", &m[threads - 1]);
    }
    if (given) setenv("TRANSFORMER_THREADS_GOVERNOR", saved.c_str(), 1);
    else unsetenv("TRANSFORMER_THREADS_GOVERNOR");
    check(m[0].layout.total > 0 && same_bits(host_params(m[0]), host_params(m[1])) &&
              same_bits(host_adam(m[0]), host_adam(m[1])),
          "1 thread == 2 threads: parameters and Adam state bitwise equal after 8 steps (%zu floats)", m[0].layout.total);
#else
    check_skip("training with 1 and 2 threads: this build has no OpenMP");
#endif
}

// A child process saves checkpoints of a 16M-parameter model to one path in a loop; it is
// killed at various moments. The file under the final name must always load.
static void kill_during_write() {
    Config c;
    c.n_enc = c.n_dec = 2, c.d_model = 512, c.d_ff = 2048, c.n_heads = 8, c.d_k = c.d_v = 64, c.vocab = 8000;
    Model m;
    model_init(&m, c, 1);
    const std::string path = g_tmp + "/kill.safetensors";
    std::string err;
    checkpoint_save(m, path, {}, true, &err);   // the "previous" checkpoint
    int intact = 0, trials = 5;
    for (int t = 0; t < trials; t++) {
        pid_t pid = fork();
        if (pid == 0) {
            for (int i = 0;; i++) {
                m.step = i;
                checkpoint_save(m, path, {}, true, &err);
            }
        }
        // mid-write at different points: 1 to 29 ms after the child's temporary file appeared
        // (waiting for it, rather than a fixed delay from the fork, holds on a loaded machine)
        const std::string tmp = path + ".tmp." + std::to_string(pid);
        for (int i = 0; i < 20000 && !fs::exists(tmp); i++) usleep(500);
        usleep(1000 + 7000 * t);
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
        Model back;
        intact += checkpoint_load(&back, path, nullptr, &err) && same_bits(host_params(back), host_params(m));
    }
    int partial = 0;   // half-written temporary files: evidence that kills landed mid-write
    for (const auto& e : fs::directory_iterator(g_tmp))
        if (e.path().filename().string().rfind("kill.safetensors.tmp.", 0) == 0) {
            partial++;
            fs::remove(e.path());
        }
    check(partial > 0, "%d of %d kills interrupted a write (left a partial temporary file)", partial, trials);
    check(intact == trials, "writer killed %d times: the checkpoint under the final name loads intact %d times", trials, intact);
}

static void averaging() {
    Config c;
    c.n_enc = c.n_dec = 1, c.d_model = 16, c.d_ff = 32, c.n_heads = 2, c.d_k = c.d_v = 8, c.vocab = 50;
    std::vector<Model> ms(3);
    std::vector<std::string> paths;
    std::string err;
    for (int i = 0; i < 3; i++) {
        model_init(&ms[i], c, 100 + i);
        ms[i].step = 1000 * (i + 1);
        paths.push_back(g_tmp + "/avg" + std::to_string(i) + ".safetensors");
        checkpoint_save(ms[i], paths.back(), {{"tokenizer", "same"}}, true, &err);
    }
    const std::string out = g_tmp + "/avg.safetensors";
    check(average_checkpoints(paths, out, &err), "average 3 checkpoints (%s)", err.c_str());
    Model avg;
    if (load(out, &avg)) {
        std::vector<float> p0 = host_params(ms[0]), p1 = host_params(ms[1]), p2 = host_params(ms[2]);
        std::vector<float> want(avg.layout.total);
        for (size_t j = 0; j < want.size(); j++)
            want[j] = (float)(((double)p0[j] + p1[j] + p2[j]) / 3.0);
        check(same_bits(host_params(avg), want), "average equals the element-wise mean (bitwise, %zu floats)", want.size());
        check(avg.step == 3000, "the average carries the newest input's step, 3000 (%lld)", (long long)avg.step);
    }
    // given newest first (./average ckpt-3000 ckpt-1000 ckpt-2000): still the newest's step
    Model reordered;
    const bool reloaded = average_checkpoints({paths[2], paths[0], paths[1]}, out, &err) && load(out, &reordered);
    check(reloaded && reordered.step == 3000, "inputs newest first: the average carries the newest input's step, 3000 (%lld)",
          (long long)reordered.step);
    Model other;
    Config c2 = c;
    c2.d_ff = 48;
    model_init(&other, c2, 1);
    checkpoint_save(other, g_tmp + "/other.safetensors", {{"tokenizer", "same"}}, true, &err);
    bool ok = average_checkpoints({paths[0], g_tmp + "/other.safetensors"}, out, &err);
    check(!ok && err.find("d_ff: 32 vs 48") != std::string::npos, "refuses another config: \"%s\"", err.c_str());
    checkpoint_save(ms[1], g_tmp + "/tok.safetensors", {{"tokenizer", "different"}}, true, &err);
    ok = average_checkpoints({paths[0], g_tmp + "/tok.safetensors"}, out, &err);
    check(!ok && err.find("tokenizer differs") != std::string::npos, "refuses another tokenizer: \"%s\"", err.c_str());
}

// ---- replaying the trainer's next step from a checkpoint, independently of the trainer ----

static std::string read_bytes(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// Runs the trainer with stdout sent to /dev/null (runs that print progress lines).
static int run_silently(const TrainOptions& t) {
    std::fflush(stdout);
    int saved = dup(1), null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    int status = run_training(t);
    std::fflush(stdout);
    dup2(saved, 1);
    close(null);
    close(saved);
    return status;
}

// The state the trainer's next step starts from: a checkpoint's model (with Adam state), its
// tokenizer, the training data of t encoded with it, and batches from the checkpoint's data
// position (from the start when fresh, i.e. fine-tuning: step 0, zero Adam state, t's seed).
struct Replay {
    Model m;
    Tokenizer tok;
    ParallelData train;
    BatchSampler sampler;
    Metadata meta;
};

static bool replay_from(const std::string& ckpt, const TrainOptions& t, bool fresh, Replay* r) {
    std::string err;
    bool ok = checkpoint_load(&r->m, ckpt, &r->meta, &err) && Tokenizer::deserialize(r->meta["tokenizer"], &r->tok, &err);
    LoadOptions lo;
    lo.skip_empty = true;
    lo.verbose = false;
    ok = ok && load_parallel(t.data_dir + "/train.en", t.data_dir + "/train.es", r->tok, lo, &r->train, &err);
    BatchingOptions bo;
    bo.max_src_tokens = bo.max_tgt_tokens = t.max_tokens;
    bo.max_len = r->m.cfg.max_len;
    bo.seed = t.seed;
    ok = ok && r->sampler.build(r->train.pairs, bo, &err);
    if (fresh && ok) {
        r->m.step = 0;
        r->m.train_forwards = 0;
        r->m.dropout_seed = t.seed;
        std::vector<float> zero(r->m.layout.total, 0.0f);
        model_set_adam(&r->m, zero.data(), zero.data());
    } else if (ok) {
        SamplerPosition pos{std::atoll(r->meta["sampler_epoch"].c_str()), std::atoll(r->meta["sampler_index"].c_str())};
        ok = r->sampler.restore(pos, &err);
    }
    if (!ok) std::printf("  replay: %s\n", err.c_str());
    return ok;
}

// The forward and backward of one Adam step over `accum` batches (the gradient of the mean
// loss over all their labels, in m.grads); returns that mean loss. Each batch's gradient is
// computed from zero and they are summed as the trainer sums them (toolkit/distributed.cpp:
// sum = g0, sum += g1, ..., grads = g_last + sum), so that even rounding noise (k_proj.bias's
// gradient is nothing else) replays bitwise.
static double replay_gradients(Replay& r, int accum) {
    std::vector<Batch> micro;
    double labels = 0, loss = 0;
    for (int a = 0; a < accum; a++) {
        micro.push_back(r.sampler.next());
        labels += micro.back().tgt_tokens;
    }
    std::vector<float> sum;
    for (size_t i = 0; i < micro.size(); i++) {
        model_zero_grad(&r.m);
        loss += (double)model_forward_backward(&r.m, micro[i], labels) * micro[i].tgt_tokens;
        if (micro.size() == 1) break;
        std::vector<float> g = host_grads(r.m);
        if (i == 0) {
            sum = g;
        } else if (i + 1 < micro.size()) {
            for (size_t k = 0; k < g.size(); k++) sum[k] += g[k];
        } else {
            for (size_t k = 0; k < g.size(); k++) g[k] += sum[k];
            r.m.backend->upload(r.m.grads, g.data(), g.size() * sizeof(float));
        }
    }
    return loss / labels;
}

// The train_loss of log.csv's first "train" row.
static double first_logged_loss(const std::string& csv) {
    std::ifstream f(csv);
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("train,", 0) == 0) {
            std::vector<std::string> col;
            std::stringstream ss(line);
            for (std::string c; std::getline(ss, c, ',');) col.push_back(c);
            return col.size() > 3 ? std::atof(col[3].c_str()) : NAN;
        }
    return NAN;
}

// --init-from: the fine-tuning run's first loss is the checkpoint's loss on the new data's
// first batch, and its first step is Adam's first step (fresh state, step 1 of the schedule)
// from the checkpoint's parameters, bitwise. Config and tokenizer come from the checkpoint.
static void fine_tuning() {
    const std::string base = g_tmp + "/base", tuned = g_tmp + "/tuned", data2 = g_tmp + "/corpus2";
    check(run_training(small_run(base, 10)) == 0, "train the model to fine-tune (10 steps)");
    write_corpus(data2, 300, 12345);
    TrainOptions f = small_run(tuned, 2);
    f.data_dir = data2;
    f.init_from = base + "/ckpt-00000010.safetensors";
    f.accum = 1;
    f.seed = 5;
    f.save_every_steps = 1;
    f.cfg.d_ff = 48;                              // shape options are the checkpoint's...
    f.cfg.p_drop = 0.2f;                          // ...regularisation may change when given
    f.init_override.p_drop = true;
    f.quiet = false;
    f.log_every_s = 0;                            // one log.csv row per step
    check(run_silently(f) == 0, "fine-tune it on other data (--init-from, 2 steps)");
    Replay r;
    if (!replay_from(f.init_from, f, true, &r)) { check(false, "replay the fine-tuning's first step"); return; }
    r.m.cfg.p_drop = 0.2f;
    double loss = replay_gradients(r, 1);
    adam_update(&r.m, learning_rate(r.m.cfg, 1, f.lr_scale, f.warmup), f.clip_norm);
    double logged = first_logged_loss(tuned + "/log.csv");
    check(std::fabs(logged - loss) <= 1e-6 + 1e-6 * std::fabs(loss),
          "first fine-tuning loss %.6f (log.csv) == the checkpoint's loss on the new data's first batch %.7f", logged, loss);
    Model step1;
    Metadata meta;
    std::string err;
    if (!checkpoint_load(&step1, tuned + "/ckpt-00000001.safetensors", &meta, &err)) {
        check(false, "fine-tuning wrote ckpt-00000001 (a fresh schedule): %s", err.c_str());
        return;
    }
    check(same_bits(host_params(step1), host_params(r.m)) && same_bits(host_adam(step1), host_adam(r.m)),
          "fine-tuning step 1 == Adam's first step from the checkpoint with zero state (bitwise, %zu floats)",
          step1.layout.total);
    check(step1.cfg.d_ff == 64 && std::fabs(step1.cfg.p_drop - 0.2f) == 0,
          "config from the checkpoint (d_ff %d, not 48), dropout given (%g)", step1.cfg.d_ff, step1.cfg.p_drop);
    check(read_bytes(tuned + "/vocab.bpe") == read_bytes(base + "/vocab.bpe") && meta["tokenizer"] == r.meta["tokenizer"],
          "the checkpoint's tokenizer kept (vocab.bpe and the checkpoint's tokenizer identical)");
    TrainOptions both = f;
    both.out_dir = g_tmp + "/never";
    both.resume = true;
    check(run_silently(both) != 0 && !fs::exists(both.out_dir), "--init-from with --resume refused");
    TrainOptions missing = f;
    missing.out_dir = g_tmp + "/never";
    missing.init_from = g_tmp + "/no-such.safetensors";
    check(run_silently(missing) != 0, "--init-from a missing file refused");
}

// Adam's betas and epsilon: step 3 of a run with (0.5, 0.9, 1e-3) against Adam's formula
// applied, in double, to the step-2 checkpoint's parameters and state and the replayed
// gradient; the paper's values must not fit. A resume without the options keeps them.
static void adam_options() {
    const std::string dir = g_tmp + "/adam", resumed_dir = g_tmp + "/adam_resumed";
    TrainOptions t = small_run(dir, 3);
    t.save_every_steps = 1;
    t.adam = {0.5f, 0.9f, 1e-3f};
    check(run_training(t) == 0, "train 3 steps with --adam-beta1 0.5 --adam-beta2 0.9 --adam-eps 1e-3");
    Replay r;
    Model after;
    std::string err;
    if (!replay_from(dir + "/ckpt-00000002.safetensors", t, false, &r) ||
        !checkpoint_load(&after, dir + "/ckpt-00000003.safetensors", nullptr, &err)) {
        check(false, "replay step 3");
        return;
    }
    replay_gradients(r, t.accum);
    const std::vector<float> g = host_grads(r.m), p = host_params(r.m), mv = host_adam(r.m);
    const std::vector<float> p3 = host_params(after), mv3 = host_adam(after);
    const size_t n = p.size();
    const double lr = learning_rate(r.m.cfg, 3, t.lr_scale, t.warmup);
    // Largest |actual - predicted| over its allowance (float rounding of the update and of p).
    auto misfit = [&](double b1, double b2, double eps, size_t* fitting) {
        double worst = 0;
        *fitting = 0;
        for (size_t i = 0; i < n; i++) {
            double m = b1 * mv[i] + (1 - b1) * g[i], v = b2 * mv[n + i] + (1 - b2) * (double)g[i] * g[i];
            double delta = lr / (1 - std::pow(b1, 3)) * m / (std::sqrt(v) / std::sqrt(1 - std::pow(b2, 3)) + eps);
            double e = std::fabs(p3[i] - (p[i] - delta)) / (1e-5 * std::fabs(delta) + 1.2e-7 * std::fabs(p[i]) + 1e-30);
            *fitting += e <= 1;
            worst = std::max(worst, e);
        }
        return worst;
    };
    size_t fit_given, fit_paper;
    double given = misfit(0.5, 0.9, 1e-3, &fit_given), paper = misfit(0.9, 0.98, 1e-9, &fit_paper);
    check(given <= 1, "step 3 == Adam(0.5, 0.9, 1e-3) on the replayed gradient: all %zu parameters within "
          "1e-5 of the update + 1 ulp (worst %.2f of that)", n, given);
    check(fit_paper < n / 2, "the paper's (0.9, 0.98, 1e-9) would not give it: %zu of %zu parameters fit (worst %.3g)",
          fit_paper, n, paper);
    double m_err = 0;
    for (size_t i = 0; i < n; i++)
        m_err = std::max(m_err, std::fabs(mv3[i] - (0.5 * mv[i] + 0.5 * g[i])) / (1e-6 * std::fabs(mv3[i]) + 1e-30));
    check(m_err <= 1, "Adam's m after step 3 == 0.5 m + 0.5 g (within 1e-6 relative; worst %.2f of that)", m_err);
    TrainOptions first = small_run(resumed_dir, 2), rest = resumed(small_run(resumed_dir, 3));
    first.save_every_steps = rest.save_every_steps = 1;
    first.adam = t.adam;   // rest: the paper's betas in the options; the checkpoint's must win
    check(run_training(first) == 0 && run_training(rest) == 0, "2 steps with the options, resume to 3 without them");
    Model b;
    if (load(resumed_dir + "/ckpt-00000003.safetensors", &b))
        check(same_bits(host_params(b), p3) && same_bits(host_adam(b), mv3),
              "resume keeps the checkpoint's betas and epsilon (step 3 bitwise equal)");
}

// The dev lines of the log (step, dev_loss, bleu_dev), and the best by dev loss in them.
static std::vector<std::string> dev_rows(const std::string& csv) {
    std::ifstream f(csv);
    std::vector<std::string> rows;
    for (std::string line; std::getline(f, line);)
        if (line.rfind("dev,", 0) == 0) {
            std::vector<std::string> col;
            std::stringstream ss(line);
            for (std::string c; std::getline(ss, c, ',');) col.push_back(c);
            rows.push_back(col[1] + "," + col[5] + "," + col[6]);
        }
    return rows;
}

// best.safetensors and the evaluations survive --resume: 15 steps + resume to 30 with an
// evaluation every 5 steps (dev loss and BLEU) gives the straight run's log rows, best
// checkpoint and last checkpoint, bitwise; the best is the logged minimum of dev loss. A
// learning rate too high on purpose makes the loss diverge, so that the best comes before
// the resume point and a resume that forgot it would take a later, worse one.
static void best_survives_resume() {
    const std::string data = g_tmp + "/corpus_dev", a = g_tmp + "/best_straight", b = g_tmp + "/best_resumed";
    write_corpus(data, 400);
    write_corpus(data, 40, 99, "dev");
    auto run = [&](const std::string& out, int64_t steps) {
        TrainOptions t = small_run(out, steps);
        t.data_dir = data;
        t.eval_every_steps = 5;
        t.eval_lines = 20;
        t.best_metric = "loss";
        t.lr_scale = 30;
        return t;
    };
    check(run_training(run(a, 30)) == 0, "30 steps with an evaluation every 5 (dev loss and BLEU)");
    check(run_training(run(b, 15)) == 0 && run_training(resumed(run(b, 30))) == 0, "15 steps, resume to 30");
    std::vector<std::string> ra = dev_rows(a + "/log.csv"), rb = dev_rows(b + "/log.csv");
    check(ra.size() == 6 && ra == rb, "the resumed run logs the straight run's 6 evaluations (step, dev loss, dev BLEU)");
    size_t best = 0;
    for (size_t i = 1; i < ra.size(); i++)
        if (std::atof(ra[i].c_str() + ra[i].find(',') + 1) < std::atof(ra[best].c_str() + ra[best].find(',') + 1)) best = i;
    Model ba, bb, last_a, last_b;
    Metadata ma;
    std::string err;
    if (!checkpoint_load(&ba, a + "/best.safetensors", &ma, &err, false) || !load(b + "/best.safetensors", &bb) ||
        !load(a + "/ckpt-00000030.safetensors", &last_a) || !load(b + "/ckpt-00000030.safetensors", &last_b)) {
        check(false, "best.safetensors and ckpt-30 of both runs load: %s", err.c_str());
        return;
    }
    check(ba.step == std::atoll(ra[best].c_str()), "best.safetensors is the step of the lowest logged dev loss (%lld; log %s)",
          (long long)ba.step, ra[best].c_str());
    check(ba.step <= 15 && best + 1 < ra.size(), "the case tests the resume: the best (step %lld) precedes the resume "
          "point (15), later evaluations are worse (last: %s)", (long long)ba.step, ra.back().c_str());
    check(same_bits(host_params(ba), host_params(bb)), "best.safetensors equal after resume (bitwise)");
    check(same_bits(host_params(last_a), host_params(last_b)), "evaluating during training keeps resume exact (step 30 bitwise)");
}

// The CPU's backend for a precision; a SKIP line when there is none.
static std::unique_ptr<Backend> cpu_backend(const char* precision) {
    std::string err;
    std::unique_ptr<Backend> b = make_backend("cpu", precision, &err);
    if (!b) check_skip("CPU %s: %s", precision, err.c_str());
    return b;
}

int main() {
    char tmpl[] = "/tmp/test_train.XXXXXX";
    g_tmp = mkdtemp(tmpl);
    write_corpus(g_tmp + "/corpus", 400);
    std::printf("-- resume\n");
    resume_is_exact();
    std::printf("-- thread counts (toolkit/thread_governor.h)\n");
    thread_count_invariance();
    std::printf("-- kill during a checkpoint write\n");
    kill_during_write();
    std::printf("-- averaging\n");
    averaging();
    std::printf("-- fine-tuning (--init-from)\n");
    fine_tuning();
    std::printf("-- Adam's betas and epsilon\n");
    adam_options();
    std::printf("-- the best checkpoint and resume\n");
    best_survives_resume();
    std::printf("-- --precision bf16 on the CPU (the linear layers' products: %s)\n", bf16_kernel());
    bf16_loss_curve(cpu_backend, "CPU", 200);
    resume_is_bitwise(cpu_backend, "CPU", "bf16");
    fs::remove_all(g_tmp);
    return check_summary("train");
}
