package tokenizer

import (
	"hash/maphash"
	"strings"
	"unsafe"
)

// The vocabulary's tables are held for the server's life, and the Go collector lets garbage
// grow to the size of the live heap between collections, so each byte they take costs about
// two of resident memory. Laid out as Go maps and slices of small strings, Gemma 3's 262,144
// tokens took 50 MB; compacted, 14 MB.

// vocabIndex maps a token's text to its id: an open-addressing table of ids, at most half
// full, probed by the text's hash and compared with tokens[id] (4 bytes a slot instead of a
// Go map's 40-odd bytes an entry: 2 MB instead of 14 for Gemma 3), and a map for the entries
// whose text is not their id's token text (none in the vocabularies Hone reads, but an added
// token may take the id of a different vocabulary entry).
type vocabIndex struct {
	tokens []string // the Tokenizer's
	slots  []int32  // -1: empty
	seed   maphash.Seed
	other  map[string]int32
}

// newVocabIndex indexes m (text → id) over tokens (id → text).
func newVocabIndex(m map[string]int32, tokens []string) *vocabIndex {
	n := 16
	for n < 2*len(m) {
		n <<= 1
	}
	v := &vocabIndex{tokens: tokens, slots: make([]int32, n), seed: maphash.MakeSeed()}
	for i := range v.slots {
		v.slots[i] = -1
	}
	mask := uint64(n - 1)
	for s, id := range m {
		if int(id) >= len(tokens) || tokens[id] != s {
			if v.other == nil {
				v.other = map[string]int32{}
			}
			v.other[s] = id
			continue
		}
		i := maphash.String(v.seed, s) & mask
		for v.slots[i] >= 0 {
			i = (i + 1) & mask
		}
		v.slots[i] = id
	}
	return v
}

// get is the id of text s.
func (v *vocabIndex) get(s string) (int32, bool) {
	mask := uint64(len(v.slots) - 1)
	for i := maphash.String(v.seed, s) & mask; ; i = (i + 1) & mask {
		id := v.slots[i]
		if id < 0 {
			break
		}
		if v.tokens[id] == s {
			return id, true
		}
	}
	if v.other != nil {
		id, ok := v.other[s]
		return id, ok
	}
	return 0, false
}

// getBytes is get for text held in b, which it does not retain.
func (v *vocabIndex) getBytes(b []byte) (int32, bool) {
	if len(b) == 0 {
		return v.get("")
	}
	return v.get(unsafe.String(&b[0], len(b)))
}

// compactStrings returns ss with their texts in one string (one allocation instead of one a
// token, each rounded up to its size class).
func compactStrings(ss []string) []string {
	n := 0
	for _, s := range ss {
		n += len(s)
	}
	var b strings.Builder
	b.Grow(n)
	for _, s := range ss {
		b.WriteString(s)
	}
	all := b.String()
	out := make([]string, len(ss))
	off := 0
	for i, s := range ss {
		out[i] = all[off : off+len(s)]
		off += len(s)
	}
	return out
}

// pieceTable is the bytes each id stands for (Tokenizer.tokBytes), in one array with an offset
// per id instead of a slice header and an allocation per id.
type pieceTable struct {
	data []byte
	off  []uint32 // id i's bytes are data[off[i]:off[i+1]]
}

func newPieceTable(pieces [][]byte) pieceTable {
	n := 0
	for _, p := range pieces {
		n += len(p)
	}
	t := pieceTable{data: make([]byte, 0, n), off: make([]uint32, len(pieces)+1)}
	for i, p := range pieces {
		t.data = append(t.data, p...)
		t.off[i+1] = uint32(len(t.data))
	}
	return t
}

// len is the number of ids.
func (t *pieceTable) len() int { return len(t.off) - 1 }

// at is id's bytes (capacity limited: appending to them copies).
func (t *pieceTable) at(id int) []byte {
	a, b := t.off[id], t.off[id+1]
	return t.data[a:b:b]
}
