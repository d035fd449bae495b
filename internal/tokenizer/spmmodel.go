package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/honeai/hone/internal/gguf"
)

// SentencePiece's model file (tokenizer.model): a serialized sentencepiece.ModelProto, whose
// field 1 is the vocabulary, each piece a message with its text (field 1), score (field 2,
// a float) and type (field 3; NORMAL when absent). Hone reads it only to export a
// SentencePiece vocabulary to GGUF, where llama.cpp wants the scores that tokenizer.json does
// not keep.

// SentencePiece piece types (sentencepiece_model.proto's SentencePiece.Type).
const (
	spmNormal      = 1
	spmUnknown     = 2
	spmControl     = 3
	spmUserDefined = 4
	spmUnused      = 5
	spmByte        = 6
)

// spmPiece is one entry of a SentencePiece vocabulary.
type spmPiece struct {
	Text  string
	Score float32
	Type  int
}

// maxSPMPieces bounds the vocabulary read from a model file (the largest real ones hold
// 262,144 pieces).
const maxSPMPieces = 1 << 22

// readSPMModel reads the vocabulary of the SentencePiece model file at path.
func readSPMModel(path string) ([]spmPiece, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	pieces, err := parseSPMModel(b)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", path, err)
	}
	return pieces, nil
}

// parseSPMModel decodes a serialized ModelProto's pieces; the other fields (trainer and
// normalizer specs) are skipped.
func parseSPMModel(b []byte) ([]spmPiece, error) {
	var pieces []spmPiece
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, fmt.Errorf("not a SentencePiece model: %w", protowire.ParseError(n))
		}
		b = b[n:]
		if num != 1 || typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return nil, fmt.Errorf("not a SentencePiece model: field %d: %w", num, protowire.ParseError(n))
			}
			b = b[n:]
			continue
		}
		msg, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return nil, fmt.Errorf("not a SentencePiece model: piece %d: %w", len(pieces), protowire.ParseError(n))
		}
		b = b[n:]
		p, err := parseSPMPiece(msg)
		if err != nil {
			return nil, fmt.Errorf("piece %d: %w", len(pieces), err)
		}
		if len(pieces) == maxSPMPieces {
			return nil, fmt.Errorf("more than %d pieces", maxSPMPieces)
		}
		pieces = append(pieces, p)
	}
	if len(pieces) == 0 {
		return nil, errors.New("not a SentencePiece model: no pieces")
	}
	return pieces, nil
}

// parseSPMPiece decodes one SentencePiece message.
func parseSPMPiece(b []byte) (spmPiece, error) {
	p := spmPiece{Type: spmNormal}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return p, protowire.ParseError(n)
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.BytesType:
			s, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return p, protowire.ParseError(n)
			}
			if !utf8.Valid(s) {
				return p, fmt.Errorf("text %q is not UTF-8", s)
			}
			p.Text, b = string(s), b[n:]
		case num == 2 && typ == protowire.Fixed32Type:
			v, n := protowire.ConsumeFixed32(b)
			if n < 0 {
				return p, protowire.ParseError(n)
			}
			p.Score, b = math.Float32frombits(v), b[n:]
		case num == 3 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return p, protowire.ParseError(n)
			}
			if v < spmNormal || v > spmByte {
				return p, fmt.Errorf("type %d is not a SentencePiece piece type", v)
			}
			p.Type, b = int(v), b[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return p, protowire.ParseError(n)
			}
			b = b[n:]
		}
	}
	return p, nil
}

// addedToken is one of tokenizer.json's added_tokens.
type addedToken struct {
	ID      int
	Content string
	Special bool
}

// spmGGUFVocab is the tokenizer.ggml.* vocabulary of a SentencePiece model directory as
// llama.cpp's convert_hf_to_gguf.py writes it (_create_vocab_sentencepiece; with phi3,
// Phi3MiniModel.set_vocab's variant), and the tokens by id:
//
//   - ids below vocabSize start as "[PAD<id>]", score -10000, unused;
//   - tokenizer.model's pieces follow with their scores; their types are kept for unknown,
//     control, unused and byte pieces, the rest (user-defined pieces included) are normal;
//   - added_tokens.json's tokens become user-defined, score -1000;
//   - tokenizer_config.json's added_tokens_decoder entries, score -1000: control when special
//     or when they look special, else user-defined with "▁" written as a space (phi3:
//     control when special, else user-defined, the text as it is; then tokenizer.json's
//     added_tokens the same way).
func spmGGUFVocab(dir string, tc map[string]json.RawMessage, added []addedToken, vocabSize int, phi3 bool) ([]string, []gguf.KV, error) {
	pieces, err := readSPMModel(filepath.Join(dir, "tokenizer.model"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("tokenizer: %s has a SentencePiece vocabulary (tokenizer.json's BPE with byte fallback) but no tokenizer.model, whose scores a GGUF needs; llama.cpp's converter reads them from there too", dir)
	}
	if err != nil {
		return nil, nil, err
	}
	if vocabSize <= 0 {
		vocabSize = len(pieces)
	}
	tokens := make([]string, vocabSize)
	scores := make([]float32, vocabSize)
	types := make([]int32, vocabSize)
	for i := range tokens {
		tokens[i], scores[i], types[i] = fmt.Sprintf("[PAD%d]", i), -10000, spmUnused
	}
	for i, p := range pieces[:min(len(pieces), vocabSize)] {
		typ := int32(ggufTokenNormal)
		switch p.Type {
		case spmUnknown, spmControl, spmUnused, spmByte:
			typ = int32(p.Type)
		}
		tokens[i], scores[i], types[i] = p.Text, p.Score, typ
	}
	set := func(id int, tok string, typ int32) {
		if id >= 0 && id < vocabSize {
			tokens[id], scores[id], types[id] = tok, -1000, typ
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "added_tokens.json")); err == nil {
		var at map[string]int
		if err := json.Unmarshal(b, &at); err != nil {
			return nil, nil, fmt.Errorf("tokenizer: %s/added_tokens.json: %w", dir, err)
		}
		for tok, id := range at {
			set(id, tok, ggufTokenUserDefined)
		}
	}
	var decoder map[string]struct {
		Content string `json:"content"`
		Special bool   `json:"special"`
	}
	if v, ok := tc["added_tokens_decoder"]; ok {
		if err := json.Unmarshal(v, &decoder); err != nil {
			return nil, nil, fmt.Errorf("tokenizer: %s/tokenizer_config.json: added_tokens_decoder: %w", dir, err)
		}
	}
	for key, d := range decoder {
		id, err := strconv.Atoi(key)
		if err != nil {
			return nil, nil, fmt.Errorf("tokenizer: %s/tokenizer_config.json: added_tokens_decoder key %q is not a token id", dir, key)
		}
		switch {
		case d.Special || !phi3 && looksSpecial(d.Content):
			set(id, d.Content, ggufTokenControl)
		case phi3:
			set(id, d.Content, ggufTokenUserDefined)
		default:
			set(id, strings.ReplaceAll(d.Content, "\u2581", " "), ggufTokenUserDefined)
		}
	}
	if phi3 {
		for _, at := range added {
			typ := int32(ggufTokenUserDefined)
			if at.Special {
				typ = ggufTokenControl
			}
			set(at.ID, at.Content, typ)
		}
	}
	return tokens, []gguf.KV{
		{Key: "tokenizer.ggml.model", Value: "llama"},
		{Key: "tokenizer.ggml.pre", Value: "default"},
		{Key: "tokenizer.ggml.tokens", Value: tokens},
		{Key: "tokenizer.ggml.scores", Value: scores},
		{Key: "tokenizer.ggml.token_type", Value: types},
	}, nil
}
