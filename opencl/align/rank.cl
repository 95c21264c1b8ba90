/* Ranking of a chunk's scored windows, one work-item a read: the device twin of
 * bowmap.align.extend.extender._ranked (best_two with tie_breakers and places, rival_scores,
 * suboptimal_counts), its reference (the tests compare the two exactly); see that module for
 * what each value means and why.
 *
 * Read i (of `count`) has windows window_first[i] .. window_first[i + 1] - 1 (windows sorted
 * by read); its forward codes (0..4) are read_codes[read_first[i] .. read_first[i + 1]).
 * Window w:
 *   values[w], values[n + w], values[2n + w], values[3n + w]  (int, n = the windows):
 *       its score, the read end and the window end of its best alignment, its strand (1: reverse)
 *   start[w]   ulong: its first text position
 * Out, int rows of `count`: the best window (-1: none), its score (NO_SCORE: none), the best
 * score at another place (NO_SCORE: none), the alignments within `delta` of the best other than
 * it, each place counted once.
 *
 * A window's place (Places.estimated): its alignment ends at read_end and at start +
 * window_end, and spans score / match bases (at least 1, at most read_end) before them. Two
 * places are one alignment when on one strand their starts, ends or diagonals lie within
 * SAME_ALIGNMENT_BASES and both their read and text intervals share more than half of the
 * shorter (Places.same_as). SAME_ALIGNMENT_BASES and NO_SCORE come from the host (-D).
 */

typedef struct {
    int reverse;
    long read_start, read_end, text_start, text_end;
} place_t;

inline place_t place_of(__global const int *values, __global const ulong *start, uint n, uint w, int match)
{
    place_t p;
    long read_end = values[n + w];
    long span = (long)values[w] / match;  /* C truncates where Python floors: both <= 0 below 0, clipped to 1 */
    span = clamp(span, 1L, max(read_end, 1L));
    p.reverse = values[3 * n + w];
    p.read_end = read_end;
    p.read_start = read_end - span;
    p.text_end = (long)start[w] + values[2 * n + w];
    p.text_start = p.text_end - span;
    return p;
}

inline int shares_most(long start, long end, long other_start, long other_end)
{
    long shared = min(end, other_end) - max(start, other_start);
    return 2 * shared > min(end - start, other_end - other_start);
}

inline int same_place(place_t a, place_t b)
{
    long shift = min(abs(a.text_start - b.text_start), abs(a.text_end - b.text_end));
    shift = min(shift, (long)abs((a.text_end - a.read_end) - (b.text_end - b.read_end)));
    return a.reverse == b.reverse && shift <= SAME_ALIGNMENT_BASES && shares_most(a.read_start, a.read_end, b.read_start, b.read_end)
           && shares_most(a.text_start, a.text_end, b.text_start, b.text_end);
}

/* splitmix64's finaliser (extender.mix). */
inline ulong mix(ulong value)
{
    value = (value ^ (value >> 30)) * 0xBF58476D1CE4E5B9UL;
    value = (value ^ (value >> 27)) * 0x94D049BB133111EBUL;
    return value ^ (value >> 31);
}

/* Whether window a comes before window b in the order of ties: (reverse, text end, index). */
inline int before(place_t a, uint wa, place_t b, uint wb)
{
    if (a.reverse != b.reverse)
        return a.reverse < b.reverse;
    if (a.text_end != b.text_end)
        return a.text_end < b.text_end;
    return wa < wb;
}

__kernel void rank_windows(__global const uint *window_first, __global const int *values, __global const ulong *start,
                           __global const uint *read_first, __global const uchar *read_codes, const uint count, const uint n,
                           const int match, const int delta, __global int *out)
{
    uint i = get_global_id(0);
    if (i >= count)
        return;
    uint first = window_first[i], last = window_first[i + 1];
    int best = -1, best_score = NO_SCORE, rival = NO_SCORE, suboptimal = 0;
    if (first < last) {
        /* The best score, and how many windows reach it. */
        int tops = 0;
        best_score = values[first];
        for (uint w = first; w < last; ++w) {
            int score = values[w];
            if (score > best_score) {
                best_score = score;
                tops = 0;
            }
            tops += score == best_score;
        }
        if (tops == 1) {
            for (uint w = first; w < last && best < 0; ++w)
                if (values[w] == best_score)
                    best = (int)w;
        } else {
            /* Ties: the smallest tie-breaker (the read's hash mixed with the window's start),
             * then the forward strand, the smaller text end, the first window. */
            ulong hash = 0;
            uint base = read_first[i], length = read_first[i + 1] - base;
            for (uint j = 0; j < length; ++j)
                hash += mix((ulong)j * 4UL + (ulong)read_codes[base + j] + 1UL);
            ulong best_key = 0;
            place_t best_place;
            for (uint w = first; w < last; ++w) {
                if (values[w] != best_score)
                    continue;
                ulong key = mix(hash ^ start[w]);
                place_t p = place_of(values, start, n, w, match);
                if (best < 0 || key < best_key || (key == best_key && before(p, w, best_place, (uint)best))) {
                    best = (int)w;
                    best_key = key;
                    best_place = p;
                }
            }
        }
        place_t chosen = place_of(values, start, n, (uint)best, match);
        /* The best score elsewhere: at another place than the best's. */
        for (uint w = first; w < last; ++w) {
            if (w == (uint)best || values[w] <= rival)
                continue;
            if (!same_place(place_of(values, start, n, w, match), chosen))
                rival = values[w];
        }
        /* Places within delta of the best: the windows near it in the order (strand, text end,
         * index), a new place wherever one is not the same as the window before it. */
        long floor = (long)best_score - delta;
        int places = 0;
        for (uint w = first; w < last; ++w) {
            if ((long)values[w] < floor)
                continue;
            place_t p = place_of(values, start, n, w, match);
            int previous = -1;
            place_t previous_place;
            for (uint v = first; v < last; ++v) {
                if (v == w || (long)values[v] < floor)
                    continue;
                place_t q = place_of(values, start, n, v, match);
                if (before(q, v, p, w) && (previous < 0 || before(previous_place, (uint)previous, q, v))) {
                    previous = (int)v;
                    previous_place = q;
                }
            }
            places += previous < 0 || !same_place(p, previous_place);
        }
        suboptimal = max(places - 1, 0);
    }
    out[i] = best;
    out[count + i] = best_score;
    out[2 * count + i] = rival;
    out[3 * count + i] = suboptimal;
}
