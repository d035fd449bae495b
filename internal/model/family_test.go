package model

import (
	"slices"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/chattemplate"
)

// TestFamilyTable: every family of the table is found by its name, each of its config.json
// architectures and model types, and its GGUF architecture; names do not collide; its chat
// template is a built-in one; an architecture Hone does not know has Llama's block.
func TestFamilyTable(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range Families() {
		for _, name := range append(append([]string{"arch " + f.Arch, "gguf " + f.GGUFArch}, f.HFArchitectures...), f.HFModelTypes...) {
			if name == "gguf " {
				continue
			}
			if seen[name] {
				t.Errorf("%s: %s named twice", f.Arch, name)
			}
			seen[name] = true
		}
		if FamilyOf(f.Arch) != f || (&Config{Arch: f.Arch}).Family() != f {
			t.Errorf("%s: not found by its name", f.Arch)
		}
		if len(f.HFArchitectures) == 0 || len(f.HFModelTypes) == 0 || f.parseHF == nil || f.ggufMetadata == nil {
			t.Errorf("%s: no config.json names, parser or GGUF writer", f.Arch)
		}
		for _, a := range f.HFArchitectures {
			if familyForHF([]string{"SomethingElse", a}, "") != f {
				t.Errorf("%s: not found by architectures entry %s", f.Arch, a)
			}
		}
		for _, mt := range f.HFModelTypes {
			if familyForHF(nil, mt) != f || familyForHF([]string{"SomethingElse"}, mt) != nil {
				t.Errorf("%s: model_type %s read wrongly", f.Arch, mt)
			}
		}
		if f.GGUFArch != "" && (familyForGGUF(f.GGUFArch) != f || f.fromGGUF == nil) {
			t.Errorf("%s: not found by general.architecture %s, or no GGUF reader", f.Arch, f.GGUFArch)
		}
		if f.ChatTemplate != "" && !slices.Contains(chattemplate.Builtins, f.ChatTemplate) {
			t.Errorf("%s: chat template %q is not a built-in one", f.Arch, f.ChatTemplate)
		}
	}
	if FamilyOf("gpt2") != nil || (&Config{Arch: "gpt2"}).Family().Arch != "" || (&Config{Arch: "gpt2"}).Family().FusedProjections || familyForGGUF("") != nil {
		t.Error("an unknown architecture has a family")
	}
}

// TestUnsupportedArchitectureMessages: the errors for an architecture Hone does not run list
// the table's (as they did when they were written out by hand).
func TestUnsupportedArchitectureMessages(t *testing.T) {
	_, err := ParseConfig([]byte(`{"architectures":["GPTNeoXForCausalLM"]}`))
	want := "model: unsupported architecture GPTNeoXForCausalLM: Hone runs LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Qwen3MoeForCausalLM, Phi3ForCausalLM, MistralForCausalLM, MinistralForCausalLM, Gemma2ForCausalLM and Gemma3ForCausalLM"
	if err == nil || err.Error() != want {
		t.Errorf("ParseConfig: %v\nwant %s", err, want)
	}
	gg := familyList(func(f *Family) []string {
		if f.GGUFArch == "" {
			return nil
		}
		return []string{f.GGUFArch}
	}, true)
	if gg != "llama, qwen2, qwen3, qwen3moe, phi3, gemma2 and gemma3" {
		t.Errorf("GGUF architectures: %s", gg)
	}
	if _, _, err := GGUFMetadata(&Config{Arch: "gpt2"}); err == nil || !strings.Contains(err.Error(), "(llama, qwen2, qwen3, qwen3moe, phi3, mistral, gemma2, gemma3)") {
		t.Errorf("GGUFMetadata: %v", err)
	}
}
