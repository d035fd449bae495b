package hub

import (
	"fmt"
	"regexp"
	"strings"
)

// Kind is where a reference's model comes from.
type Kind string

const (
	// HF is a Hugging Face Hub repository (hf:OWNER/REPO...).
	HF Kind = "hf"
	// Ollama is a model of an Ollama registry (ollama:NAME[:TAG]).
	Ollama Kind = "ollama"
)

// Ref is a parsed model reference:
//
//	hf:OWNER/REPO[@REVISION]                  the repository's safetensors model (config, tokenizer, shards)
//	hf:OWNER/REPO[@REVISION]:QUANT            one GGUF file of a GGUF repository, by its quantization (Q4_K_M)
//	hf:OWNER/REPO/FILE.gguf[@REVISION]        one GGUF file by name
//	ollama:[HOST/][NAMESPACE/]NAME[:TAG]      a model of an Ollama registry (registry.ollama.ai, library, latest)
type Ref struct {
	Kind Kind
	// HF: the repository (OWNER/REPO), the revision asked for (a branch, tag or commit; "main"
	// when none is given), and at most one of Quant and File.
	Repo     string
	Revision string
	Quant    string
	File     string
	// Ollama: the registry host, the namespace ("library" for the official models), the
	// model's name and its tag ("latest" when none is given).
	Host, Namespace, Name, Tag string
}

// Default parts of a reference.
const (
	DefaultRevision  = "main"
	DefaultHost      = "registry.ollama.ai"
	DefaultNamespace = "library"
	DefaultTag       = "latest"
)

// IsRef reports whether s is written as a model reference (hf:... or ollama:...) rather than
// a path. Parse says whether it is a valid one.
func IsRef(s string) bool {
	return strings.HasPrefix(s, "hf:") || strings.HasPrefix(s, "ollama:")
}

var (
	hfName     = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$`)
	quantName  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$`)
	ollamaName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,79}$`)
	ollamaHost = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]*(:[0-9]+)?$`)
	ollamaTag  = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$`)
	revision   = regexp.MustCompile(`^[A-Za-z0-9._][A-Za-z0-9._/-]{0,199}$`)
)

// Parse reads a model reference; its errors show the forms it takes.
func Parse(s string) (Ref, error) {
	switch {
	case strings.HasPrefix(s, "hf:"):
		return parseHF(s)
	case strings.HasPrefix(s, "ollama:"):
		return parseOllama(s)
	}
	return Ref{}, fmt.Errorf("%q is not a model reference: use hf:OWNER/REPO[@REVISION], hf:OWNER/REPO:QUANT, hf:OWNER/REPO/FILE.gguf or ollama:NAME[:TAG]", s)
}

func parseHF(s string) (Ref, error) {
	bad := func(why string) (Ref, error) {
		return Ref{}, fmt.Errorf("%q: %s (use hf:OWNER/REPO[@REVISION], hf:OWNER/REPO[@REVISION]:QUANT or hf:OWNER/REPO/FILE.gguf[@REVISION])", s, why)
	}
	rest := strings.TrimPrefix(s, "hf:")
	r := Ref{Kind: HF, Revision: DefaultRevision}
	if i := strings.LastIndexByte(rest, ':'); i >= 0 {
		r.Quant, rest = rest[i+1:], rest[:i]
		if !quantName.MatchString(r.Quant) {
			return bad(fmt.Sprintf("%q is not a quantization name such as Q4_K_M", r.Quant))
		}
	}
	if i := strings.IndexByte(rest, '@'); i >= 0 {
		r.Revision, rest = rest[i+1:], rest[:i]
		if !revision.MatchString(r.Revision) || strings.Contains(r.Revision, "..") {
			return bad(fmt.Sprintf("%q is not a revision (a branch, tag or commit hash)", r.Revision))
		}
	}
	parts := strings.Split(rest, "/")
	if len(parts) < 2 {
		return bad("no OWNER/REPO")
	}
	for _, p := range parts[:2] {
		if !hfName.MatchString(p) || strings.Contains(p, "..") {
			return bad(fmt.Sprintf("%q is not a repository name", p))
		}
	}
	r.Repo = parts[0] + "/" + parts[1]
	if len(parts) > 2 {
		r.File = strings.Join(parts[2:], "/")
		if !strings.HasSuffix(strings.ToLower(r.File), ".gguf") {
			return bad(fmt.Sprintf("%q: a file of the repository is named only for GGUF files (FILE.gguf)", r.File))
		}
		for _, p := range parts[2:] {
			if p == "" || p == "." || p == ".." {
				return bad(fmt.Sprintf("%q is not a file path", r.File))
			}
		}
		if r.Quant != "" {
			return bad("give a quantization or a file, not both")
		}
	}
	return r, nil
}

func parseOllama(s string) (Ref, error) {
	bad := func(why string) (Ref, error) {
		return Ref{}, fmt.Errorf("%q: %s (use ollama:NAME[:TAG], ollama:NAMESPACE/NAME[:TAG] or ollama:HOST/NAMESPACE/NAME[:TAG])", s, why)
	}
	rest := strings.TrimPrefix(s, "ollama:")
	r := Ref{Kind: Ollama, Host: DefaultHost, Namespace: DefaultNamespace, Tag: DefaultTag}
	if i := strings.LastIndexByte(rest, ':'); i > strings.LastIndexByte(rest, '/') {
		r.Tag, rest = rest[i+1:], rest[:i]
		if !ollamaTag.MatchString(r.Tag) {
			return bad(fmt.Sprintf("%q is not a tag", r.Tag))
		}
	}
	parts := strings.Split(rest, "/")
	switch len(parts) {
	case 1:
		r.Name = parts[0]
	case 2:
		r.Namespace, r.Name = parts[0], parts[1]
	case 3:
		r.Host, r.Namespace, r.Name = parts[0], parts[1], parts[2]
		if !ollamaHost.MatchString(r.Host) {
			return bad(fmt.Sprintf("%q is not a registry host", r.Host))
		}
	default:
		return bad("too many parts")
	}
	for _, p := range []string{r.Namespace, r.Name} {
		if !ollamaName.MatchString(p) || strings.Contains(p, "..") {
			return bad(fmt.Sprintf("%q is not a model name (lower-case letters, digits, '.', '-', '_')", p))
		}
	}
	return r, nil
}

// String writes the reference back, the defaults left out.
func (r Ref) String() string {
	if r.Kind == Ollama {
		s := "ollama:"
		switch {
		case r.Host != DefaultHost:
			s += r.Host + "/" + r.Namespace + "/"
		case r.Namespace != DefaultNamespace:
			s += r.Namespace + "/"
		}
		return s + r.Name + ":" + r.Tag
	}
	s := "hf:" + r.Repo
	if r.File != "" {
		s += "/" + r.File
	}
	if r.Revision != DefaultRevision {
		s += "@" + r.Revision
	}
	if r.Quant != "" {
		s += ":" + r.Quant
	}
	return s
}

// isCommit reports whether rev is a full commit hash (a revision that never moves).
func isCommit(rev string) bool {
	if len(rev) != 40 {
		return false
	}
	for _, c := range rev {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
