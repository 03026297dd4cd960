// Q4_1 weights times activations rounded to int8 twice, on AVX-512 VNNI: the 4-bit copy's products at their bytes.
// Built once per machine by engine/q4_vnni.py (g++, this CPU's flags) and registered as explorer_q4::gemm; its
// shape function for tracing is registered there (in Python: a C++ one would fix the symbolic row count).
//
// Why: torch's int4 kernel for the CPU reached ~15 GB/s on a one-row product here (a 2-core AMD EPYC, Zen 4),
// about half what the machine streams. A one-row product is a pass over the weights; the work per byte has to
// be a handful of instructions. Here 16 output rows sit side by side in one 512-bit register, a 32-bit lane
// each, so every lane's four bytes meet the same four activations (one broadcast) in one vpdpbusd, and no code
// is ever shuffled between lanes.
//
// The maths (llama.cpp's Q4_1 × Q8 dot product, with a second int8 pass): a group of 32 weights is
// w_j = d·q_j + m (codes q_j in 0–15); the row's 32 activations of that group are rounded to int8 twice over, x_j ≈
// s1·y1_j + s2·y2_j (``quantise``).
// Then
//     Σ_j w_j x_j ≈ d·(s1·Σ_j q_j y1_j + s2·Σ_j q_j y2_j) + m·Σ_j x_j
// (the last sum exact, in float32). The rounding beyond the weights' own: the activations' to ~15 bits.
//
// Layouts (O output rows, I inputs, G = I / 32 groups, R rows of x):
//   codes (O/16, I/8, 64) uint8: for 16 output rows and 8 inputs 8k..8k+7, row j's 4 bytes (a lane);
//         byte b = q[8k + b] | q[8k + 4 + b] << 4 (low nibbles: inputs 8k..8k+3; high: 8k+4..8k+7)
//   dm    (O/16, G, 2, 16) float16: the 16 rows' d, then their m, for group g
//   x     (R, I) float32 or bfloat16 -> (R, O) in x's dtype

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

namespace {

// float32 -> bfloat16, round to nearest even, 16 at a time (AVX-512F only: no avx512_bf16 needed)
inline __m256i to_bf16(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7FFF)));
  return _mm512_cvtepi32_epi16(_mm512_srli_epi32(rounded, 16));
}

// x rounded to int8 twice over: x ≈ s1·y1 + s2·y2 per group of 32, y2 the rounding of what y1 left (|x − s1·y1| ≤
// s1 / 2), so the pair carries ~15 bits. One int8 rounding cost the copy 5 points of agreement with the target
// (teacher-forced, 605 held-out tokens: 0.932, against 0.980 on torch's kernel with bf16 activations); with the
// second it agrees 0.988. The second pass costs two more vpdpbusd per 64 bytes of codes: a step's products 5 %
// slower, streaming from memory.
struct Quantised {
  std::vector<int8_t> y1, y2;  // (R, I)
  std::vector<float> s1, s2;   // (R, G)
  std::vector<float> sum;      // (R, G)  Σ x_j, exact: the minimum's term
};

// 16 activations as float32 (bfloat16's bits are float32's upper half)
template <typename T>
inline __m512 load16(const T* x) {
  if constexpr (std::is_same_v<T, float>) {
    return _mm512_loadu_ps(x);
  } else {
    const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(raw), 16));
  }
}

inline float max_abs(__m512 a, __m512 b) {
  return _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(a), _mm512_abs_ps(b)));
}

// round(v · inverse) to int8 (to nearest, ties to even), 16 at a time
inline __m512 rounded(__m512 v, float inverse) {
  return _mm512_roundscale_ps(_mm512_mul_ps(v, _mm512_set1_ps(inverse)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

inline void store8(int8_t* to, __m512 y) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(to), _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(y)));
}

// Filled per call into the calling thread's own buffers: no allocation on a one-row step (121 products a step).
template <typename T>
const Quantised& quantise(const T* x, int64_t rows, int64_t inputs) {
  thread_local Quantised q;
  const int64_t groups = inputs / 32;
  q.y1.resize(rows * inputs);
  q.y2.resize(rows * inputs);
  q.s1.resize(rows * groups);
  q.s2.resize(rows * groups);
  q.sum.resize(rows * groups);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t at = r * inputs + g * 32, k = r * groups + g;
      const __m512 a = load16(x + at), b = load16(x + at + 16);
      const float amax = max_abs(a, b);
      const float s1 = amax / 127.f, inverse = amax > 0.f ? 127.f / amax : 0.f;
      const __m512 ya = rounded(a, inverse), yb = rounded(b, inverse);
      const __m512 la = _mm512_fnmadd_ps(ya, _mm512_set1_ps(s1), a), lb = _mm512_fnmadd_ps(yb, _mm512_set1_ps(s1), b);
      const float lmax = max_abs(la, lb);
      const float inverse2 = lmax > 0.f ? 127.f / lmax : 0.f;
      store8(q.y1.data() + at, ya);
      store8(q.y1.data() + at + 16, yb);
      store8(q.y2.data() + at, rounded(la, inverse2));
      store8(q.y2.data() + at + 16, rounded(lb, inverse2));
      q.s1[k] = s1;
      q.s2[k] = lmax / 127.f;
      q.sum[k] = _mm512_reduce_add_ps(_mm512_add_ps(a, b));
    }
  }
  return q;
}

// 16 output rows (block b) for every row of x: out[r, 16b .. 16b + 15]
template <typename T>
inline void block_rows(const uint8_t* codes, const uint16_t* dm, const Quantised& q, int64_t rows, int64_t inputs,
                       int64_t outputs, int64_t b, T* out) {
  const int64_t groups = inputs / 32;
  const __m512i low = _mm512_set1_epi8(0x0F);
  const uint8_t* block_codes = codes + b * (inputs / 8) * 64;
  const uint16_t* block_dm = dm + b * groups * 32;
  for (int64_t r = 0; r < rows; ++r) {
    const int8_t* y1 = q.y1.data() + r * inputs;
    const int8_t* y2 = q.y2.data() + r * inputs;
    const float* s1 = q.s1.data() + r * groups;
    const float* s2 = q.s2.data() + r * groups;
    const float* sum = q.sum.data() + r * groups;
    __m512 acc = _mm512_setzero_ps(), acc_m = _mm512_setzero_ps();
    for (int64_t g = 0; g < groups; ++g) {
      const uint8_t* c = block_codes + g * 4 * 64;
      __m512i first_lo = _mm512_setzero_si512(), first_hi = _mm512_setzero_si512();
      __m512i second_lo = _mm512_setzero_si512(), second_hi = _mm512_setzero_si512();
      for (int k = 0; k < 4; ++k) {
        const __m512i v = _mm512_loadu_si512(c + k * 64);
        const __m512i lo = _mm512_and_si512(v, low), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
        int32_t a_lo, a_hi, b_lo, b_hi;  // the four activations each nibble half meets, in both roundings
        std::memcpy(&a_lo, y1 + g * 32 + k * 8, 4);
        std::memcpy(&a_hi, y1 + g * 32 + k * 8 + 4, 4);
        std::memcpy(&b_lo, y2 + g * 32 + k * 8, 4);
        std::memcpy(&b_hi, y2 + g * 32 + k * 8 + 4, 4);
        first_lo = _mm512_dpbusd_epi32(first_lo, lo, _mm512_set1_epi32(a_lo));
        first_hi = _mm512_dpbusd_epi32(first_hi, hi, _mm512_set1_epi32(a_hi));
        second_lo = _mm512_dpbusd_epi32(second_lo, lo, _mm512_set1_epi32(b_lo));
        second_hi = _mm512_dpbusd_epi32(second_hi, hi, _mm512_set1_epi32(b_hi));
      }
      const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(block_dm + g * 32)));
      const __m512 m = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(block_dm + g * 32 + 16)));
      const __m512 first = _mm512_cvtepi32_ps(_mm512_add_epi32(first_lo, first_hi));
      const __m512 second = _mm512_cvtepi32_ps(_mm512_add_epi32(second_lo, second_hi));
      const __m512 dots = _mm512_fmadd_ps(first, _mm512_set1_ps(s1[g]), _mm512_mul_ps(second, _mm512_set1_ps(s2[g])));
      acc = _mm512_fmadd_ps(dots, d, acc);
      acc_m = _mm512_fmadd_ps(m, _mm512_set1_ps(sum[g]), acc_m);
    }
    const __m512 total = _mm512_add_ps(acc, acc_m);
    T* dst = out + r * outputs + b * 16;
    if constexpr (std::is_same_v<T, float>) {
      _mm512_storeu_ps(dst, total);
    } else {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), to_bf16(total));
    }
  }
}

template <typename T>
void gemm_into(const T* x, const uint8_t* codes, const uint16_t* dm, int64_t rows, int64_t inputs, int64_t outputs,
               T* out) {
  const Quantised& q = quantise(x, rows, inputs);
  // a grain of 8 blocks (128 output rows): small products stay on one thread, where waking another costs more
  at::parallel_for(0, outputs / 16, 8, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) block_rows(codes, dm, q, rows, inputs, outputs, b, out);
  });
}

at::Tensor gemm(const at::Tensor& x, const at::Tensor& codes, const at::Tensor& dm) {
  TORCH_CHECK(codes.dim() == 3 && codes.size(2) == 64 && codes.scalar_type() == at::kByte && codes.is_contiguous(),
              "codes: (O/16, I/8, 64) uint8, contiguous");
  const int64_t outputs = codes.size(0) * 16, inputs = codes.size(1) * 8, groups = inputs / 32;
  TORCH_CHECK(inputs % 32 == 0, "inputs: a multiple of 32");
  TORCH_CHECK(dm.dim() == 4 && dm.size(0) == codes.size(0) && dm.size(1) == groups && dm.size(2) == 2 &&
                  dm.size(3) == 16 && dm.scalar_type() == at::kHalf && dm.is_contiguous(),
              "dm: (O/16, I/32, 2, 16) float16, contiguous");
  TORCH_CHECK(x.dim() == 2 && x.size(1) == inputs, "x: (R, I)");
  TORCH_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16, "x: float32 or bfloat16");
  const at::Tensor xc = x.contiguous();
  at::Tensor out = at::empty({x.size(0), outputs}, x.options());
  const auto* c = codes.data_ptr<uint8_t>();
  const auto* s = reinterpret_cast<const uint16_t*>(dm.data_ptr<at::Half>());
  if (x.scalar_type() == at::kFloat) {
    gemm_into(xc.data_ptr<float>(), c, s, x.size(0), inputs, outputs, out.data_ptr<float>());
  } else {
    gemm_into(reinterpret_cast<const uint16_t*>(xc.data_ptr<at::BFloat16>()), c, s, x.size(0), inputs, outputs,
              reinterpret_cast<uint16_t*>(out.data_ptr<at::BFloat16>()));
  }
  return out;
}


// -- a whole one-token step of the copy in one call (#49) -------------------------------------------------------
// Why: one step of the copy is 30 layers of 4 products, and the products alone ran at ≈ 1.2× their bytes here,
// while the step took ≈ 2.3× them: ≈ 80 µs a layer went to everything between the products (the compiled
// layer's call, its norms, rotary and attention kernels, the KV cache's writes, Python). Here a layer is those
// same steps in one loop over plain arrays, in the compiled layer's order and its bfloat16 roundings (float32
// inside, bfloat16 wherever the layer stores a tensor); only the products use both threads.

// a float rounded to bfloat16 and back (to nearest, ties to even), as a bfloat16 store would leave it
inline float bf16_round(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000u;
  std::memcpy(&v, &u, 4);
  return v;
}

inline float bf16_value(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float v;
  std::memcpy(&v, &u, 4);
  return v;
}

inline uint16_t bf16_bits(float v) {  // v already rounded (bf16_round): its upper half
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return static_cast<uint16_t>(u >> 16);
}

// 16 bfloat16 values as float32
inline __m512 load16_bf16(const uint16_t* x) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(
      reinterpret_cast<const __m256i*>(x))), 16));
}

// Σ a_i b_i, a float32, b bfloat16 (d a multiple of 16, else the tail in scalar)
inline float dot_bf16(const float* a, const uint16_t* b, int64_t d) {
  __m512 acc = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= d; i += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), load16_bf16(b + i), acc);
  float total = _mm512_reduce_add_ps(acc);
  for (; i < d; ++i) total += a[i] * bf16_value(b[i]);
  return total;
}

// out += w · b, b bfloat16
inline void add_scaled_bf16(float* out, const uint16_t* b, float w, int64_t d) {
  const __m512 weight = _mm512_set1_ps(w);
  int64_t i = 0;
  for (; i + 16 <= d; i += 16) _mm512_storeu_ps(out + i, _mm512_fmadd_ps(weight, load16_bf16(b + i), _mm512_loadu_ps(out + i)));
  for (; i < d; ++i) out[i] += w * bf16_value(b[i]);
}

// e^x, 16 at a time (Cephes' expf: x = n ln 2 + r, |r| ≤ ln 2 / 2, a degree-6 polynomial; relative error ~1e-7,
// far below bfloat16's 4e-3), inputs clamped to where float32 neither overflows nor underflows to a denormal
inline __m512 exp16(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.3f)), _mm512_set1_ps(88.3f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.f)));
  return _mm512_scalef_ps(p, n);
}

// x ← softmax(x · scale), in place
inline void softmax(float* x, int64_t n, float scale) {
  float top = -INFINITY;
  for (int64_t i = 0; i < n; ++i) top = std::max(top, x[i] * scale);
  const __m512 sc = _mm512_set1_ps(scale), shift = _mm512_set1_ps(top);
  __m512 sum = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 e = exp16(_mm512_fmsub_ps(_mm512_loadu_ps(x + i), sc, shift));
    _mm512_storeu_ps(x + i, e);
    sum = _mm512_add_ps(sum, e);
  }
  float total = _mm512_reduce_add_ps(sum);
  for (; i < n; ++i) total += (x[i] = std::exp(x[i] * scale - top));
  const float inverse = 1.f / total;
  for (int64_t k = 0; k < n; ++k) x[k] *= inverse;
}

// One key/value head's attention for its ``per`` query heads q (per, d), over s cached rows of k and v (s, d)
// bfloat16: out (per, d) = softmax(q kᵀ · scale) v, rounded to bfloat16; any head size (the default model's 64
// takes the register path below: ``attend_part``)
inline void attend(const float* q, const uint16_t* k, const uint16_t* v, int64_t s, int64_t d, int64_t per,
                   float scale, float* scores, float* out) {
  for (int64_t p = 0; p < s; ++p)
    for (int64_t e = 0; e < per; ++e) scores[e * s + p] = dot_bf16(q + e * d, k + p * d, d);
  for (int64_t e = 0; e < per; ++e) softmax(scores + e * s, s, scale);
  std::fill(out, out + per * d, 0.f);
  for (int64_t p = 0; p < s; ++p)
    for (int64_t e = 0; e < per; ++e) add_scaled_bf16(out + e * d, v + p * d, scores[e * s + p], d);
  for (int64_t i = 0; i < per * d; ++i) out[i] = bf16_round(out[i]);
}

// Part of one key/value head's attention for the register path (d = 64, up to 4 query heads; a row of k or v is
// four registers, read once for every query head, the outputs kept in registers): over cached rows [begin, end),
// each query head's highest scaled score, Σ exp(score − it) and Σ exp(score − it)·v, unnormalised: what parts need
// to be merged into the whole softmax exactly (the online softmax of FlashAttention). Why parts: a head split in
// two keeps both cores busy when the key/value heads do not divide evenly between them (3 here).
struct Partial {
  float top[4], total[4];
  float acc[4][64];
};

inline void attend_part(const float* q, const uint16_t* k, const uint16_t* v, int64_t begin, int64_t end,
                        int64_t s, int64_t per, float scale, float* scores, Partial& part) {
  __m512 qs[4][4];
  for (int64_t e = 0; e < per; ++e)
    for (int c = 0; c < 4; ++c) qs[e][c] = _mm512_mul_ps(_mm512_loadu_ps(q + e * 64 + c * 16), _mm512_set1_ps(scale));
  for (int64_t e = 0; e < per; ++e) part.top[e] = -INFINITY;
  for (int64_t p = begin; p < end; ++p) {
    const uint16_t* kp = k + p * 64;
    const __m512 k0 = load16_bf16(kp), k1 = load16_bf16(kp + 16), k2 = load16_bf16(kp + 32), k3 = load16_bf16(kp + 48);
    for (int64_t e = 0; e < per; ++e) {
      const __m512 a = _mm512_fmadd_ps(qs[e][0], k0, _mm512_mul_ps(qs[e][1], k1));
      const __m512 b = _mm512_fmadd_ps(qs[e][2], k2, _mm512_mul_ps(qs[e][3], k3));
      const float score = _mm512_reduce_add_ps(_mm512_add_ps(a, b));
      scores[e * s + p] = score;
      part.top[e] = std::max(part.top[e], score);
    }
  }
  __m512 acc[4][4];
  for (int64_t e = 0; e < per; ++e) {
    float* row = scores + e * s;
    const __m512 shift = _mm512_set1_ps(part.top[e]);
    __m512 sum = _mm512_setzero_ps();
    int64_t p = begin;
    for (; p + 16 <= end; p += 16) {
      const __m512 w = exp16(_mm512_sub_ps(_mm512_loadu_ps(row + p), shift));
      _mm512_storeu_ps(row + p, w);
      sum = _mm512_add_ps(sum, w);
    }
    part.total[e] = _mm512_reduce_add_ps(sum);
    for (; p < end; ++p) part.total[e] += (row[p] = std::exp(row[p] - part.top[e]));
    for (int c = 0; c < 4; ++c) acc[e][c] = _mm512_setzero_ps();
  }
  for (int64_t p = begin; p < end; ++p) {
    const uint16_t* vp = v + p * 64;
    const __m512 v0 = load16_bf16(vp), v1 = load16_bf16(vp + 16), v2 = load16_bf16(vp + 32), v3 = load16_bf16(vp + 48);
    for (int64_t e = 0; e < per; ++e) {
      const __m512 w = _mm512_set1_ps(scores[e * s + p]);
      acc[e][0] = _mm512_fmadd_ps(w, v0, acc[e][0]);
      acc[e][1] = _mm512_fmadd_ps(w, v1, acc[e][1]);
      acc[e][2] = _mm512_fmadd_ps(w, v2, acc[e][2]);
      acc[e][3] = _mm512_fmadd_ps(w, v3, acc[e][3]);
    }
  }
  for (int64_t e = 0; e < per; ++e)
    for (int c = 0; c < 4; ++c) _mm512_storeu_ps(part.acc[e] + c * 16, acc[e][c]);
}

// A head's ``n`` parts merged: out (per, 64) = (Σ_h e^{top_h − top} acc_h) / (Σ_h e^{top_h − top} total_h),
// rounded to bfloat16
inline void merge_parts(const Partial* parts, int64_t n, int64_t per, float* out) {
  for (int64_t e = 0; e < per; ++e) {
    float top = -INFINITY;
    for (int64_t h = 0; h < n; ++h) top = std::max(top, parts[h].top[e]);
    float weights[2], total = 0.f;
    for (int64_t h = 0; h < n; ++h) total += (weights[h] = std::exp(parts[h].top[e] - top)) * parts[h].total[e];
    const float inverse = 1.f / total;
    for (int i = 0; i < 64; ++i) {
      float sum = 0.f;
      for (int64_t h = 0; h < n; ++h) sum += weights[h] * parts[h].acc[e][i];
      out[e * 64 + i] = bf16_round(sum * inverse);
    }
  }
}

// out_i = bf16(silu(gate_i) · up_i): the down product's input, rounded once as the compiled layer rounds it
inline void silu_times(const float* gate, const float* up, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 a = _mm512_loadu_ps(gate + i);
    const __m512 silu = _mm512_div_ps(a, _mm512_add_ps(_mm512_set1_ps(1.f), exp16(_mm512_sub_ps(_mm512_setzero_ps(), a))));
    _mm512_storeu_ps(out + i, silu);
    for (int k = 0; k < 16; ++k) out[i + k] = bf16_round(out[i + k] * up[i + k]);
  }
  for (; i < n; ++i) out[i] = bf16_round(gate[i] / (1.f + std::exp(-gate[i])) * up[i]);
}

// HF's RMSNorm, float32 inside and times the weight, rounded once where it is stored (the product's input): the
// compiled layer drops the cast in between (rounded there too, the copy's top-16 logits erred 0.130 from the target's
// instead of 0.110)
void rms_norm_row(const float* x, const uint16_t* weight, int64_t n, float eps, float* out) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float r = 1.f / std::sqrt(static_cast<float>(sum / n) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_round(bf16_value(weight[i]) * (x[i] * r));
}

// one product of a row already in bfloat16 values: (I) -> (O), rounded to bfloat16 as the kernel's output is
void product_row(const float* x, const at::Tensor& codes, const at::Tensor& dm, float* out) {
  const int64_t outputs = codes.size(0) * 16, inputs = codes.size(1) * 8;
  gemm_into(x, codes.data_ptr<uint8_t>(), reinterpret_cast<const uint16_t*>(dm.data_ptr<at::Half>()), 1, inputs,
            outputs, out);
  int64_t i = 0;  // outputs come by 16 (the layout's blocks)
  for (; i + 16 <= outputs; i += 16) {
    const __m512i u = _mm512_castps_si512(_mm512_loadu_ps(out + i));
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    const __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7FFF)));
    _mm512_storeu_ps(out + i, _mm512_castsi512_ps(_mm512_and_si512(r, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u)))));
  }
  for (; i < outputs; ++i) out[i] = bf16_round(out[i]);
}

// q·cos + rotate_half(q)·sin for one head of size d, rounded to bfloat16 where it is stored (the keys)
inline void rotate(float* x, const float* cos, const float* sin, int64_t d, bool stored) {
  const int64_t half = d / 2;
  float rotated[256];
  for (int64_t i = 0; i < half; ++i) rotated[i] = -x[half + i];
  for (int64_t i = half; i < d; ++i) rotated[i] = x[i - half];
  for (int64_t i = 0; i < d; ++i) x[i] = x[i] * cos[i] + rotated[i] * sin[i];
  if (stored)
    for (int64_t i = 0; i < d; ++i) x[i] = bf16_round(x[i]);
}

// The copy's LM head on one row (engine.lowbit's ShortlistHead, the same function): HF's final RMSNorm as the
// Python norm rounds it (to bfloat16 after the normalisation, again after the weight), every token's logit from the
// 4-bit pass (bfloat16), then the ``shortlist`` highest scored again in float32 from the model's own head rows.
void shortlist_head(const float* x, int64_t h, const uint16_t* norm, float eps, const at::Tensor& codes,
                    const at::Tensor& dm, const at::Tensor& exact, int64_t shortlist, float* logits) {
  std::vector<float> normed(h);
  double sum = 0.0;
  for (int64_t i = 0; i < h; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float r = 1.f / std::sqrt(static_cast<float>(sum / h) + eps);
  for (int64_t i = 0; i < h; ++i) normed[i] = bf16_round(bf16_value(norm[i]) * bf16_round(x[i] * r));
  product_row(normed.data(), codes, dm, logits);
  // the top ``shortlist`` (ties to the lower id): a scan that looks closer only where a logit beats the lowest kept
  const int64_t vocab = codes.size(0) * 16, k = std::min(shortlist, vocab);
  std::vector<std::pair<float, int64_t>> top;  // kept sorted, highest first
  top.reserve(k + 1);
  float bar = -INFINITY;
  const auto before = [](const std::pair<float, int64_t>& a, const std::pair<float, int64_t>& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  const auto full = [&] { return static_cast<int64_t>(top.size()) == k; };
  const auto above = [&](int64_t at) {  // which of the 16 logits from ``at`` beat the lowest kept
    return _mm512_cmp_ps_mask(_mm512_loadu_ps(logits + at), _mm512_set1_ps(bar), _CMP_GT_OQ);
  };
  const auto offer = [&](int64_t i) {
    const std::pair<float, int64_t> candidate{logits[i], i};
    if (full() && !(candidate.first > bar)) return;
    top.insert(std::upper_bound(top.begin(), top.end(), candidate, before), candidate);
    if (static_cast<int64_t>(top.size()) > k) top.pop_back();
    if (full()) bar = top.back().first;
  };
  int64_t i = 0;
  for (; i + 16 <= vocab; i += 16) {
    for (__mmask16 over = full() ? above(i) : 0xFFFF; over;) {
      offer(i + __builtin_ctz(over));
      over &= over - 1;
      if (full()) over &= above(i);  // the bar may have risen: the rest of these 16 face it again
    }
  }
  for (; i < vocab; ++i) offer(i);
  for (const auto& [value, id] : top) {
    if (exact.scalar_type() == at::kFloat) {  // the model's rows: float32, or bfloat16 for a bfloat16 target
      const float* row = exact.data_ptr<float>() + id * h;
      __m512 acc = _mm512_setzero_ps();
      int64_t j = 0;
      for (; j + 16 <= h; j += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(normed.data() + j), _mm512_loadu_ps(row + j), acc);
      float dot = _mm512_reduce_add_ps(acc);
      for (; j < h; ++j) dot += normed[j] * row[j];
      logits[id] = dot;
    } else {
      logits[id] = dot_bf16(normed.data(), reinterpret_cast<const uint16_t*>(exact.data_ptr<at::BFloat16>()) + id * h, h);
    }
  }
}

constexpr int64_t SPLIT_FROM = 64;  // cached rows from which a head's attention is split in two (below: too little)

// A one-token step of the whole copy, from its token to its logits. ``embedding`` (V, H) float32 or bfloat16: the
// model's own lookup, whose row for ``token`` is rounded to bfloat16 (the copy's activations); ``weights`` 10 a layer
// (qkv, o, gate_up, down as codes and dm; the two norm weights (H) bfloat16); ``keys``/``values`` each layer's KV
// buffers (1, G, C, D) bfloat16 with C > past, written at ``past``; cos, sin (D) of the new position; ``head`` the
// final norm's weight (H) bfloat16, the head's 4-bit codes and dm, and the model's rows (V, H) float32 or bfloat16,
// ``shortlist`` of them scored exactly in float32. -> [logits (1, V) float32, then every layer's keys and values as views of their buffers
// over the past + 1 positions now held: what the cache's layers hold next]
std::vector<at::Tensor> step(const at::Tensor& embedding, int64_t token, at::TensorList weights, at::TensorList keys,
                             at::TensorList values, int64_t past, const at::Tensor& cos, const at::Tensor& sin,
                             double eps, double scaling, int64_t heads, at::TensorList head, int64_t shortlist) {
  const int64_t layers = static_cast<int64_t>(keys.size());
  TORCH_CHECK(layers > 0 && static_cast<int64_t>(values.size()) == layers &&
                  static_cast<int64_t>(weights.size()) == 10 * layers, "step: 10 weights and a KV pair a layer");
  TORCH_CHECK(embedding.dim() == 2 && embedding.is_contiguous() && 0 <= token && token < embedding.size(0) &&
                  (embedding.scalar_type() == at::kFloat || embedding.scalar_type() == at::kBFloat16),
              "step: an embedding (V, H) float32 or bfloat16, contiguous, and a token in it");
  const int64_t h = embedding.size(1);
  const int64_t g = keys[0].size(1), capacity = keys[0].size(2), d = keys[0].size(3);
  TORCH_CHECK(d <= 256 && d % 2 == 0 && heads % g == 0 && past < capacity && cos.numel() == d && sin.numel() == d,
              "step: head size, heads or cache room");
  TORCH_CHECK(head.size() == 4 && (head[3].scalar_type() == at::kFloat || head[3].scalar_type() == at::kBFloat16) &&
                  head[3].is_contiguous() && head[3].size(1) == h && head[1].size(0) * 16 == head[3].size(0),
              "step: the head's norm weight, 4-bit codes and dm, and its rows (V, H) float32 or bfloat16");
  const int64_t inner = weights[4].size(0) * 16 / 2, s = past + 1, per = heads / g;
  std::vector<float> x(h), normed(h), qkv((heads + 2 * g) * d), attended(heads * d), projected(h);
  std::vector<float> gate_up(2 * inner), mixed(inner), scores(heads * s);
  std::vector<float> c(d), sn(d);
  std::vector<Partial> parts(2 * g);
  const at::Tensor cf = cos.to(at::kFloat).contiguous(), sf = sin.to(at::kFloat).contiguous();
  for (int64_t i = 0; i < d; ++i) c[i] = cf.data_ptr<float>()[i], sn[i] = sf.data_ptr<float>()[i];
  if (embedding.scalar_type() == at::kFloat) {
    const float* row = embedding.data_ptr<float>() + token * h;
    for (int64_t i = 0; i < h; ++i) x[i] = bf16_round(row[i]);
  } else {
    const auto* row = reinterpret_cast<const uint16_t*>(embedding.data_ptr<at::BFloat16>()) + token * h;
    for (int64_t i = 0; i < h; ++i) x[i] = bf16_value(row[i]);
  }
  for (int64_t l = 0; l < layers; ++l) {
    const at::Tensor* w = weights.data() + 10 * l;
    const auto* norm_in = reinterpret_cast<const uint16_t*>(w[8].data_ptr<at::BFloat16>());
    const auto* norm_post = reinterpret_cast<const uint16_t*>(w[9].data_ptr<at::BFloat16>());
    TORCH_CHECK(keys[l].is_contiguous() && values[l].is_contiguous() && keys[l].size(2) == capacity &&
                    values[l].size(2) == capacity && keys[l].scalar_type() == at::kBFloat16 &&
                    values[l].scalar_type() == at::kBFloat16,
                "step: contiguous bfloat16 KV buffers of one capacity");
    auto* k_cache = reinterpret_cast<uint16_t*>(keys[l].data_ptr<at::BFloat16>());
    auto* v_cache = reinterpret_cast<uint16_t*>(values[l].data_ptr<at::BFloat16>());
    rms_norm_row(x.data(), norm_in, h, static_cast<float>(eps), normed.data());
    product_row(normed.data(), w[0], w[1], qkv.data());
    float* q = qkv.data();
    float* k = q + heads * d;
    float* v = k + g * d;
    for (int64_t n = 0; n < heads; ++n) rotate(q + n * d, c.data(), sn.data(), d, false);
    for (int64_t j = 0; j < g; ++j) {
      rotate(k + j * d, c.data(), sn.data(), d, true);
      for (int64_t i = 0; i < d; ++i) {
        k_cache[(j * capacity + past) * d + i] = bf16_bits(k[j * d + i]);
        v_cache[(j * capacity + past) * d + i] = bf16_bits(v[j * d + i]);
      }
    }
    // softmax(q kᵀ · scaling) v over the s positions; a key/value head's query heads read each cached row once
    // (the key/value heads on both threads: the cache is read from memory, the weights having streamed through)
    if (d == 64 && per <= 4) {  // the register path; from SPLIT_FROM rows each head in two halves, merged after
      const int64_t n = s >= SPLIT_FROM ? 2 : 1;
      at::parallel_for(0, n * g, 1, [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
          const int64_t j = t / n, half = t % n;
          attend_part(q + j * per * d, k_cache + j * capacity * d, v_cache + j * capacity * d, half * s / n,
                      (half + 1) * s / n, s, per, static_cast<float>(scaling), scores.data() + j * per * s, parts[t]);
        }
      });
      for (int64_t j = 0; j < g; ++j) merge_parts(parts.data() + j * n, n, per, attended.data() + j * per * d);
    } else {
      at::parallel_for(0, g, 1, [&](int64_t begin, int64_t end) {
        for (int64_t j = begin; j < end; ++j) {
          attend(q + j * per * d, k_cache + j * capacity * d, v_cache + j * capacity * d, s, d, per,
                 static_cast<float>(scaling), scores.data() + j * per * s, attended.data() + j * per * d);
        }
      });
    }
    product_row(attended.data(), w[2], w[3], projected.data());
    for (int64_t i = 0; i < h; ++i) x[i] += projected[i];  // kept in float32 to the layer's end, as compiled
    rms_norm_row(x.data(), norm_post, h, static_cast<float>(eps), normed.data());
    product_row(normed.data(), w[4], w[5], gate_up.data());
    silu_times(gate_up.data(), gate_up.data() + inner, inner, mixed.data());
    product_row(mixed.data(), w[6], w[7], projected.data());
    for (int64_t i = 0; i < h; ++i) x[i] = bf16_round(x[i] + projected[i]);
  }
  std::vector<at::Tensor> out;
  out.reserve(1 + 2 * layers);
  out.push_back(at::empty({1, head[3].size(0)}, embedding.options().dtype(at::kFloat)));
  shortlist_head(x.data(), h, reinterpret_cast<const uint16_t*>(head[0].data_ptr<at::BFloat16>()),
                 static_cast<float>(eps), head[1], head[2], head[3], shortlist, out[0].data_ptr<float>());
  for (int64_t l = 0; l < layers; ++l) out.push_back(keys[l].narrow(2, 0, s));
  for (int64_t l = 0; l < layers; ++l) out.push_back(values[l].narrow(2, 0, s));
  return out;
}

}  // namespace

TORCH_LIBRARY(explorer_q4, m) {
  m.def("gemm(Tensor x, Tensor codes, Tensor dm) -> Tensor");
  m.def("step(Tensor embedding, int token, Tensor[] weights, Tensor[] keys, Tensor[] values, int past, Tensor cos, "
        "Tensor sin, float eps, float scaling, int heads, Tensor[] head, int shortlist) -> Tensor[]");
}
TORCH_LIBRARY_IMPL(explorer_q4, CPU, m) {
  m.impl("gemm", gemm);
  m.impl("step", step);
}
