package tokenizer

import (
	"os"
	"path/filepath"
	"testing"
)

const tinyTokenizerJSON = `{"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]},"pre_tokenizer":{"type":"ByteLevel"}}`

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// chat_template.jinja (transformers 4.43+ and 5 save the template there) is read, and as in
// transformers' from_pretrained the template files replace tokenizer_config.json's templates.
func TestChatTemplateFiles(t *testing.T) {
	cfg := `{"eos_token":"b","chat_template":[{"name":"default","template":"config default"},{"name":"tool_use","template":"config tools"},{"name":"rag","template":"config rag"}]}`
	for _, c := range []struct {
		name  string
		files map[string]string
		want  map[string]string
	}{
		{"config only", map[string]string{"tokenizer_config.json": cfg},
			map[string]string{"": "config default", "tool_use": "config tools", "rag": "config rag"}},
		{"jinja beside config", map[string]string{"tokenizer_config.json": cfg, "chat_template.jinja": "{{ file }}\n"},
			map[string]string{"": "{{ file }}\n"}},
		{"jinja and additional", map[string]string{"tokenizer_config.json": cfg, "chat_template.jinja": "file default",
			"additional_chat_templates/tool_use.jinja": "file tools"},
			map[string]string{"": "file default", "tool_use": "file tools"}},
		{"additional only", map[string]string{"tokenizer_config.json": cfg, "additional_chat_templates/rag.jinja": "file rag"},
			map[string]string{"rag": "file rag"}},
		{"jinja without config", map[string]string{"chat_template.jinja": "only file"},
			map[string]string{"": "only file"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			files := map[string]string{"tokenizer.json": tinyTokenizerJSON}
			for k, v := range c.files {
				files[k] = v
			}
			tk, err := Load(writeFiles(t, files))
			if err != nil {
				t.Fatal(err)
			}
			got := tk.Config().ChatTemplates
			if len(got) != len(c.want) {
				t.Fatalf("templates %q, want %q", got, c.want)
			}
			for name, want := range c.want {
				if tk.ChatTemplate(name) != want {
					t.Fatalf("template %q = %q, want %q", name, tk.ChatTemplate(name), want)
				}
			}
		})
	}
}
