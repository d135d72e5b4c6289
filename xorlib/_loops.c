/* The package's inner loops in C, called through ctypes by xorlib/_kernels.py: the streamed one
 * step's look-up sums and byte histograms on packed codes, the codes' pairing (xorlib/_packed.py), and
 * the authors' model's soft counts and their histogram (xorlib/learners/_authors_core.py).
 *
 * Each does the arithmetic of the tensor calls it replaces, in the same order, so the results are the
 * same bit for bit (tests/core/test_kernels.py): additions only (no multiply that a compiler could fuse
 * into a multiply-add), and byte copies. Arrays come C-contiguous, but for byte indices with a row stride.
 * Built by setuptools as an optional extension (setup.py): where it is missing, the tensor calls run.
 * Plain C, no Python headers: the file is only ever loaded by ctypes, never imported.
 */
#include <stdint.h>
#include <string.h>

/* out[s, r] (=|+=) the sum over j of tables[s, first_group + j, index[j, r]],
 * added in group order: group by group over all the rows, so that each group's
 * 256-entry table stays in cache. */
void xorlib_lookup_sums(const double *tables, int64_t slots, int64_t table_groups,
                        const uint8_t *index, int64_t groups, int64_t rows,
                        int64_t index_stride, double *out, int64_t out_stride,
                        int64_t first_group, int fresh) {
    for (int64_t slot = 0; slot < slots; ++slot) {
        double *sums = out + slot * out_stride;
        const double *own = tables + slot * table_groups * 256;
        int64_t group = 0;
        if (fresh) {
            const double *table = own + first_group * 256;
            for (int64_t row = 0; row < rows; ++row) sums[row] = table[index[row]];
            group = 1;
        }
        for (; group < groups; ++group) {
            const double *table = own + (first_group + group) * 256;
            const uint8_t *bytes = index + group * index_stride;
            for (int64_t row = 0; row < rows; ++row) sums[row] += table[bytes[row]];
        }
    }
}

/* bins[c, g, index[g, r], p] += weights[c * width + p, r], each bin adding in
 * the order of the rows; bins (columns, groups, 256, width), width 1 or 2 (a
 * complex bin as its two real parts). */
void xorlib_histogram(double *bins, int64_t columns, int64_t groups, int64_t width,
                      const uint8_t *index, int64_t rows, int64_t index_stride,
                      const double *weights, int64_t weights_stride) {
    for (int64_t column = 0; column < columns; ++column) {
        const double *first = weights + width * column * weights_stride;
        const double *second = first + (width - 1) * weights_stride;
        for (int64_t group = 0; group < groups; ++group) {
            double *target = bins + (column * groups + group) * 256 * width;
            const uint8_t *bytes = index + group * index_stride;
            if (width == 2) {
                for (int64_t row = 0; row < rows; ++row) {
                    double *bin = target + 2 * bytes[row];
                    bin[0] += first[row];
                    bin[1] += second[row];
                }
            } else {
                for (int64_t row = 0; row < rows; ++row)
                    target[bytes[row]] += first[row];
            }
        }
    }
}

/* out[j] = source[n - 1 - j] ^ flip for j < n: eight bytes at a time (one word read
 * from the end, byte-swapped, xored with the repeated flip), the rest one by one. */
static void reversed_xor(const uint8_t *source, int64_t n, uint8_t flip, uint8_t *out) {
    const uint64_t mask = 0x0101010101010101ULL * flip;
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        uint64_t word;
        memcpy(&word, source + n - j - 8, 8);
        word = __builtin_bswap64(word) ^ mask;
        memcpy(out + j, &word, 8);
    }
    for (; j < n; ++j) out[j] = source[n - 1 - j] ^ flip;
}

/* The runs [0, mu] and [mu + 1, rows) of a paired column: the lengths of their first
 * halves, which determine the rest (mu odd, rows even). */
static void run_halves(int64_t mu, int64_t rows, int64_t *first, int64_t *second) {
    *first = (mu + 1) / 2;
    *second = (rows - mu - 1) / 2;
}

/* Pair each column in place: the second half of each run becomes the flipped mirror
 * image of its first half (xorlib._packed._pair_columns). */
void xorlib_pair_columns(uint8_t *columns, int64_t groups, int64_t rows, int64_t stride,
                         const int64_t *mu) {
    for (int64_t group = 0; group < groups; ++group) {
        uint8_t *column = columns + group * stride;
        int64_t m = mu[group], first, second;
        run_halves(m, rows, &first, &second);
        reversed_xor(column, first, 255, column + first);
        reversed_xor(column + m + 1, second, 255, column + m + 1 + second);
    }
}

/* The halves that determine the paired columns (xorlib._packed.half_columns). */
void xorlib_half_columns(const uint8_t *columns, int64_t stride, const int64_t *mu,
                         int64_t groups, int64_t rows, uint8_t *out, int64_t out_stride) {
    for (int64_t group = 0; group < groups; ++group) {
        const uint8_t *column = columns + group * stride;
        uint8_t *half = out + group * out_stride;
        int64_t m = mu[group], first, second;
        run_halves(m, rows, &first, &second);
        memcpy(half, column, first);
        memcpy(half + first, column + m + 1, second);
    }
}

/* The paired columns from their halves (xorlib._packed.whole_columns); group `last`
 * flips by `last_flip`, the mask of its used bits, the others by 255. */
void xorlib_whole_columns(const uint8_t *halves, int64_t halves_stride, const int64_t *mu,
                          int64_t groups, int64_t last, uint8_t last_flip, int64_t rows,
                          uint8_t *out, int64_t out_stride) {
    for (int64_t group = 0; group < groups; ++group) {
        const uint8_t *head = halves + group * halves_stride;
        uint8_t *column = out + group * out_stride;
        uint8_t flip = group == last ? last_flip : 255;
        int64_t m = mu[group], first, second;
        run_halves(m, rows, &first, &second);
        memcpy(column, head, first);
        reversed_xor(head, first, flip, column + first);
        memcpy(column + m + 1, head + first, second);
        reversed_xor(head + first, second, flip, column + m + 1 + second);
    }
}

/* The authors' model (xorlib/learners/_authors_core.py), in float32: soft counts
 * out[r, s] = sum over g of tables[r, g, bytes[r, g, s]], added in group order as
 * torch's sum over the groups adds them; tables (runs, groups, 256), bytes
 * (runs, groups, n), out (runs, n). */
void xorlib_count_sums(const float *tables, int64_t runs, int64_t groups,
                       const uint8_t *bytes, int64_t n, float *out) {
    for (int64_t run = 0; run < runs; ++run) {
        float *sums = out + run * n;
        for (int64_t group = 0; group < groups; ++group) {
            const float *table = tables + (run * groups + group) * 256;
            const uint8_t *own = bytes + (run * groups + group) * n;
            if (group == 0) {
                for (int64_t s = 0; s < n; ++s) sums[s] = table[own[s]];
            } else {
                for (int64_t s = 0; s < n; ++s) sums[s] += table[own[s]];
            }
        }
    }
}

/* bins[r, g, bytes[r, g, s]] += weights[r, s], each bin adding in the order of s,
 * as scatter_add_ adds them (float32; bins (runs, groups, 256)). */
void xorlib_count_histogram(float *bins, int64_t runs, int64_t groups,
                            const uint8_t *bytes, int64_t n, const float *weights) {
    for (int64_t run = 0; run < runs; ++run) {
        const float *weight = weights + run * n;
        for (int64_t group = 0; group < groups; ++group) {
            float *target = bins + (run * groups + group) * 256;
            const uint8_t *own = bytes + (run * groups + group) * n;
            for (int64_t s = 0; s < n; ++s) target[own[s]] += weight[s];
        }
    }
}
