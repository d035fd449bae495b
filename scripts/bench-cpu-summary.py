#!/usr/bin/env python3
"""Summarises the output of scripts/bench-cpu.sh (OUT/decode.txt, prefill.txt, train.txt,
trace.txt, machine.txt) as Markdown tables: Hone against its reference round by round (only
same-round ratios mean anything on a shared machine), with the issue 35 goals beside them.
Each of Hone's figures is the median of its repetitions in the round (REPS fresh processes),
with their spread (min–max ÷ median) beside it.

Usage: scripts/bench-cpu-summary.py OUT
"""
import os
import re
import statistics
import sys

MODELS = {"smollm2-f32.gguf": "f32", "smollm2-bf16.gguf": "bf16", "smol-q8_0.gguf": "q8_0",
          "smol-q4_k_m.gguf": "q4_k_m", "smol-q4_1.gguf": "q4_1",
          "gemma-3-270m-q4_k_m.gguf": "gemma3_q4_k_m"}
ORDER = ["f32", "bf16", "q8_0", "q4_k_m", "q4_1", "gemma3_q4_k_m"]


def read(out, name):
    path = os.path.join(out, name)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def ratio(a, b):
    return f"{a / b:.2f}" if a and b else "—"


def med(v):
    """The median of a list of repetitions (0 when there are none)."""
    return statistics.median(v) if v else 0


def reps(v):
    """'median (min–max, ±spread%)' of a list of repetitions."""
    if not v:
        return "—"
    m = statistics.median(v)
    if len(v) == 1:
        return f"{m:.1f}"
    return f"{m:.1f} ({min(v):.1f}–{max(v):.1f}, {100 * (max(v) - min(v)) / m:.0f}%)"


def num(s):
    return float(s.replace(",", ""))


def decode(text):
    """Rounds of {(model, batch): {"off":, "on":, "measured":, "tg":, "s1":, "s16":}} and bandwidths."""
    rounds, bw = [], []
    cur = pf = model = None
    for line in text.splitlines():
        if m := re.match(r"BenchmarkMemoryBandwidth/threads2-\d+\s.*?([\d.]+) GB/s", line):
            bw.append(("STREAM read, 2 threads", float(m[1])))
        if line.startswith("== round"):
            cur, pf, model = {}, None, None
            rounds.append(cur)
            continue
        if cur is None:
            continue
        if m := re.match(r"Hone, HONE_DECODE_PREFETCH=(\w+)", line):
            pf, model = m[1], None
        elif line.strip() == "llama.cpp":
            pf, model = "llama", None
        elif m := re.match(r"^ (q8_0|q4_k_m|q4_1|gemma3_q4_k_m)$", line):
            model = m[1]
        elif m := re.match(r"\s+BenchmarkDecodeBandwidth/([\w-]+)/batch1-\d+\s+([\d.]+) GB/s", line):
            bw.append((f"products of decode, {m[1]}, prefetch {pf}", float(m[2])))
        elif m := re.match(r"\s+BenchmarkDecode/(f32|bf16|gguf)/batch(\d+)-\d+\s+([\d.]+) (tokens/s|weights-GB/s)", line):
            mdl = model if m[1] == "gguf" else m[1]
            key = pf if m[4] == "tokens/s" else pf + " GB/s"
            cur.setdefault((mdl, int(m[2])), {}).setdefault(key, []).append(float(m[3]))
        elif m := re.match(r"^(?:llama\.cpp)? (\S+\.gguf) tg64 \|\s+([\d.]+)", line):
            model = MODELS.get(m[1])
            cur.setdefault((model, 1), {}).setdefault("tg", []).append(float(m[2]))
        elif m := re.match(r"\s+batched B=\s*(\d+)(?:\s+S_PP\s+[\d.]+)?\s+S_TG\s+([\d.]+)", line):
            if model:
                key = "s1" if m[1] == "1" else "s16"
                cur.setdefault((model, 1 if m[1] == "1" else 16), {}).setdefault(key, []).append(float(m[2]))
    return rounds, bw


def prefill(text):
    rounds, cur = [], None
    for line in text.splitlines():
        if line.startswith("== round"):
            cur = {}
            rounds.append(cur)
        elif cur is None:
            continue
        elif m := re.match(r"(?:(q8_0|q4_k_m|q4_1|gemma3_q4_k_m) )?BenchmarkPrefill/(f32|bf16|gguf)/batch(\d+)-\d+\s.*?([\d.]+) tokens/s", line):
            mdl = m[1] or m[2]
            cur.setdefault((mdl, int(m[3])), {}).setdefault("hone", []).append(float(m[4]))
        elif m := re.match(r"llama\.cpp (\S+\.gguf) pp128 \|\s+([\d.]+)", line):
            cur.setdefault((MODELS[m[1]], 1), {})["ref"] = float(m[2])
            last = MODELS[m[1]]
        elif m := re.match(r"\s+batched B=\s*16\s+S_PP\s+([\d.]+)", line):
            cur.setdefault((last, 16), {})["ref"] = float(m[1])
    return rounds


def cells(rounds):
    """Each round's measurements per model and batch, in table order (models it has)."""
    for r, cur in enumerate(rounds, 1):
        for mdl in ORDER:
            for b in (1, 16):
                if (mdl, b) in cur:
                    yield r, mdl, b, cur[(mdl, b)]


def print_decode(text, title, stream):
    """The decode table of one part's output; stream is the best STREAM figure seen so far."""
    rounds, bw = decode(text)
    streams = [v for k, v in bw if k.startswith("STREAM")]
    if streams:
        # The host's two-vCPU bandwidth moves from minute to minute: the part's median.
        stream = statistics.median(streams)
        print(f"STREAM read, 2 threads, {len(streams)} times in this part: median {stream:.1f} GB/s, {min(streams):.1f}–{max(streams):.1f}\n")
    choices = [m[1] for m in re.finditer(r"decode prefetch measured (.*)", text)]
    print(f"## {title} (tokens/s, Hone's as median (min–max, spread) of its repetitions; goal: every row at least 1.3× llama.cpp)\n")
    print("| round | model | batch | Hone, no prefetch | Hone, prefetch | Hone, measured (default) | llama.cpp (tg64 / batched) "
          "| measured ÷ tg64 or batched-16 | prefetch ÷ same | no prefetch ÷ same | whole model, measured: GB/s ÷ median STREAM |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r, mdl, b, v in cells(rounds):
        # llama.cpp's figures: the median of its runs in the round (one per repetition).
        tg, s1, s16 = (med(v.get(k, [])) for k in ("tg", "s1", "s16"))
        ref = tg if b == 1 else s16
        refs = f"{reps(v.get('tg', []))} / {reps(v.get('s1', []))}" if b == 1 else reps(v.get("s16", []))
        off, on, meas = (v.get(k, []) for k in ("off", "on", "measured"))
        gbs = med(v.get("measured GB/s", []))
        whole = f"{gbs:.1f} ÷ {stream:.1f} = {gbs / stream:.2f}" if b == 1 and gbs and stream else "—"
        print(f"| {r} | {mdl} | {b} | {reps(off)} | {reps(on)} | {reps(meas)} | {refs} | "
              f"{ratio(med(meas), ref)} | {ratio(med(on), ref)} | {ratio(med(off), ref)} | {whole} |")
    if choices:
        print("\nThe tuners' choices with HONE_DECODE_PREFETCH unset (gemm.PrefetchTuner):\n")
        for c in choices:
            print(f"- {c}")
    if bw:
        print("\n| bandwidth | GB/s | ÷ median STREAM |\n|---|---:|---:|")
        for k, v in bw:
            print(f"| {k} | {v:.1f} | {ratio(v, stream)} |")
    print()
    return stream


def print_prefill(text, title):
    print(f"## {title} of 128 tokens (tokens/s, Hone's as median (min–max, spread); llama.cpp: pp128 at batch 1, batched-bench S_PP at 16; goal 1.3×)\n")
    print("| round | model | batch | Hone | llama.cpp | ratio |\n|---|---|---:|---:|---:|---:|")
    for r, mdl, b, v in cells(prefill(text)):
        print(f"| {r} | {mdl} | {b} | {reps(v.get('hone', []))} | {v.get('ref', 0):.1f} | {ratio(med(v.get('hone', [])), v.get('ref'))} |")
    print()


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    machine = read(out, "machine.txt")
    if machine:
        name = re.search(r"Model name:\s*(.*)", machine)
        flags = re.search(r"Flags:\s*(.*)", machine)
        keep = [f for f in (flags[1].split() if flags else []) if f.startswith(("avx512", "amx", "avx_vnni", "avx2"))]
        print(f"Machine: {name[1] if name else '?'}; flags {' '.join(keep)}")
        for line in machine.splitlines():
            if line.startswith(("go version", "commit", "CPU(s)", "Vendor")):
                print(f"- {line}")
        print()

    stream = None
    for name, title in (("decode.txt", "Decode"), ("gemma.txt", "Gemma 3 270M Q4_K_M, decode")):
        text = read(out, name)
        if text:
            stream = print_decode(text, title, stream)
    for name, title in (("prefill.txt", "Prefill"), ("gemma.txt", "Gemma 3 270M Q4_K_M, prefill")):
        text = read(out, name)
        if text:
            print_prefill(text, title)

    text = read(out, "train.txt")
    if text:
        print("## SFT step against PyTorch + peft (goal: at least 1.5× tokens/s, peak memory at most 0.7× PyTorch's)\n")
        print("| model | Hone tokens/s | PyTorch tokens/s | ratio | Hone peak RSS MB | PyTorch peak RSS MB | memory ratio |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        model = hone = None
        for line in text.splitlines():
            if m := re.match(r"== (\S+)", line):
                model = m[1]
            elif m := re.match(r"BenchmarkSFTStep/(\S+?)-\d+\s.*?([\d.]+) peak-RSS-MB\s+([\d.]+) tokens/s", line):
                hone = (m[1], float(m[3]), float(m[2]))
            elif (m := re.search(r"PyTorch \+ peft \(2 threads\): tokens/s ([\d.]+) peak-RSS-MB ([\d.]+)", line)) and hone:
                pt, pm = float(m[1]), float(m[2])
                print(f"| {hone[0]} | {hone[1]:.1f} | {pt:.1f} | {ratio(hone[1], pt)} | {hone[2]:.0f} | {pm:.0f} | {ratio(hone[2], pm)} |")
        print()

    text = read(out, "trace.txt")
    if text:
        ingest = [num(m) for m in re.findall(r"IngestUpsertBatch/sqlite\S*\s.*?([\d.]+) calls/s", text)]
        chain = [num(m) for m in re.findall(r"TraceUsage10k/sqlite/chain\S*\s.*?([\d.]+) ms/rollup", text)]
        wide = [num(m) for m in re.findall(r"TraceUsage10k/sqlite/wide\S*\s.*?([\d.]+) ms/rollup", text)]
        print("## Trace store (SQLite; goals: ingest at least 60,000 calls/s, a 10,000-call roll-up at most 30 ms)\n")
        print("| workload | rounds | median | goal |\n|---|---|---:|---|")
        for name, vals, goal in (("ingest, calls/s", ingest, "≥ 60,000"), ("roll-up, chain, ms", chain, "≤ 30"), ("roll-up, wide, ms", wide, "≤ 30")):
            if vals:
                print(f"| {name} | {', '.join(f'{v:,.1f}' for v in vals)} | {statistics.median(vals):,.1f} | {goal} |")


if __name__ == "__main__":
    main()
