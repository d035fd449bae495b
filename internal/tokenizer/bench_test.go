package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// benchText is the golden corpus repeated to about 1 MB (the same text scripts/tokenizer-goldens/
// bench.py gives Hugging Face tokenizers and the JavaScript oracle).
func benchText(b *testing.B) string {
	raw, err := os.ReadFile(filepath.Join(testdataDir(), "corpus.json"))
	if err != nil {
		b.Fatal(err)
	}
	var corpus []string
	if err := json.Unmarshal(raw, &corpus); err != nil {
		b.Fatal(err)
	}
	one := strings.Join(corpus, "\n")
	return strings.Repeat(one, 1<<20/len(one)+1)
}

func BenchmarkEncode(b *testing.B) {
	text := benchText(b)
	for _, name := range []string{"llama3", "qwen3", "gpt2", "smollm2"} {
		tk := tokenizers(b)[name]
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for i := 0; i < b.N; i++ {
				tk.Encode(text, false)
			}
			b.ReportMetric(float64(len(text))*float64(b.N)/b.Elapsed().Seconds()/1e6, "MB/s")
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	text := benchText(b)
	tk := tokenizers(b)["qwen3"]
	ids := tk.Encode(text, false)
	b.SetBytes(int64(len(text)))
	for i := 0; i < b.N; i++ {
		tk.Decode(ids, false)
	}
}
