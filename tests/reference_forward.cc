// Float64 reference forward pass (see reference_forward.h). Written from the Hugging Face
// modeling files: LlamaRMSNorm / GemmaRMSNorm ((1 + w)), rotate_half RoPE with the rope_init
// functions (default, linear, llama3), eager attention (scaling, soft-cap, causal + sliding
// mask, softmax), the gated MLPs (SiLU, gelu_pytorch_tanh), Gemma's scaled embeddings and
// pre/post norms, Qwen2's q/k/v biases, Qwen3 / Gemma 3 per-head q/k norms, Phi-3's fused
// projections, final soft-capping.
#include "reference_forward.h"

#include <math.h>

#include <map>

namespace ringlm_test {
namespace {

using json = nlohmann::json;

struct Config {
  std::string family;
  bool gemma = false;
  uint32_t D = 0, L = 0, H = 0, KV = 0, hd = 0, F = 0, V = 0;
  double eps = 1e-6, theta = 10000, theta_local = 0;
  bool tied = false, gelu = false, qkv_bias = false, qk_norm = false, phi3 = false;
  double scaling = 0;  // attention score scale
  double attn_cap = 0, final_cap = 0;
  std::string rope_type = "default";
  double rope_factor = 1, low_freq = 1, high_freq = 4, orig_ctx = 8192;
  uint32_t window = 0;
  std::vector<bool> local;
};

double num(const json& c, const char* k, double def) {
  return c.contains(k) && c[k].is_number() ? c[k].get<double>() : def;
}
uint32_t u32(const json& c, const char* k, uint32_t def) {
  return c.contains(k) && c[k].is_number_integer() ? c[k].get<uint32_t>() : def;
}

bool parse_config(const json& c, Config* o, std::string* err) {
  const std::string mt = c.value("model_type", std::string());
  if (mt == "llama" || mt == "mistral") o->family = "llama";
  else if (mt == "qwen2" || mt == "qwen3" || mt == "gemma2" || mt == "phi3") o->family = mt;
  else if (mt == "gemma3" || mt == "gemma3_text") o->family = "gemma3";
  else {
    *err = "reference: model_type '" + mt + "' not implemented";
    return false;
  }
  const std::string& f = o->family;
  o->gemma = f == "gemma2" || f == "gemma3";
  o->phi3 = f == "phi3";
  o->D = u32(c, "hidden_size", 0);
  o->L = u32(c, "num_hidden_layers", 0);
  o->H = u32(c, "num_attention_heads", 0);
  o->KV = u32(c, "num_key_value_heads", o->H);
  o->F = u32(c, "intermediate_size", 0);
  o->V = u32(c, "vocab_size", 0);
  // Config class defaults.
  const uint32_t default_hd = o->gemma ? 256 : f == "qwen3" ? 128 : o->D / o->H;
  o->hd = u32(c, "head_dim", default_hd);
  o->eps = num(c, "rms_norm_eps", f == "phi3" ? 1e-5 : 1e-6);
  o->theta = num(c, "rope_theta", f == "gemma3" ? 1e6 : 1e4);
  o->tied = c.contains("tie_word_embeddings") && c["tie_word_embeddings"].is_boolean()
                ? c["tie_word_embeddings"].get<bool>()
                : o->gemma;
  std::string act = o->gemma ? "gelu_pytorch_tanh" : "silu";
  if (c.contains("hidden_act") && c["hidden_act"].is_string()) act = c["hidden_act"];
  if (o->gemma && c.contains("hidden_activation") && c["hidden_activation"].is_string())
    act = c["hidden_activation"];
  if (act == "gelu_pytorch_tanh") o->gelu = true;
  else if (act != "silu") {
    *err = "reference: activation '" + act + "' not implemented";
    return false;
  }
  o->qkv_bias = f == "qwen2";
  o->qk_norm = f == "qwen3" || f == "gemma3";
  const double qpas = o->gemma ? num(c, "query_pre_attn_scalar", 256) : o->hd;
  o->scaling = 1.0 / sqrt(qpas);
  if (f == "gemma2") {
    o->attn_cap = num(c, "attn_logit_softcapping", 50);
    o->final_cap = num(c, "final_logit_softcapping", 30);
  } else if (f == "gemma3") {
    o->attn_cap = num(c, "attn_logit_softcapping", 0);
    o->final_cap = num(c, "final_logit_softcapping", 0);
  }
  if (c.contains("rope_scaling") && c["rope_scaling"].is_object()) {
    const json& rs = c["rope_scaling"];
    o->rope_type = rs.value("rope_type", rs.value("type", std::string("default")));
    o->rope_factor = num(rs, "factor", 1);
    o->low_freq = num(rs, "low_freq_factor", 1);
    o->high_freq = num(rs, "high_freq_factor", 4);
    o->orig_ctx = num(rs, "original_max_position_embeddings", 8192);
    if (o->rope_type != "default" && o->rope_type != "linear" && o->rope_type != "llama3") {
      *err = "reference: rope_scaling '" + o->rope_type + "' not implemented";
      return false;
    }
  }
  // Sliding windows. (The shared gemma3 config names the size sliding_window_attention_size.)
  o->window = u32(c, "sliding_window", u32(c, "sliding_window_attention_size", o->gemma ? 4096 : 0));
  o->local.assign(o->L, false);
  if (c.contains("layer_types") && c["layer_types"].is_array()) {
    for (uint32_t l = 0; l < o->L; ++l) o->local[l] = c["layer_types"][l] == "sliding_attention";
  } else if (f == "gemma2") {
    for (uint32_t l = 0; l < o->L; ++l) o->local[l] = !(l % 2);
  } else if (f == "gemma3") {
    const uint32_t pattern = u32(c, "sliding_window_pattern", 6);
    for (uint32_t l = 0; l < o->L; ++l) o->local[l] = (l + 1) % pattern != 0;
    o->theta_local = num(c, "rope_local_base_freq", 10000);
  } else if (f == "qwen2" || f == "qwen3") {
    if (c.value("use_sliding_window", false))
      for (uint32_t l = u32(c, "max_window_layers", 28); l < o->L; ++l) o->local[l] = true;
  } else if (o->window > 0) {  // Mistral, Phi-3: every layer
    for (uint32_t l = 0; l < o->L; ++l) o->local[l] = true;
  }
  return true;
}

// Inverse frequencies of rotate_half RoPE: default / linear / llama3 (rope_init functions).
std::vector<double> inv_freq(const Config& c, double base, bool scaled) {
  std::vector<double> f(c.hd / 2);
  for (uint32_t i = 0; i < c.hd / 2; ++i) {
    double x = 1.0 / pow(base, static_cast<double>(2 * i) / c.hd);
    if (scaled && c.rope_type == "linear") {
      x /= c.rope_factor;
    } else if (scaled && c.rope_type == "llama3") {
      const double low_wl = c.orig_ctx / c.low_freq, high_wl = c.orig_ctx / c.high_freq;
      const double wl = 2 * M_PI / x;
      const double lowered = wl > low_wl ? x / c.rope_factor : x;
      if (!(wl < high_wl) && !(wl > low_wl)) {
        const double s = (c.orig_ctx / wl - c.low_freq) / (c.high_freq - c.low_freq);
        x = (1 - s) * lowered / c.rope_factor + s * lowered;
      } else {
        x = lowered;
      }
    }
    f[i] = x;
  }
  return f;
}

struct Tensor {
  std::vector<uint64_t> shape;
  std::vector<double> v;
};

void rms_norm(const double* x, const std::vector<double>& w, bool plus_one, double eps, size_t n,
              double* out) {
  double ss = 0;
  for (size_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const double r = 1.0 / sqrt(ss / n + eps);
  for (size_t i = 0; i < n; ++i) out[i] = x[i] * r * (plus_one ? 1.0 + w[i] : w[i]);
}

// y(rows) = W(rows, cols) x, rows [r0, r0 + n) of W.
void matvec(const Tensor& w, const double* x, uint64_t r0, uint64_t n, double* y) {
  const uint64_t cols = w.shape[1];
  for (uint64_t r = 0; r < n; ++r) {
    const double* row = &w.v[(r0 + r) * cols];
    double s = 0;
    for (uint64_t c = 0; c < cols; ++c) s += row[c] * x[c];
    y[r] = s;
  }
}

void rope(double* v, const std::vector<double>& freq, uint32_t hd, size_t pos) {
  const uint32_t half = hd / 2;
  for (uint32_t i = 0; i < half; ++i) {
    const double a = static_cast<double>(pos) * freq[i];
    const double c = cos(a), s = sin(a);
    const double x1 = v[i], x2 = v[i + half];
    v[i] = x1 * c - x2 * s;
    v[i + half] = x2 * c + x1 * s;
  }
}

}  // namespace

bool reference_forward(const json& config, const ringlm::internal::conv::ModelData& ckpt,
                       const std::vector<int32_t>& tokens, size_t first,
                       std::vector<std::vector<double>>* logits, std::string* err,
                       ReferenceInfo* info) {
  Config c;
  if (!parse_config(config, &c, err)) return false;
  if (info) {
    info->family = c.family;
    info->layer_is_local = c.local;
    info->sliding_window = c.window;
  }
  std::map<std::string, Tensor> W;
  for (const auto& t : ckpt.tensors) {
    std::vector<float> f;
    if (!t.load_f32(&f, err)) return false;
    Tensor& d = W[t.name];
    d.shape = t.shape;
    d.v.assign(f.begin(), f.end());
  }
  auto get = [&](const std::string& name) -> const Tensor* {
    auto it = W.find(name);
    if (it == W.end()) *err = "reference: checkpoint has no '" + name + "'";
    return it == W.end() ? nullptr : &it->second;
  };
  const size_t n = tokens.size();
  const uint32_t D = c.D, hd = c.hd, H = c.H, KV = c.KV, F = c.F;
  const uint32_t q_dim = H * hd, kv_dim = KV * hd;
  const Tensor* emb = get("model.embed_tokens.weight");
  if (!emb) return false;
  // Residual stream of every position.
  std::vector<std::vector<double>> x(n, std::vector<double>(D));
  const double escale = c.gemma ? sqrt(static_cast<double>(D)) : 1.0;
  for (size_t p = 0; p < n; ++p) {
    if (tokens[p] < 0 || static_cast<uint32_t>(tokens[p]) >= c.V) {
      *err = "reference: token out of range";
      return false;
    }
    for (uint32_t i = 0; i < D; ++i) x[p][i] = emb->v[static_cast<size_t>(tokens[p]) * D + i] * escale;
  }
  const std::vector<double> freq_global = inv_freq(c, c.theta, true);
  // Gemma 3 local layers: their own base, default (unscaled) RoPE.
  const std::vector<double> freq_local =
      c.theta_local > 0 ? inv_freq(c, c.theta_local, false) : freq_global;
  std::vector<double> h(D), q(n * q_dim), k(n * kv_dim), v(n * kv_dim), att(n), o(q_dim), t(D);
  std::vector<double> g(F), u(F);
  for (uint32_t l = 0; l < c.L; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const Tensor *in_norm = get(p + "input_layernorm.weight"), *wo = get(p + "self_attn.o_proj.weight"),
                 *post_attn = get(p + "post_attention_layernorm.weight"),
                 *down = get(p + "mlp.down_proj.weight");
    if (!in_norm || !wo || !post_attn || !down) return false;
    const Tensor *wq = nullptr, *wk = nullptr, *wv = nullptr, *wqkv = nullptr;
    if (c.phi3) {
      if (!(wqkv = get(p + "self_attn.qkv_proj.weight"))) return false;
    } else if (!(wq = get(p + "self_attn.q_proj.weight")) || !(wk = get(p + "self_attn.k_proj.weight")) ||
               !(wv = get(p + "self_attn.v_proj.weight"))) {
      return false;
    }
    // Projections (+ biases, + per-head norms), RoPE at each absolute position.
    const std::vector<double>& freq = c.local[l] ? freq_local : freq_global;
    for (size_t pos = 0; pos < n; ++pos) {
      rms_norm(x[pos].data(), in_norm->v, c.gemma, c.eps, D, h.data());
      double* qp = &q[pos * q_dim];
      double* kp = &k[pos * kv_dim];
      double* vp = &v[pos * kv_dim];
      if (c.phi3) {
        matvec(*wqkv, h.data(), 0, q_dim, qp);
        matvec(*wqkv, h.data(), q_dim, kv_dim, kp);
        matvec(*wqkv, h.data(), q_dim + kv_dim, kv_dim, vp);
      } else {
        matvec(*wq, h.data(), 0, q_dim, qp);
        matvec(*wk, h.data(), 0, kv_dim, kp);
        matvec(*wv, h.data(), 0, kv_dim, vp);
      }
      if (c.qkv_bias) {
        const Tensor *bq = get(p + "self_attn.q_proj.bias"), *bk = get(p + "self_attn.k_proj.bias"),
                     *bv = get(p + "self_attn.v_proj.bias");
        if (!bq || !bk || !bv) return false;
        for (uint32_t i = 0; i < q_dim; ++i) qp[i] += bq->v[i];
        for (uint32_t i = 0; i < kv_dim; ++i) kp[i] += bk->v[i], vp[i] += bv->v[i];
      }
      if (c.qk_norm) {
        const Tensor *qn = get(p + "self_attn.q_norm.weight"), *kn = get(p + "self_attn.k_norm.weight");
        if (!qn || !kn) return false;
        std::vector<double> tmp(hd);
        for (uint32_t hh = 0; hh < H; ++hh) {
          rms_norm(qp + hh * hd, qn->v, c.gemma, c.eps, hd, tmp.data());
          std::copy(tmp.begin(), tmp.end(), qp + hh * hd);
        }
        for (uint32_t hh = 0; hh < KV; ++hh) {
          rms_norm(kp + hh * hd, kn->v, c.gemma, c.eps, hd, tmp.data());
          std::copy(tmp.begin(), tmp.end(), kp + hh * hd);
        }
      }
      for (uint32_t hh = 0; hh < H; ++hh) rope(qp + hh * hd, freq, hd, pos);
      for (uint32_t hh = 0; hh < KV; ++hh) rope(kp + hh * hd, freq, hd, pos);
    }
    // Attention, then o_proj, (Gemma: post-attention norm), residual.
    std::vector<std::vector<double>> attn_out(n, std::vector<double>(D));
    for (size_t i = 0; i < n; ++i) {
      for (uint32_t hh = 0; hh < H; ++hh) {
        const uint32_t kvh = hh / (H / KV);
        const double* qv = &q[i * q_dim + hh * hd];
        double mx = -INFINITY;
        for (size_t j = 0; j <= i; ++j) {
          const bool visible = !c.local[l] || i - j < c.window;
          if (!visible) {
            att[j] = -INFINITY;
            continue;
          }
          const double* kv = &k[j * kv_dim + kvh * hd];
          double s = 0;
          for (uint32_t d = 0; d < hd; ++d) s += qv[d] * kv[d];
          s *= c.scaling;
          if (c.attn_cap > 0) s = c.attn_cap * tanh(s / c.attn_cap);
          att[j] = s;
          mx = std::max(mx, s);
        }
        double sum = 0;
        for (size_t j = 0; j <= i; ++j) {
          att[j] = att[j] == -INFINITY ? 0.0 : exp(att[j] - mx);
          sum += att[j];
        }
        double* op = &o[hh * hd];
        for (uint32_t d = 0; d < hd; ++d) op[d] = 0;
        for (size_t j = 0; j <= i; ++j) {
          if (att[j] == 0) continue;
          const double a = att[j] / sum;
          const double* vv = &v[j * kv_dim + kvh * hd];
          for (uint32_t d = 0; d < hd; ++d) op[d] += a * vv[d];
        }
      }
      matvec(*wo, o.data(), 0, D, attn_out[i].data());
    }
    const Tensor* ffn_norm = c.gemma ? get(p + "pre_feedforward_layernorm.weight") : post_attn;
    const Tensor* post_ffn = c.gemma ? get(p + "post_feedforward_layernorm.weight") : nullptr;
    if (!ffn_norm || (c.gemma && !post_ffn)) return false;
    const Tensor *gate = nullptr, *up = nullptr, *gate_up = nullptr;
    if (c.phi3) {
      if (!(gate_up = get(p + "mlp.gate_up_proj.weight"))) return false;
    } else if (!(gate = get(p + "mlp.gate_proj.weight")) || !(up = get(p + "mlp.up_proj.weight"))) {
      return false;
    }
    for (size_t i = 0; i < n; ++i) {
      if (c.gemma) {
        rms_norm(attn_out[i].data(), post_attn->v, true, c.eps, D, t.data());
        for (uint32_t d = 0; d < D; ++d) x[i][d] += t[d];
      } else {
        for (uint32_t d = 0; d < D; ++d) x[i][d] += attn_out[i][d];
      }
      // MLP: down(act(gate(h)) * up(h)).
      rms_norm(x[i].data(), ffn_norm->v, c.gemma, c.eps, D, h.data());
      if (c.phi3) {
        matvec(*gate_up, h.data(), 0, F, g.data());  // chunk(2): gate first, then up
        matvec(*gate_up, h.data(), F, F, u.data());
      } else {
        matvec(*gate, h.data(), 0, F, g.data());
        matvec(*up, h.data(), 0, F, u.data());
      }
      for (uint32_t j = 0; j < F; ++j) {
        const double a = g[j];
        const double act = c.gelu ? 0.5 * a * (1.0 + tanh(sqrt(2.0 / M_PI) * (a + 0.044715 * a * a * a)))
                                  : a / (1.0 + exp(-a));
        g[j] = act * u[j];
      }
      matvec(*down, g.data(), 0, D, t.data());
      if (c.gemma) {
        std::vector<double> t2(D);
        rms_norm(t.data(), post_ffn->v, true, c.eps, D, t2.data());
        t = t2;
      }
      for (uint32_t d = 0; d < D; ++d) x[i][d] += t[d];
    }
  }
  const Tensor* norm = get("model.norm.weight");
  const Tensor* head = c.tied ? emb : get("lm_head.weight");
  if (!norm || !head) return false;
  logits->assign(n > first ? n - first : 0, std::vector<double>(c.V));
  for (size_t pos = first; pos < n; ++pos) {
    rms_norm(x[pos].data(), norm->v, c.gemma, c.eps, D, h.data());
    std::vector<double>& out = (*logits)[pos - first];
    matvec(*head, h.data(), 0, c.V, out.data());
    if (c.final_cap > 0)
      for (double& z : out) z = c.final_cap * tanh(z / c.final_cap);
  }
  return true;
}

}  // namespace ringlm_test
