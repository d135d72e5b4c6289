/* The package's inner loops in C, called through ctypes by xorlib/_kernels.py: the streamed one
 * step's look-up sums, screen of partial scores and byte histograms on packed codes, the codes'
 * transposition and pairing (xorlib/_packed.py), and the authors' model's soft counts and their histogram
 * (xorlib/learners/_authors_core.py).
 *
 * Each does the arithmetic of the tensor calls it replaces, in the same order, so the results are the
 * same bit for bit (tests/core/test_kernels.py): additions and comparisons, byte copies, and the squares
 * the tensor calls take with torch.mul (each one rounded product, stored before it is added; setup.py also
 * builds without multiply-add contraction). What the loops change is how memory is read: eight bytes as
 * one word, running sums in registers, two tables' entries side by side, a tile of weights that stays in
 * the first-level cache, several tensor calls' passes in one.
 * Arrays come C-contiguous, but for byte indices with a row stride.
 * Built by setuptools as an optional extension (setup.py): where it is missing, the tensor calls run.
 * Plain C, no Python headers: the file is only ever loaded by ctypes, never imported.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The digest of this file that setup.py built it from: xorlib/_kernels.py uses the library only where it is
 * the digest of the _loops.c beside it (a library built from an older file is not called). */
#ifndef XORLIB_SOURCE
#define XORLIB_SOURCE "unknown"
#endif
const char *xorlib_source(void) { return XORLIB_SOURCE; }
#ifdef __SSE2__
#include <emmintrin.h> /* the transposition's byte shuffles (every x86-64 has them) */
#endif

/* Byte k of a word of eight bytes read from memory: the byte at address + k, on either byte order. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define BYTE_AT(word, k) ((unsigned)((word) >> (56 - 8 * (k))) & 255u)
#else
#define BYTE_AT(word, k) ((unsigned)((word) >> (8 * (k))) & 255u)
#endif

static inline uint64_t word_at(const uint8_t *bytes) {
    uint64_t word;
    memcpy(&word, bytes, 8);
    return word;
}

/* One slot: sums[r] (=|+=) table_0[index[0, r]] + table_1[index[1, r]] + ..., eight rows at a time in
 * registers (their bytes read as one word per group), each row's terms added in group order. */
static void lookup_one(const double *table, const uint8_t *index, int64_t groups, int64_t rows,
                       int64_t stride, double *sums, int fresh) {
    int64_t row = 0;
    for (; row + 8 <= rows; row += 8) {
        double acc[8];
        int64_t group = 0;
        if (fresh) {
            uint64_t word = word_at(index + row);
            for (int k = 0; k < 8; ++k) acc[k] = table[BYTE_AT(word, k)];
            group = 1;
        } else {
            for (int k = 0; k < 8; ++k) acc[k] = sums[row + k];
        }
        for (; group < groups; ++group) {
            const double *own = table + group * 256;
            uint64_t word = word_at(index + group * stride + row);
            for (int k = 0; k < 8; ++k) acc[k] += own[BYTE_AT(word, k)];
        }
        for (int k = 0; k < 8; ++k) sums[row + k] = acc[k];
    }
    for (; row < rows; ++row) {
        double acc = fresh ? table[index[row]] : sums[row];
        for (int64_t group = fresh ? 1 : 0; group < groups; ++group)
            acc += table[group * 256 + index[group * stride + row]];
        sums[row] = acc;
    }
}

/* Two slots' entries side by side: one load and one addition (of both parts, each the scalar one) per byte. */
typedef double pair_of_doubles __attribute__((vector_size(16), aligned(8)));

/* Blocks with fewer rows than this take lookup_one per slot: interleaving two slots' tables would cost more. */
#define INTERLEAVE_FROM 256

/* Groups whose interleaved tables (4 KiB each) are read together: 32 KiB, within the first-level cache. */
#define PAIRED_GROUPS 8

/* The two slots' tables of groups [0, groups) interleaved into pairs (groups, 256): a buffer the caller frees,
 * NULL where memory is short (the caller then reads the tables apart). */
static pair_of_doubles *interleave(const double *table, const double *other, int64_t groups) {
    pair_of_doubles *pairs = malloc((size_t)groups * 256 * sizeof(pair_of_doubles));
    if (pairs)
        for (int64_t entry = 0; entry < groups * 256; ++entry) {
            pairs[entry][0] = table[entry];
            pairs[entry][1] = other[entry];
        }
    return pairs;
}

/* Two slots from interleaved tables, eight rows at a time, each slot's terms added as lookup_one adds them. */
static void lookup_pairs(const pair_of_doubles *pairs, const uint8_t *index, int64_t groups, int64_t rows,
                         int64_t stride, double *sums, double *other_sums, int fresh) {
    int64_t row = 0;
    for (; row + 8 <= rows; row += 8) {
        pair_of_doubles acc[8];
        int64_t group = 0;
        if (fresh) {
            uint64_t word = word_at(index + row);
            for (int k = 0; k < 8; ++k) acc[k] = pairs[BYTE_AT(word, k)];
            group = 1;
        } else {
            for (int k = 0; k < 8; ++k) acc[k] = (pair_of_doubles){sums[row + k], other_sums[row + k]};
        }
        for (; group < groups; ++group) {
            const pair_of_doubles *own = pairs + group * 256;
            uint64_t word = word_at(index + group * stride + row);
            for (int k = 0; k < 8; ++k) acc[k] += own[BYTE_AT(word, k)];
        }
        for (int k = 0; k < 8; ++k) {
            sums[row + k] = acc[k][0];
            other_sums[row + k] = acc[k][1];
        }
    }
    for (; row < rows; ++row) { /* the last rows: each slot's terms in group order, as above */
        pair_of_doubles acc = fresh ? pairs[index[row]] : (pair_of_doubles){sums[row], other_sums[row]};
        for (int64_t group = fresh ? 1 : 0; group < groups; ++group)
            acc += pairs[group * 256 + index[group * stride + row]];
        sums[row] = acc[0];
        other_sums[row] = acc[1];
    }
}

/* Two slots reading each byte once: interleaved (lookup_pairs), PAIRED_GROUPS groups at a time, where the block
 * is large enough and memory allows, else lookup_one for each. Each row's terms are added in group order
 * either way. */
static void lookup_two(const double *table, const double *other, const uint8_t *index, int64_t groups,
                       int64_t rows, int64_t stride, double *sums, double *other_sums, int fresh) {
    pair_of_doubles *pairs = rows >= INTERLEAVE_FROM ? interleave(table, other, groups) : NULL;
    if (pairs) { /* the groups a few at a time, their tables in the first-level cache; the sums continue in memory */
        for (int64_t first = 0; first < groups; first += PAIRED_GROUPS) {
            int64_t count = groups - first < PAIRED_GROUPS ? groups - first : PAIRED_GROUPS;
            lookup_pairs(pairs + first * 256, index + first * stride, count, rows, stride, sums, other_sums,
                         first == 0 ? fresh : 0);
        }
        free(pairs);
        return;
    }
    lookup_one(table, index, groups, rows, stride, sums, fresh);
    lookup_one(other, index, groups, rows, stride, other_sums, fresh);
}

/* out[s, r] (=|+=) the sum over j of tables[s, first_group + j, index[j, r]], each row's terms
 * added in group order (fresh: the first term is stored, not added to out); slots two at a time. */
void xorlib_lookup_sums(const double *tables, int64_t slots, int64_t table_groups,
                        const uint8_t *index, int64_t groups, int64_t rows,
                        int64_t index_stride, double *out, int64_t out_stride,
                        int64_t first_group, int fresh) {
    int64_t slot = 0;
    for (; slot + 2 <= slots; slot += 2) {
        const double *table = tables + (slot * table_groups + first_group) * 256;
        lookup_two(table, table + table_groups * 256, index, groups, rows, index_stride, out + slot * out_stride,
                   out + (slot + 1) * out_stride, fresh);
    }
    if (slot < slots)
        lookup_one(tables + (slot * table_groups + first_group) * 256, index, groups, rows, index_stride,
                   out + slot * out_stride, fresh);
}

/* The screen of a row by one head: its partial score plus the most the other groups can add (p + offset), or,
 * for a negated query, minus its partial score plus the most (offset - p): one addition, as the tensor calls. */
static inline __attribute__((always_inline)) double screen_bound(double p, double offset, int negate) {
    return negate ? offset - p : p + offset;
}

static inline __attribute__((always_inline)) int64_t screen_rows(const double *p0, const double *p1, double o0,
                                                                 double o1, double t0, double t1, int negate0,
                                                                 int negate1, int64_t rows, int64_t *out) {
    int64_t found = 0;
    for (int64_t row = 0; row < rows; ++row) {
        int hit = (screen_bound(p0[row], o0, negate0) >= t0) | (screen_bound(p1[row], o1, negate1) >= t1);
        out[found] = row; /* written always, kept where hit: no branch */
        found += hit;
    }
    return found;
}

/* The rows r (in order, into out) where some head h has bound_h(partial[slot_h, r]) >= threshold_h, for two
 * heads (one head: pass it twice; a negated head: negate_h); returns how many. The rows a partial score can
 * still take to the top (xorlib/_stream.py, top_scores), with the tensor calls' additions and comparisons. */
int64_t xorlib_screen(const double *partial, int64_t stride, int64_t rows, int64_t slot0, int64_t slot1,
                      int negate0, int negate1, double o0, double o1, double t0, double t1, int64_t *out) {
    const double *p0 = partial + slot0 * stride, *p1 = partial + slot1 * stride;
    if (!negate0 && !negate1) return screen_rows(p0, p1, o0, o1, t0, t1, 0, 0, rows, out);
    if (!negate0 && negate1) return screen_rows(p0, p1, o0, o1, t0, t1, 0, 1, rows, out);
    if (negate0 && !negate1) return screen_rows(p0, p1, o0, o1, t0, t1, 1, 0, rows, out);
    return screen_rows(p0, p1, o0, o1, t0, t1, 1, 1, rows, out);
}

/* Rows of weights histogrammed together: two columns of this many doubles, interleaved, stay in the
 * first-level cache while every group's bins take them. */
#define HISTOGRAM_ROWS 2048

/* HISTOGRAM_ROWS, for xorlib._kernels.HISTOGRAM_ROWS to be checked against (tests/core/test_kernels.py). */
int64_t xorlib_histogram_rows(void) { return HISTOGRAM_ROWS; }


/* bins[g, index[g, r]] += (first[r], second[r]) for the rows of one tile, eight at a time. */
static void histogram_pairs(pair_of_doubles *bins, int64_t groups, const uint8_t *index, int64_t stride,
                            const pair_of_doubles *tile, int64_t rows) {
    for (int64_t group = 0; group < groups; ++group) {
        pair_of_doubles *target = bins + group * 256;
        const uint8_t *bytes = index + group * stride;
        int64_t row = 0;
        for (; row + 8 <= rows; row += 8) {
            uint64_t word = word_at(bytes + row);
            for (int k = 0; k < 8; ++k) target[BYTE_AT(word, k)] += tile[row + k];
        }
        for (; row < rows; ++row) target[bytes[row]] += tile[row];
    }
}

/* bins[c, g, index[g, r], p] += weights[c * width + p, r], each bin adding in the order of the rows;
 * bins (columns, groups, 256, width), width 1 or 2 (a complex bin as its two real parts). Rows go in
 * tiles, every group's bins taking a tile before the next: a bin belongs to one group, so its additions
 * keep the order of the rows. */
void xorlib_histogram(double *bins, int64_t columns, int64_t groups, int64_t width,
                      const uint8_t *index, int64_t rows, int64_t index_stride,
                      const double *weights, int64_t weights_stride) {
    pair_of_doubles tile[HISTOGRAM_ROWS];
    for (int64_t column = 0; column < columns; ++column) {
        const double *first = weights + width * column * weights_stride;
        const double *second = first + (width - 1) * weights_stride;
        double *own = bins + column * groups * 256 * width;
        if (width == 1) {
            for (int64_t group = 0; group < groups; ++group) {
                const uint8_t *bytes = index + group * index_stride;
                for (int64_t row = 0; row < rows; ++row) own[group * 256 + bytes[row]] += first[row];
            }
            continue;
        }
        for (int64_t start = 0; start < rows; start += HISTOGRAM_ROWS) {
            int64_t count = rows - start < HISTOGRAM_ROWS ? rows - start : HISTOGRAM_ROWS;
            for (int64_t row = 0; row < count; ++row) {
                tile[row][0] = first[start + row];
                tile[row][1] = second[start + row];
            }
            histogram_pairs((pair_of_doubles *)own, groups, index + start, index_stride, tile, count);
        }
    }
}

/* Rows of the four-column histogram taken at a time: their tile of four doubles per row (16 KiB) and one
 * group's bins (8 KiB) stay in the first-level cache. */
#define SQUARES_ROWS 512

/* SQUARES_ROWS, for xorlib._kernels.SQUARES_ROWS to be checked against (tests/core/test_kernels.py). */
int64_t xorlib_squares_rows(void) { return SQUARES_ROWS; }

/* A bin of four columns, added at once (each part's addition is the scalar one). */
typedef double four_doubles __attribute__((vector_size(32), aligned(8)));

/* Built by GCC for glibc on x86-64 (which has indirect functions), the four-column histogram comes twice, with
 * AVX2 (one 32-byte load, addition and store per bin) and without, and the loader picks what the CPU has; other
 * compilers and systems build it once, without. The arithmetic is the same IEEE additions and multiplications. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__GLIBC__)
#define BOTH_WIDTHS __attribute__((target_clones("avx2", "default")))
#else
#define BOTH_WIDTHS
#endif

/* bins[g, index[g, r], :] += (a_r, a_r * a_r, b_r, b_r * b_r), a = weights[0], b = weights[1] (row stride
 * weights_stride), bins (groups, 256, 4): the histograms of four columns, two of them squares, each bin adding
 * in the order of the rows, as the tensor calls (torch.mul, then scatter_add_ of complex pairs) add them. */
BOTH_WIDTHS
void xorlib_histogram_squares(double *bins, int64_t groups, const uint8_t *index, int64_t rows,
                              int64_t index_stride, const double *weights, int64_t weights_stride) {
    four_doubles tile[SQUARES_ROWS];
    const double *a = weights, *b = weights + weights_stride;
    for (int64_t start = 0; start < rows; start += SQUARES_ROWS) {
        int64_t count = rows - start < SQUARES_ROWS ? rows - start : SQUARES_ROWS;
        for (int64_t row = 0; row < count; ++row) {
            double x = a[start + row], y = b[start + row];
            tile[row] = (four_doubles){x, x * x, y, y * y};
        }
        for (int64_t group = 0; group < groups; ++group) {
            four_doubles *target = (four_doubles *)bins + group * 256;
            const uint8_t *bytes = index + group * index_stride + start;
            int64_t row = 0;
            for (; row + 8 <= count; row += 8) {
                uint64_t word = word_at(bytes + row);
                for (int k = 0; k < 8; ++k) target[BYTE_AT(word, k)] += tile[row + k];
            }
            for (; row < count; ++row) target[bytes[row]] += tile[row];
        }
    }
}

/* The codes' bytes: their transposition, pairing, halves and wholes. */
#ifdef __SSE2__
/* Sixteen rows of sixteen bytes (row stride src_stride) transposed: column c (c < columns) to
 * dst + c * dst_stride, sixteen bytes each. Four rounds of interleaving, of bytes, pairs, quads and eights. */
static void transpose_16(const uint8_t *src, int64_t src_stride, uint8_t *dst, int64_t dst_stride,
                         int64_t columns) {
    __m128i a[16], b[16];
    for (int i = 0; i < 16; ++i) a[i] = _mm_loadu_si128((const __m128i *)(src + i * src_stride));
    for (int i = 0; i < 8; ++i) { /* rows 2i, 2i + 1: columns 0-7, then 8-15 */
        b[2 * i] = _mm_unpacklo_epi8(a[2 * i], a[2 * i + 1]);
        b[2 * i + 1] = _mm_unpackhi_epi8(a[2 * i], a[2 * i + 1]);
    }
    for (int q = 0; q < 4; ++q) { /* rows 4q to 4q + 3: columns 0-3, 4-7, 8-11, 12-15 */
        const __m128i *in = b + 4 * q;
        a[4 * q] = _mm_unpacklo_epi16(in[0], in[2]);
        a[4 * q + 1] = _mm_unpackhi_epi16(in[0], in[2]);
        a[4 * q + 2] = _mm_unpacklo_epi16(in[1], in[3]);
        a[4 * q + 3] = _mm_unpackhi_epi16(in[1], in[3]);
    }
    for (int h = 0; h < 2; ++h) { /* rows 8h to 8h + 7: columns (0, 1), (2, 3), ..., (14, 15) */
        const __m128i *in = a + 8 * h;
        for (int j = 0; j < 4; ++j) {
            b[8 * h + 2 * j] = _mm_unpacklo_epi32(in[j], in[j + 4]);
            b[8 * h + 2 * j + 1] = _mm_unpackhi_epi32(in[j], in[j + 4]);
        }
    }
    for (int j = 0; j < 8; ++j) { /* all sixteen rows: columns 2j and 2j + 1 */
        if (2 * j < columns)
            _mm_storeu_si128((__m128i *)(dst + 2 * j * dst_stride), _mm_unpacklo_epi64(b[j], b[j + 8]));
        if (2 * j + 1 < columns)
            _mm_storeu_si128((__m128i *)(dst + (2 * j + 1) * dst_stride), _mm_unpackhi_epi64(b[j], b[j + 8]));
    }
}
#endif

/* out[g, r] = raw[r, g] for g < written: the block's bytes (rows, groups) as columns (groups, rows).
 * Sixteen rows by sixteen groups at a time where SSE2 is at hand (reading sixteen bytes of a row may
 * reach into the next one, never past the block), the rest byte by byte. */
void xorlib_transpose(const uint8_t *raw, int64_t rows, int64_t groups, int64_t written, uint8_t *out,
                      int64_t out_stride) {
    int64_t done = 0; /* rows transposed sixteen at a time */
#ifdef __SSE2__
    for (; done + 16 <= rows; done += 16) {
        int64_t first = 0;
        for (; first < written; first += 16) {
            if ((done + 15) * groups + first + 16 > rows * groups) break; /* would read past the block */
            transpose_16(raw + done * groups + first, groups, out + first * out_stride + done, out_stride,
                         written - first < 16 ? written - first : 16);
        }
        if (first < written) break; /* the last rows, byte by byte */
    }
#endif
    for (int64_t group = 0; group < written; ++group) {
        uint8_t *column = out + group * out_stride;
        for (int64_t row = done; row < rows; ++row) column[row] = raw[row * groups + group];
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

/* The bytes at rows `columns` of the paired columns from `first` on, read off their halves
 * (xorlib._packed.half_column_bytes): row c whose partner p = (mu - c) mod rows comes before it takes
 * p's byte, flipped. The halves keep each run's first half, rows [0, (mu + 1) / 2) and then rows from
 * mu + 1 on, so a kept row r > mu sits at r - (mu + 1) / 2. out is (groups - first, n), contiguous;
 * group `last` flips by `last_flip`, the others by 255. */
void xorlib_half_column_bytes(const uint8_t *halves, int64_t halves_stride, const int64_t *mu,
                              int64_t first, int64_t groups, int64_t last, uint8_t last_flip,
                              int64_t rows, const int64_t *columns, int64_t n, uint8_t *out) {
    for (int64_t group = first; group < groups; ++group) {
        const uint8_t *half = halves + group * halves_stride;
        uint8_t *found = out + (group - first) * n;
        uint8_t flip = group == last ? last_flip : 255;
        int64_t m = mu[group];
        for (int64_t i = 0; i < n; ++i) {
            int64_t row = columns[i], partner = (m - row) % rows;
            if (partner < 0) partner += rows;
            int flipped = row > partner;
            int64_t source = flipped ? partner : row;
            int64_t position = source <= m ? source : source - (m + 1) / 2;
            found[i] = half[position] ^ (flipped ? flip : 0);
        }
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
