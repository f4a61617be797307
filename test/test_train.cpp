// test/test_train.cpp — the training run around the model: exact resume (N steps, stop,
// resume, N more == 2N steps, bitwise), a trainer killed while writing a checkpoint leaves
// the previous one intact, and checkpoint averaging (the element-wise mean; mismatched
// inputs refused). Uses a small synthetic parallel corpus written to a temporary folder.
//
//   make test   (or build/test_train, from the repository root)
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "test/check.h"
#include "test/model_buffers.h"
#include "model/checkpoint.h"
#include "toolkit/trainer.h"

namespace fs = std::filesystem;
static std::string g_tmp;

// A toy "translation": the target is the source's words reversed, with a suffix.
static void write_corpus(const std::string& dir, int pairs) {
    fs::create_directories(dir);
    const char* words[] = {"alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta", "iota", "kappa"};
    FILE* en = std::fopen((dir + "/train.en").c_str(), "w");
    FILE* es = std::fopen((dir + "/train.es").c_str(), "w");
    uint64_t s = 7;
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
    TrainOptions more = small_run(b, 30);
    more.resume = true;
    check(run_training(more) == 0, "resume and train to step 30");
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
    }
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

int main() {
    char tmpl[] = "/tmp/test_train.XXXXXX";
    g_tmp = mkdtemp(tmpl);
    write_corpus(g_tmp + "/corpus", 400);
    std::printf("-- resume\n");
    resume_is_exact();
    std::printf("-- kill during a checkpoint write\n");
    kill_during_write();
    std::printf("-- averaging\n");
    averaging();
    fs::remove_all(g_tmp);
    return check_summary("train");
}
