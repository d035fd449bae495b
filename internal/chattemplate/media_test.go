package chattemplate

import (
	"errors"
	"testing"
)

// Content parts that are not text (images, audio, video, files) are refused by path, in
// rendering and in training's assistant spans; text parts render as before.
func TestMediaPartsRefused(t *testing.T) {
	tpl, err := Compile(`{% for m in messages %}{{ m.content }}|{% endfor %}`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := tpl.Render(Input{Messages: []byte(`[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]`)})
	if err != nil || out != "a\nb|" {
		t.Fatalf("text parts: %q %v", out, err)
	}
	for _, typ := range []string{"image_url", "input_audio", "video_url", "file"} {
		msgs := []byte(`[{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"text","text":"t"},{"type":"` + typ + `"}]}]`)
		var mp *MediaPartError
		if _, err := tpl.Render(Input{Messages: msgs}); !errors.As(err, &mp) || mp.Path != "messages[1].content[1]" || mp.Type != typ {
			t.Errorf("render %s: %v", typ, err)
		}
		if _, _, err := tpl.AssistantSpans(Input{Messages: msgs}); !errors.As(err, &mp) || mp.Path != "messages[1].content[1]" {
			t.Errorf("spans %s: %v", typ, err)
		}
	}
}
