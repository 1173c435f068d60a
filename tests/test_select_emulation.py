"""NumPy emulations of radix_select's kernels (kernels/radix_select.cu),
step for step as the kernels do them, checked on the CPU against the
reference of tests/select_reference.py: which keys become topk's
candidates, in which order, for ties across a digit bucket's boundary,
NaN, -0.0, k = row length, k in the last bucket and rows of one key
repeated. The GPU tests (test_select_gpu.py) run the kernels themselves."""
import numpy as np
import pytest

from cudasortkit.plugins import radix_select
from cudasortkit.plugins.numpy_select import selection_words

from helpers import as_dtype, make_keys
from select_reference import reference_topk

WIDE = 11  # RS_WIDE of radix_select.cu
SENTINEL = -1


def pick(hist, rank):
    """rs_pick_bin: the first bin whose running count reaches `rank`:
    (digit, count in the bins before it, its count)."""
    run = np.cumsum(hist)
    d = int(np.searchsorted(run, rank))  # first d with run[d] >= rank
    return d, int(run[d] - hist[d]), int(hist[d])


def ordered_pass(length, block, need_less, need_match, classify, write):
    """The kernels' pass in index order, BLOCK keys a chunk, ranks among the
    keys of each class so far; stops once both classes are complete."""
    run_less = run_match = 0
    for chunk in range(0, length, block):
        idx = np.arange(chunk, min(chunk + block, length))
        is_less, is_match = classify(idx)
        rank_less = run_less + np.cumsum(is_less) - is_less
        rank_match = run_match + np.cumsum(is_match) - is_match
        write(idx, is_less, is_match, rank_less, rank_match)
        run_less += int(is_less.sum())
        run_match += int(is_match.sum())
        if run_less >= need_less and run_match >= need_match:
            break


def stream_select(words, k, cap, block=64):
    """rs_stream_select on one row of selection words: its k candidates
    (words, indices), SENTINEL where it would write nothing."""
    bits = 8 * words.dtype.itemsize
    w = [int(x) for x in words]
    wa = np.array(w, dtype=object)
    prefix, nbits, remaining, match = 0, 0, k, len(w)
    while match > cap and nbits < bits:
        width = min(WIDE, bits - nbits)
        shift = bits - nbits - width
        sel = wa if nbits == 0 else wa[(wa >> (shift + width)) == prefix]
        digits = np.array([(x >> shift) & ((1 << width) - 1) for x in sel], np.int64)
        d, below, count = pick(np.bincount(digits, minlength=1 << width), remaining)
        remaining, match = remaining - below, count
        prefix, nbits = (prefix << width) | d, nbits + width
    direct = nbits == bits
    less_total = k - remaining
    head = np.zeros(len(w), dtype=object) if nbits == 0 else wa >> (bits - nbits)
    cand_w = np.full(k, SENTINEL, dtype=object)
    cand_x = np.full(k, SENTINEL, np.int64)
    smem_w = np.full(cap, SENTINEL, dtype=object)
    smem_x = np.full(cap, SENTINEL, np.int64)

    def classify(idx):
        h = head[idx]
        return (h < prefix).astype(np.int64), (h == prefix).astype(np.int64)

    def write(idx, is_less, is_match, rank_less, rank_match):
        for j, i in enumerate(idx):
            if is_less[j]:
                cand_w[rank_less[j]], cand_x[rank_less[j]] = w[i], i
            elif is_match[j] and direct:
                if rank_match[j] < remaining:
                    at = less_total + rank_match[j]
                    cand_w[at], cand_x[at] = w[i], i
            elif is_match[j]:
                assert rank_match[j] < match <= cap
                smem_w[rank_match[j]], smem_x[rank_match[j]] = w[i], i

    ordered_pass(len(w), block, less_total, remaining if direct else match, classify, write)
    if not direct:  # rs_bitonic: by (word, index); the first `remaining` join the candidates
        order = sorted(range(match), key=lambda j: (smem_w[j], smem_x[j]))[:remaining]
        cand_w[less_total:] = smem_w[order]
        cand_x[less_total:] = smem_x[order]
    return cand_w, cand_x


def multi_block_select(words, k, tile, digit):
    """The long-row path: digit passes (rs_hist, its last block picking),
    rs_count per tile (its last block scanning), rs_scatter mode 0 with its
    early exit. Returns the candidates and how many tiles exited early."""
    bits = 8 * words.dtype.itemsize
    w = np.array([int(x) for x in words], dtype=object)
    prefix, remaining = 0, k
    for shift, width in radix_select.digit_passes(bits, digit):
        high = shift + width
        sel = w if high >= bits else w[(w >> high) == (prefix >> high)]
        digits = np.array([(x >> shift) & ((1 << width) - 1) for x in sel], np.int64)
        d, below, _ = pick(np.bincount(digits, minlength=1 << width), remaining)
        remaining -= below
        prefix |= d << shift
    target = prefix
    nb = -(-len(w) // tile)
    less = [int(np.sum(w[b * tile:(b + 1) * tile] < target)) for b in range(nb)]
    equal = [int(np.sum(w[b * tile:(b + 1) * tile] == target)) for b in range(nb)]
    run_less = np.concatenate([[0], np.cumsum(less)])
    run_equal = np.concatenate([[0], np.cumsum(equal)])
    row_less, row_equal = int(run_less[-1]), int(run_equal[-1])
    assert row_less == k - remaining and row_less < k <= row_less + row_equal
    cand_w = np.full(k, SENTINEL, dtype=object)
    cand_x = np.full(k, SENTINEL, np.int64)
    skipped = 0
    for b in range(nb):
        nl, ne = int(run_less[b + 1]), int(run_equal[b + 1])
        rl, re = int(run_less[b]), int(run_equal[b])
        skip = nl == rl and (ne == re or row_less + re >= k)
        start, end = b * tile, min((b + 1) * tile, len(w))
        wrote = []
        for i in range(start, end):
            if w[i] < target:
                wrote.append((rl, i))
                rl += 1
            elif w[i] == target:
                if row_less + re < k:
                    wrote.append((row_less + re, i))
                re += 1
        if skip:  # the early exit drops nothing the tile would write
            assert not wrote
            skipped += 1
        for at, i in wrote:
            cand_w[at], cand_x[at] = w[i], i
    return cand_w, cand_x, skipped


def finish(cand_w, cand_x):
    """rs_sort_small: by (word, index); and the argsort path: a stable sort
    by word alone. Both must give the same order."""
    assert SENTINEL not in list(cand_x), "a candidate was never written"
    by_pair = sorted(range(len(cand_x)), key=lambda j: (cand_w[j], cand_x[j]))
    by_word = sorted(range(len(cand_x)), key=lambda j: cand_w[j])  # stable
    assert by_pair == by_word, "equal words are not in index order among the candidates"
    return cand_x[by_pair]


def _rows():
    """(name, keys, ks) rows: ties across a bucket's boundary, NaN and
    -0.0, a row of one key repeated, random dtypes."""
    rng = np.random.default_rng(29)
    # 2.0 opens a bucket of the 11-bit top digit of float32 (sign, exponent,
    # two mantissa bits); 1.75 is the bucket below it: ties on both sides
    edge = np.array([1.75] * 40 + [2.0] * 40 + [1.5, 3.0, -0.0, 0.0] * 10, np.float32)
    rng.shuffle(edge)
    yield "bucket edge", edge, (1, 39, 40, 41, 80, 81, 119, 120)
    special = make_keys("special", np.float32, 300, rng)
    special[::7] = np.nan
    special[::11] = -0.0
    special[::13] = 0.0
    yield "nan and signed zero", special, (1, 5, 43, 44, 150, 299, 300)
    yield "all equal", np.full(200, 3.5, np.float32), (1, 7, 199, 200)
    for dtype in ("float16", "bfloat16", "int8", "uint64", "float64", "bool"):
        for dist in ("uniform", "few_unique", "special"):
            keys = make_keys(dist, as_dtype(dtype), 257, rng)
            yield f"{dist} {dtype}", keys, (1, 2, 100, 256, 257)


@pytest.mark.parametrize("cap", [4, 32, radix_select.SORT_CAP])
def test_stream_select_candidates_give_the_reference_topk(cap):
    """rs_stream_select: more digit passes where more than `cap` keys share
    the digit (down to all bits known: ties taken by index), one where few do."""
    for name, keys, ks in _rows():
        for largest in (True, False):
            words = selection_words(keys, largest)
            for k in ks:
                _, expected = reference_topk(keys, k, -1, largest)
                got = finish(*stream_select(words, k, cap))
                assert np.array_equal(got, expected), (name, k, largest, cap)


def test_digit_passes_cover_every_bit_once():
    for bits in (8, 16, 32, 64):
        for digit in (8, radix_select.WIDE_DIGIT):
            passes = radix_select.digit_passes(bits, digit)
            assert all(0 < width <= min(digit, WIDE) for _, width in passes)
            covered = [b for shift, width in passes
                       for b in range(shift + width - 1, shift - 1, -1)]
            assert covered == list(range(bits - 1, -1, -1))  # most significant first, no gap
    assert radix_select.digit_passes(32, 11) == [(21, 11), (10, 11), (0, 10)]


@pytest.mark.parametrize("digit", [8, radix_select.WIDE_DIGIT])
def test_multi_block_path_and_its_early_exit_give_the_reference_topk(digit):
    exits = 0
    for name, keys, ks in _rows():
        for largest in (True, False):
            words = selection_words(keys, largest)
            for k in ks:
                _, expected = reference_topk(keys, k, -1, largest)
                cand_w, cand_x, skipped = multi_block_select(words, k, 16, digit)
                exits += skipped
                assert np.array_equal(finish(cand_w, cand_x), expected), (name, k, largest)
    assert exits  # the early exit happened


def sampled_select(words, k, samples, m, cap):
    """The sampled path (rs_sample, rs_filter, rs_final) on one row of
    selection words: (topk's indices in order, which case rs_final took:
    "below", "ties" or "exact")."""
    bits = 8 * words.dtype.itemsize
    w = [int(x) for x in words]
    comp = lambda i: (w[i] << 32) | i  # noqa: E731
    sample = sorted(comp(i) for i in radix_select.sample_positions(len(w), samples))
    t = sample[m - 1] >> 32
    below = [comp(i) for i in range(len(w)) if w[i] < t]  # rs_filter (any order serves)
    np.random.default_rng(len(below)).shuffle(below)
    n_less, n_equal = len(below), sum(x == t for x in w)
    if k <= n_less <= cap:
        case, prefix, nbits, under, match = "below", 0, 0, 0, n_less
        while under + match > radix_select.SORT_CAP:
            width = min(WIDE, 64 - nbits)
            shift = 64 - nbits - width
            sel = below if nbits == 0 else [c for c in below if c >> (64 - nbits) == prefix]
            hist = np.bincount([(c >> shift) & ((1 << width) - 1) for c in sel],
                               minlength=1 << width)
            d, before, match = pick(hist, k - under)
            under, prefix, nbits = under + before, (prefix << width) | d, nbits + width
        chosen = [c for c in below if nbits == 0 or c >> (64 - nbits) <= prefix]
        assert len(chosen) == under + match <= radix_select.SORT_CAP
    elif n_less < k <= n_less + n_equal and n_less <= cap:
        case = "ties"
        ties = [comp(i) for i in range(len(w)) if w[i] == t][:k - n_less]  # index order
        chosen = below + ties
    else:
        case = "exact"
        cand_w, cand_x = stream_select(words, k, 1024)
        chosen = [(int(a) << 32) | int(b) for a, b in zip(cand_w, cand_x)]
    assert bits <= 32
    return np.array([c & 0xFFFFFFFF for c in sorted(chosen)[:k]], np.int64), case


def _adversarial(n, samples, m, rng, where):
    """float32 keys whose sampled positions hold the row's largest keys
    (topk's threshold too high: the exact path) or its smallest (too many
    keys below the threshold: overflow, the exact path for a small cap)."""
    keys = rng.standard_normal(n).astype(np.float32)
    pos = np.array(radix_select.sample_positions(n, samples))
    keys[pos] = (100.0 if where == "high" else -100.0) + rng.random(len(pos)).astype(np.float32)
    return keys


def test_sampled_path_gives_the_reference_topk_in_all_three_cases():
    """Whatever the sample, rs_final's three cases give the reference's
    indices: the k first candidates below the threshold, those plus ties by
    index, or (threshold missed) the exact path."""
    rng = np.random.default_rng(31)
    seen = set()
    rows = [(name, keys, ks) for name, keys, ks in _rows() if keys.dtype.itemsize <= 4]
    rows += [("high sample", _adversarial(512, 32, 3, rng, "high"), (1, 5, 40)),
             ("low sample", _adversarial(512, 32, 3, rng, "low"), (1, 5, 40)),
             ("normal", rng.standard_normal(600).astype(np.float32), (1, 3, 20, 100))]
    for name, keys, ks in rows:
        if len(keys) < 64:
            continue
        samples = 32
        for largest in (True, False):
            words = selection_words(keys, largest)
            for k in ks:
                for m, cap in ((3, 40), (3, len(keys)), (8, len(keys))):
                    _, expected = reference_topk(keys, k, -1, largest)
                    got, case = sampled_select(words, k, samples, m, cap)
                    seen.add(case)
                    assert np.array_equal(got, expected), (name, k, largest, m, cap, case)
    assert seen == {"below", "ties", "exact"}


def test_sampled_path_narrows_a_long_candidate_list():
    """More than SORT_CAP keys below the threshold: 11-bit digits of the
    composites narrow them (rs_final's loop) before the sort."""
    rng = np.random.default_rng(5)
    keys = rng.integers(0, 50, 6000).astype(np.int32)  # many ties, distinct composites
    for largest in (True, False):
        words = selection_words(keys, largest)
        for k in (1, 100, radix_select.SORT_CAP):
            got, case = sampled_select(words, k, 64, 60, len(keys))
            assert case == "below"
            assert np.array_equal(got, reference_topk(keys, k, -1, largest)[1])


def test_sample_plan_and_positions():
    """sample_plan's rule (None for short rows, k over SORT_CAP or a
    threshold over a quarter into the sample; samples a power of two within
    the kernel's bounds; cap at most the row) and rs_sample's positions: one
    in each stride."""
    assert radix_select.sample_plan(radix_select.SAMPLED_MIN_ROW - 1, 5) is None
    assert radix_select.sample_plan(1 << 20, radix_select.SORT_CAP + 1) is None
    assert radix_select.sample_plan(1 << 13, 2048) is None
    for n, k in ((1 << 13, 1), (32000, 50), (1 << 23, 1000), ((1 << 32) - 1, 2048)):
        samples, m, cap = radix_select.sample_plan(n, k)
        assert samples & (samples - 1) == 0
        assert radix_select.MIN_SAMPLES <= samples <= radix_select.MAX_SAMPLES
        assert 2 <= m <= samples // 4 and k <= cap <= n
    assert radix_select.sample_plan(1 << 32, 5) is None  # positions would need 33 bits
    pos = np.array(radix_select.sample_positions(32000, 512))
    stride = 32000 // 512
    assert np.array_equal(pos // stride, np.arange(512)) and len(set(pos % stride)) > 8


def test_large_k_plan():
    """large_k_plan: one row, k over SORT_CAP, at least 16 keys a sample,
    the threshold at most half into the sample, cap past the expected
    candidates and within the row."""
    assert radix_select.large_k_plan(2, 1 << 24, 5000) is None
    assert radix_select.large_k_plan(1, 1 << 24, radix_select.SORT_CAP) is None
    assert radix_select.large_k_plan(1, 16 * radix_select.MAX_SAMPLES - 1, 2049) is None
    assert radix_select.large_k_plan(1, 1 << 20, 1 << 19) is None
    for n, k, samples_want in ((1 << 17, 2049, 8192), (1 << 24, 1 << 20, 8192),
                               (1 << 24, 3000, 8192), (16 * 2048, 2049, 2048)):
        samples, m, cap = radix_select.large_k_plan(1, n, k)
        assert samples == samples_want and 16 * samples <= n and m <= samples // 2
        assert (m - 1) * n / samples < cap <= n and k < cap


def test_kernel_constants_match_the_plugin():
    """SORT_CAP is RS_SORT_CAP; the 11-bit digit and RS_CAP as emulated."""
    import re
    from importlib.resources import files

    source = files("cudasortkit.kernels").joinpath("radix_select.cu").read_text()
    define = dict(re.findall(r"#define (RS_\w+) (\d+)", source))
    assert int(define["RS_SORT_CAP"]) == radix_select.SORT_CAP
    # rs_sample's sample is dynamic shared memory: 4-byte words within 227 KiB
    assert radix_select.MAX_SAMPLES <= radix_select.LARGE_K_SAMPLES
    assert 4 * radix_select.LARGE_K_SAMPLES + 16 * 1024 <= 227 * 1024
    assert int(define["RS_WIDE"]) == WIDE
    assert int(define["RS_CAP"]) <= radix_select.SORT_CAP


def filter_ordered(words, t, block, items, cap, arrival):
    """rs_filter_ordered on one row of selection words, step for step: tiles
    of block x items keys taken in `arrival` order; per tile, each (chunk u,
    warp) counts its keys below t (a ballot), an exclusive scan over the
    (u, warp) pairs in that order gives their offsets, and a decoupled
    look-back over the tiles' statuses gives the tile's prefix; key (u,
    thread) lands at prefix + offset(u, warp) + its rank in the ballot.
    Returns (cand_words, cand_index) of the slots written (cap of them;
    -1 where none was), the count below t and the count equal to t."""
    n, tile = len(words), block * items
    warps = block // 32
    nb = -(-n // tile)
    status = [None] * nb  # ("agg" | "inc", value)
    out_w, out_i = np.full(cap, -1, np.int64), np.full(cap, -1, np.int64)
    below = equal = 0
    for b in arrival:  # blocks run in any order; tiles are taken in arrival order
        start = b * tile
        ballots = np.zeros((items, block), bool)
        for u in range(items):
            for thread in range(block):
                i = start + u * block + thread
                ballots[u, thread] = i < n and words[i] < t
                equal += i < n and words[i] == t
        counts = [int(ballots[u, w * 32:(w + 1) * 32].sum()) for u in range(items)
                  for w in range(warps)]
        offsets = np.concatenate([[0], np.cumsum(counts)[:-1]])
        total = sum(counts)
        prefix = 0
        for p in range(b - 1, -1, -1):  # look-back: predecessors arrived earlier
            kind, value = status[p]
            prefix += value
            if kind == "inc":
                break
        status[b] = ("inc", prefix + total)
        below += total
        for u in range(items):
            for thread in range(block):
                if ballots[u, thread]:
                    w, lane = divmod(thread, 32)
                    lanes = ballots[u, w * 32:(w + 1) * 32]
                    pos = prefix + offsets[u * warps + w] + int(lanes[:lane].sum())
                    if pos < cap:
                        out_w[pos] = words[start + u * block + thread]
                        out_i[pos] = start + u * block + thread
    return out_w, out_i, below, equal


@pytest.mark.parametrize("block,items", [(64, 2), (32, 4), (96, 1)])
def test_ordered_filter_keeps_the_rows_order(block, items):
    """rs_filter_ordered's slots hold the words below the threshold in the
    row's order (so a stable sort by word alone orders them by (word,
    index)), whatever order the tiles arrive in; past cap nothing is
    written but the count goes on."""
    rng = np.random.default_rng(17)
    for n in (1, 31, 64 * 2 * 3 + 5, 1000):
        keys = rng.integers(0, 40, n).astype(np.int32)
        words = selection_words(keys, True)
        t = int(np.sort(words)[min(n - 1, n // 3)])
        nb = -(-n // (block * items))
        # arrival order: tile ids are handed out in arrival order, so tile b
        # arrives after every tile before it (the kernel's atomic counter)
        arrival = list(range(nb))
        want = np.flatnonzero(words < t)
        for cap in (n, len(want) // 2):
            got_w, got_i, below, equal = filter_ordered(words, t, block, items, cap, arrival)
            assert below == len(want) and equal == int((words == t).sum())
            kept = min(cap, len(want))
            assert np.array_equal(got_i[:kept], want[:kept])
            assert np.array_equal(got_w[:kept], words[want[:kept]])
            assert (got_i[kept:] == -1).all()
            order = np.argsort(got_w[:kept], kind="stable")
            pairs = sorted(zip(got_w[:kept].tolist(), got_i[:kept].tolist()))
            assert list(zip(got_w[:kept][order].tolist(), got_i[:kept][order].tolist())) == pairs
