// Package chatapi serves the OpenAI/vLLM-compatible chat completions routes on Hone's engine:
// POST /v1/chat/completions (and its trailing-slash form), POST /v1/chat/completions/render,
// and GET /v1/models.
package chatapi

import (
	"slices"

	"fmt"
	"strings"
	"sync"

	"github.com/honeai/hone/internal/chattemplate"
	"github.com/honeai/hone/internal/inference"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/structured"
	"github.com/honeai/hone/internal/tokenizer"
)

// Served is one base model: weights, tokenizer, template and its engine.
type Served struct {
	Name     string
	Dir      string
	Model    *model.Model
	Tok      *tokenizer.Tokenizer
	Template *chattemplate.Template // nil when the tokenizer has none
	Engine   *inference.Engine
	Created  int64
	// maxModelLen is the context served: the model's, or less (LoadOptions.MaxModelLen, or
	// what the KV cache holds).
	maxModelLen int

	guidesOnce sync.Once
	guides     *structured.Compiler
}

// Guides is the structured-output compiler over this model's vocabulary, built on first use
// (a byte trie of every token) and shared by all requests.
func (s *Served) Guides() *structured.Compiler {
	s.guidesOnce.Do(func() {
		n := s.Model.Config.VocabSize
		v := structured.Vocab{Tokens: make([][]byte, n)}
		for id := 0; id < n && id < s.Tok.VocabSize(); id++ {
			if !s.Tok.IsSpecial(id) {
				v.Tokens[id] = s.Tok.TokenBytes(id)
			}
		}
		v.EOS = s.Model.Config.EOSIDs()
		if eos, ok := s.Tok.EOS(); ok && !slices.Contains(v.EOS, eos) {
			v.EOS = append(v.EOS, eos)
		}
		s.guides = structured.NewCompiler(structured.NewIndex(v))
	})
	return s.guides
}

// guideFactory adapts a compiled constraint to the engine's Guide interface.
type guideFactory struct {
	c   *structured.Constraint
	tok *tokenizer.Tokenizer
}

func (f guideFactory) NewGuide() inference.Guide {
	return &guide{m: f.c.NewMatcher(), tok: f.tok}
}

type guide struct {
	m   *structured.Matcher
	tok *tokenizer.Tokenizer
}

func (g *guide) Mask(dst []uint64)    { g.m.Mask(dst) }
func (g *guide) Accept(tok int) error { return g.m.Accept(tok, g.tok.TokenBytes(tok)) }
func (g *guide) MustEnd() bool        { return g.m.MustEnd() }

// MaxModelLen is the context length served (vLLM's max_model_len): the model's
// max_position_embeddings, or less when LoadOptions.MaxModelLen or the KV cache's budget
// allows fewer positions to one sequence.
func (s *Served) MaxModelLen() int {
	if s.maxModelLen > 0 {
		return s.maxModelLen
	}
	return s.Model.Config.MaxPositionEmbeddings
}

// LoadOptions configure model loading.
type LoadOptions struct {
	Engine inference.Options
	DType  model.DType
	// Prepack packs the weights for serving at load (model.Prepack) rather than on the
	// first request; `hone worker`, which serves no requests, leaves it off.
	Prepack bool
	// MaxModelLen caps the context served (prompt plus output tokens of a request); 0 = the
	// model's. The KV cache's budget may cap it further.
	MaxModelLen int
}

// Load loads a Hugging Face model directory and starts its engine.
func Load(name, dir string, opts LoadOptions, created int64) (*Served, error) {
	m, err := model.Load(dir, model.LoadOptions{DType: opts.DType})
	if err != nil {
		return nil, err
	}
	if opts.Prepack {
		m.Prepack()
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		m.Close()
		return nil, err
	}
	s := &Served{Name: name, Dir: dir, Model: m, Tok: tok, Created: created}
	if src := tok.ChatTemplate(""); src != "" {
		if s.Template, err = chattemplate.Compile(src); err != nil {
			m.Close()
			return nil, fmt.Errorf("model %s: %w", name, err)
		}
	}
	s.Engine = inference.New(m, opts.Engine)
	s.maxModelLen = s.Engine.MaxSequenceLen()
	if opts.MaxModelLen > 0 {
		s.maxModelLen = min(s.maxModelLen, opts.MaxModelLen)
	}
	return s, nil
}

// Close stops the engine and unmaps the weights.
func (s *Served) Close() {
	s.Engine.Close()
	s.Model.Close()
}

// AdapterResolver finds trained LoRA checkpoints named <entity>/<project>/<model>:step<N>,
// :latest, or wandb-artifact:///<entity>/<project>/<model>[:step<N>]. The registry of
// trained models implements it; entity is the caller's, so a key never reaches another
// entity's checkpoints. ok is false when the name is not a checkpoint name it knows.
type AdapterResolver interface {
	ResolveAdapter(entity, name string) (base string, adapter *model.LoRA, servedName string, ok bool, err error)
}

// Registry holds the served base models.
type Registry struct {
	mu       sync.RWMutex
	models   map[string]*Served
	order    []string
	Adapters AdapterResolver
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{models: map[string]*Served{}} }

// Add serves a model under its name; the first added is the default.
func (r *Registry) Add(s *Served) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.models[s.Name]; !ok {
		r.order = append(r.order, s.Name)
	}
	r.models[s.Name] = s
}

// Get returns a base model by name ("" = the default).
func (r *Registry) Get(name string) (*Served, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if name == "" && len(r.order) > 0 {
		name = r.order[0]
	}
	s, ok := r.models[name]
	return s, ok
}

// List returns the served models in the order added.
func (r *Registry) List() []*Served {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*Served, 0, len(r.order))
	for _, n := range r.order {
		out = append(out, r.models[n])
	}
	return out
}

// Close stops every engine.
func (r *Registry) Close() {
	for _, s := range r.List() {
		s.Close()
	}
}

// looksLikeCheckpoint reports whether name has the shape of a trained-checkpoint name.
func looksLikeCheckpoint(name string) bool {
	return strings.HasPrefix(name, "wandb-artifact:///") || strings.Count(name, "/") == 2
}
