"""Generates internal/pyjson/testdata/goldens.jsonl: JSON texts and the text of Python's
json.dumps(json.loads(text)), which Weave hashes into digests.

Run: python3 scripts/pyjson-goldens/gen.py > internal/pyjson/testdata/goldens.jsonl
Needs only the Python standard library. Deterministic (fixed seed).
"""
import json
import random
import struct

rng = random.Random(1234)
cases = []

def add(text):
    cases.append({"in": text, "out": json.dumps(json.loads(text))})

# Floats written in many ways.
specials = [0.0, -0.0, 1.0, 0.1, 0.5, 1e16, 1e15, 9999999999999998.0, 1e-4, 1e-5, 1.5e-7,
            123456789012345678.0, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308,
            1e22, 1e21, 12345.678, 100.0, 3.14159, 2.5e-5, 0.00012345, 1.0000000000000002]
for f in specials:
    for fmt in ("%r", "%.17g", "%.3e", "%f", "%.1f"):
        s = fmt % f if fmt != "%r" else repr(f)
        if s in ("inf", "-inf", "nan"):
            continue
        if "." not in s and "e" not in s and "E" not in s:
            s += ".0"
        add(s)
for _ in range(400):
    bits = rng.getrandbits(64)
    f = struct.unpack("<d", struct.pack("<Q", bits))[0]
    if f != f or f in (float("inf"), float("-inf")):
        continue
    add(repr(f))
    add("%.17e" % f)
for _ in range(200):
    f = rng.uniform(-1e6, 1e6) * 10 ** rng.randint(-20, 20)
    add(repr(f))
    add("%.12g" % f if ("e" in "%.12g" % f or "." in "%.12g" % f) else "%.12g.0" % f)
for s in ["1E5", "1e+5", "-1.0E-10", "1e400", "-1e400", "1e-400", "0e0", "-0.0e-0"]:
    add(s)
# Integers, including big ones and -0.
for s in ["0", "-0", "7", "-12", "10000000000000000000000", "-98765432109876543210987654321"]:
    add(s)
# Strings: escapes, control characters, DEL, non-ASCII, astral, lone surrogates.
strings = ["plain", "quote\" back\\ slash/", "\n\r\t\b\f", "\x00\x01\x1f\x7f", "café", "日本語",
           "emoji 😀👨‍👩‍👧", "\u2028\u2029", "mixed ascii é 😀 end", ""]
for s in strings:
    add(json.dumps(s, ensure_ascii=False))
    add(json.dumps(s))
add('"\\ud800"')
add('"\\ude00\\ud83d x"')
add('"\\ud83d\\ude00"')
add('"\\/"')
# Structures: key order kept, duplicates, nesting, whitespace.
add('{"b": 1, "a": 2}')
add('{"a": 1, "b": 2, "a": 3}')
add(' { "x" : [ 1 , 2.50 , true , false , null , { } , [ ] ] } ')
add('{"_type": "Dataset", "_class_name": "Dataset", "_bases": ["Object", "BaseModel"], "name": "d", "rows": "weave:///e/p/table/abc"}')
add('[[[[[[[[[[{"deep": [1.0]}]]]]]]]]]]')
add('{"k": {"nested": {"v": 1e100, "w": -0.0, "x": "\\u00e9"}}}')
for _ in range(60):
    def gen(d):
        r = rng.random()
        if d > 3 or r < 0.3:
            return rng.choice([rng.randint(-10**20, 10**20), rng.random() * 10 ** rng.randint(-8, 20),
                               "s%d\u00e9" % rng.randint(0, 99), True, False, None])
        if r < 0.65:
            return [gen(d + 1) for _ in range(rng.randint(0, 4))]
        return {("k%d" % rng.randint(0, 9)): gen(d + 1) for _ in range(rng.randint(0, 4))}
    add(json.dumps(gen(0), ensure_ascii=rng.random() < 0.5))

for c in cases:
    print(json.dumps(c))
