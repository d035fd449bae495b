// Package serving holds the served base models: each one's weights, tokenizer, chat template
// and inference engine (Load), its structured-output compiler (Guides), and the set of served
// models by name (Models). The chat API serves requests on them and the training service
// trains adapters on them; trained checkpoints reach chat through an AdapterResolver.
//
//	models := serving.NewModels()
//	s, err := serving.Load("demo", dir, serving.LoadOptions{Engine: inference.Options{}}, time.Now().Unix())
//	models.Add(s)
package serving

import (
	"context"
	"errors"
	"sort"
	"sync"

	"github.com/honeai/hone/internal/chattemplate"
	"github.com/honeai/hone/internal/gguf"
	"github.com/honeai/hone/internal/inference"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/structured"
	"github.com/honeai/hone/internal/tokenizer"
)

// Served is one base model: weights, tokenizer, template and its engine.
type Served struct {
	Name  string
	Dir   string
	Model *model.Model
	Tok   *tokenizer.Tokenizer
	// Template is the chat template chat and training render with (Load's: the one given at
	// load, the model's own, or a built-in one; never nil after Load).
	Template *chattemplate.Template
	// TemplateFrom says where Template came from ("tokenizer_config.json", "built-in gemma
	// (...)", the --chat-template file), for the log.
	TemplateFrom string
	// EOS are the token ids that end generation (stopIDs): the model's end-of-sequence ids,
	// the tokenizer's, and its end-of-turn tokens recognised by their text.
	EOS     []int
	Engine  *inference.Engine
	Created int64
	// ToolParser is the tool-call parser family the server was told to use for this model
	// (toolcall.Hermes, ...; toolcall.None for no parsing); "" detects it from the chat
	// template.
	ToolParser string
	// maxModelLen is the context served: the model's, or less (LoadOptions.MaxModelLen, or
	// what the KV cache holds).
	maxModelLen int

	guidesOnce sync.Once
	guides     *structured.Compiler

	// users counts the holders of Acquire (training runs); Close waits for them before it
	// unmaps the weights.
	usersMu sync.Mutex
	users   int
	closed  bool
	idle    chan struct{} // closed when users drops to 0 after Close began
}

// ErrClosed is returned by Acquire once the model is being closed.
var ErrClosed = errors.New("serving: the model is shutting down")

// Acquire registers a user of the model's weights outside the inference engine (a training
// run): Close waits for every user to call release before it unmaps them, so that no pass
// ever reads released memory. It fails with ErrClosed once Close has begun.
func (s *Served) Acquire() (release func(), err error) {
	s.usersMu.Lock()
	defer s.usersMu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	s.users++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.usersMu.Lock()
			defer s.usersMu.Unlock()
			s.users--
			if s.users == 0 && s.idle != nil {
				close(s.idle)
				s.idle = nil
			}
		})
	}, nil
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
		v.EOS = s.StopIDs()
		s.guides = structured.NewCompiler(structured.NewIndex(v))
	})
	return s.guides
}

// StopIDs are the ids that end generation on this model (EOS, or, for a Served not made by
// Load, the model's and the tokenizer's end-of-sequence ids).
func (s *Served) StopIDs() []int {
	if s.EOS != nil {
		return s.EOS
	}
	return stopIDs(&s.Model.Config, s.Tok, nil, nil)
}

// GuideFactory adapts a compiled constraint to the engine's Guide interface.
func (s *Served) GuideFactory(c *structured.Constraint) inference.GuideFactory {
	return guideFactory{c: c, tok: s.Tok}
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
	// Quantize quantizes the weights at load (model.LoadOptions.Quantize; F32: none).
	Quantize gguf.TensorType
	// Prepack packs the weights for serving at load (model.Prepack) rather than on the
	// first request; `hone worker`, which serves no requests, leaves it off.
	Prepack bool
	// NoEngine loads the model without an inference engine (no KV cache): for training
	// only, as `hone worker` does. Served.Engine is then nil.
	NoEngine bool
	// MaxModelLen caps the context served (prompt plus output tokens of a request); 0 = the
	// model's. The KV cache's budget may cap it further.
	MaxModelLen int
	// ChatTemplate is a chat template source given for this model (--chat-template): it
	// replaces the model's own. "" keeps the model's own, or where its files have none the
	// built-in template of its family (chattemplate.BuiltinFor); where none fits, Load fails
	// with ErrNoChatTemplate.
	ChatTemplate string
	// ChatTemplateFrom names where ChatTemplate came from (a file), for TemplateFrom.
	ChatTemplateFrom string
}

// Load loads a Hugging Face model directory (or a GGUF file), finds its chat template and
// the ids that end its generation, and starts its engine (unless NoEngine).
func Load(name, dir string, opts LoadOptions, created int64) (*Served, error) {
	m, err := model.Load(dir, model.LoadOptions{DType: opts.DType, Quantize: opts.Quantize})
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
	if err := s.resolveTemplate(opts); err != nil {
		m.Close()
		return nil, err
	}
	s.EOS = stopIDs(&m.Config, tok, s.Template, s.SpecialTokens())
	if !opts.NoEngine {
		s.Engine = inference.New(m, opts.Engine)
		s.maxModelLen = s.Engine.MaxSequenceLen()
	}
	if opts.MaxModelLen > 0 {
		s.maxModelLen = min(s.MaxModelLen(), opts.MaxModelLen)
	}
	return s, nil
}

// Close stops the engine, waits for the users of Acquire to release the model, and then
// unmaps the weights.
func (s *Served) Close() {
	s.usersMu.Lock()
	if s.closed {
		s.usersMu.Unlock()
		return
	}
	s.closed = true
	var wait chan struct{}
	if s.users > 0 {
		wait = make(chan struct{})
		s.idle = wait
	}
	s.usersMu.Unlock()
	if s.Engine != nil {
		s.Engine.Close()
	}
	if wait != nil {
		<-wait
	}
	s.Model.Close()
}

// AdapterResolver finds trained LoRA checkpoints named <entity>/<project>/<model>:step<N>,
// :latest, or wandb-artifact:///<entity>/<project>/<model>[:step<N>]. The training service
// implements it; entity is the caller's, so a key never reaches another entity's
// checkpoints. ok is false when the name is not a checkpoint name it knows.
type AdapterResolver interface {
	ResolveAdapter(ctx context.Context, entity, name string) (a Adapter, ok bool, err error)
	// ListAdapters lists the trained models entity may chat with.
	ListAdapters(ctx context.Context, entity string) ([]TrainedModel, error)
}

// Adapter is a resolved checkpoint: the served base model it adapts, its LoRA weights (nil
// for step 0, the base itself) and the exact name it is served as (<...>:step<N>).
type Adapter struct {
	Base string
	LoRA *model.LoRA
	Name string
}

// TrainedModel is one trained model: Name is <entity>/<project>/<name> (its latest
// checkpoint; :step<N> names another), Base the served model it adapts.
type TrainedModel struct {
	Name, Base, Owner string
	Created           int64
}

// Models is the set of served base models, by name.
type Models struct {
	mu     sync.RWMutex
	models map[string]*Served
	order  []string
}

// NewModels returns an empty set.
func NewModels() *Models { return &Models{models: map[string]*Served{}} }

// Add serves a model under its name; the first added is the default.
func (r *Models) Add(s *Served) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.models[s.Name]; !ok {
		r.order = append(r.order, s.Name)
	}
	r.models[s.Name] = s
}

// Get returns a base model by name ("" = the default).
func (r *Models) Get(name string) (*Served, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if name == "" && len(r.order) > 0 {
		name = r.order[0]
	}
	s, ok := r.models[name]
	return s, ok
}

// List returns the served models: the default first, then the others by name, so that nodes
// serving the same models list them alike, whichever order they loaded them in (a node picks
// up base models registered in the shared store while it runs).
func (r *Models) List() []*Served {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*Served, 0, len(r.order))
	for _, n := range r.order {
		out = append(out, r.models[n])
	}
	if len(out) > 1 {
		rest := out[1:]
		sort.Slice(rest, func(i, j int) bool { return rest[i].Name < rest[j].Name })
	}
	return out
}

// Close stops every engine.
func (r *Models) Close() {
	for _, s := range r.List() {
		s.Close()
	}
}
