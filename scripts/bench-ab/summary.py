#!/usr/bin/env python3
"""summary.py OUT: for each benchmark that scripts/bench-ab/ab.sh ran, the best and the median
of each side's rounds, and after/before of both (for a time per operation, before/after).
The machine's load moves single runs by 2-3x on a shared VM; best-of-rounds is what the
comparison rests on, the medians show how the rounds spread."""
import collections, glob, re, statistics, sys

lower_better = ('ns/row', 'ns/row·act')
for f in sorted(glob.glob(sys.argv[1] + '/*.txt')):
    print('# ' + f.rsplit('/', 1)[-1][:-4])
    side = name = None
    vals, units = collections.defaultdict(list), {}
    for line in open(f):
        m = re.match(r'== \S+ (before|after)', line)
        if m:
            side = m.group(1)
            continue
        m = re.search(r'(Benchmark\S+?)-\d+\b', line)
        if m:
            name = m.group(1)
        for v, unit in re.findall(r'([\d.]+) (tokens/s|GFLOP/s|GMAC/s|GB/s|ns/row·act|ns/row)\b', line):
            if side and name:
                vals[(name, side)].append(float(v))
                units[name] = unit
    for n in dict.fromkeys(k for k, _ in vals):
        b, a = vals.get((n, 'before')), vals.get((n, 'after'))
        if not b or not a:
            continue
        low = units[n] in lower_better
        bb, ab = (min(b), min(a)) if low else (max(b), max(a))
        bm, am = statistics.median(b), statistics.median(a)
        rb, rm = (bb / ab, bm / am) if low else (ab / bb, am / bm)
        print(f'{n:58s} {units[n]:10s} before {bb:9.1f} (median {bm:9.1f}) after {ab:9.1f} '
              f'(median {am:9.1f})  best {rb:.2f}x median {rm:.2f}x  n={len(b)}')
