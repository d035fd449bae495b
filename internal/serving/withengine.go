package serving

import "github.com/honeai/hone/internal/inference"

// WithEngine returns a Served that shares s's weights, tokenizer, template and stops, with an
// inference engine of its own: `hone worker`, which loads models for training only, serves an
// evaluation's chat completions with it. Close the copy's Engine alone when done (closing the
// copy would unmap the shared weights).
func (s *Served) WithEngine(opts inference.Options) *Served {
	c := &Served{Name: s.Name, Dir: s.Dir, Model: s.Model, Tok: s.Tok, Template: s.Template, TemplateFrom: s.TemplateFrom,
		EOS: s.EOS, Created: s.Created, ToolParser: s.ToolParser}
	c.Engine = inference.New(s.Model, opts)
	c.maxModelLen = c.Engine.MaxSequenceLen()
	if s.maxModelLen > 0 {
		c.maxModelLen = min(c.maxModelLen, s.maxModelLen)
	}
	return c
}
