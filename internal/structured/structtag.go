package structured

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// triggerText is the built-in rule of a structural tag: any text, until one of the triggers
// appears; then the rule called for that trigger (the rest of a tag's begin, its content and
// its end) must follow, after which free text goes on. States are the nodes of an
// Aho-Corasick automaton over the triggers; a node where a trigger ends only calls.
type triggerText struct {
	triggers []string
	call     []int32 // rule called when trigger i appears
	next     [][256]int32
	fired    []int32 // trigger ending at the node, or -1
}

func newTriggerText(triggers []string, call []int32) *triggerText {
	t := &triggerText{triggers: triggers, call: call}
	goto_ := []map[byte]int32{{}}
	t.fired = []int32{-1}
	for i, tr := range triggers {
		n := int32(0)
		for j := 0; j < len(tr); j++ {
			c, ok := goto_[n][tr[j]]
			if !ok {
				c = int32(len(goto_))
				goto_ = append(goto_, map[byte]int32{})
				t.fired = append(t.fired, -1)
				goto_[n][tr[j]] = c
			}
			n = c
		}
		if t.fired[n] < 0 {
			t.fired[n] = int32(i)
		}
	}
	// Breadth-first: failure links and the full transition table.
	t.next = make([][256]int32, len(goto_))
	fail := make([]int32, len(goto_))
	queue := []int32{0}
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		if u != 0 && t.fired[u] < 0 {
			t.fired[u] = t.fired[fail[u]] // a trigger ending here as a suffix
		}
		for b := 0; b < 256; b++ {
			if v, ok := goto_[u][byte(b)]; ok {
				if u != 0 {
					fail[v] = t.next[fail[u]][b]
				}
				t.next[u][b] = v
				queue = append(queue, v)
			} else if u != 0 {
				t.next[u][b] = t.next[fail[u]][b]
			}
		}
	}
	return t
}

func (t *triggerText) Step(s int, b byte) int {
	if s < 0 || t.fired[s] >= 0 {
		return dead
	}
	return int(t.next[s][b])
}

func (t *triggerText) Accepting(s int) bool { return s >= 0 && t.fired[s] < 0 }

func (t *triggerText) Calls(s int) []int32 {
	if s < 0 || t.fired[s] < 0 {
		return nil
	}
	return []int32{t.call[t.fired[s]]}
}

func (t *triggerText) CallStep(s int, k int32) int {
	if s >= 0 && t.fired[s] >= 0 && t.call[t.fired[s]] == k {
		return 0
	}
	return dead
}

func (t *triggerText) search(consume bool, callOK func(int32) bool, onCall func(int32)) bool {
	if consume && onCall != nil {
		for _, k := range t.call {
			onCall(k)
		}
	}
	return true // the start accepts; no call is reached without input (triggers are not empty)
}

func (t *triggerText) callees() []int32 { return t.call }

// StructuralTag is vLLM's (xgrammar's) structural tag: free text, in which a trigger must be
// followed by one of the structures whose begin starts with it: the begin, content matching
// the schema, the end.
type StructuralTag struct {
	Structures []struct {
		Begin  string          `json:"begin"`
		Schema json.RawMessage `json:"schema"`
		End    string          `json:"end"`
	} `json:"structures"`
	Triggers []string `json:"triggers"`
}

// parseStructuralTag reads a structural tag (the object, or a JSON string holding it) and
// checks it; errors name the field.
func parseStructuralTag(raw json.RawMessage) (*StructuralTag, string, error) {
	var str string
	if json.Unmarshal(raw, &str) == nil {
		raw = json.RawMessage(str)
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, "", fmt.Errorf("the structural tag must be a JSON object: %w", err)
	}
	if _, ok := probe["format"]; ok {
		return nil, "format", fmt.Errorf("the structural tag \"format\" form is not supported; give \"structures\" (begin, schema, end) and \"triggers\"")
	}
	var st StructuralTag
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, "", fmt.Errorf("the structural tag is malformed: %w", err)
	}
	if len(st.Structures) == 0 {
		return nil, "structures", fmt.Errorf("the structural tag needs at least one structure")
	}
	if len(st.Triggers) == 0 {
		return nil, "triggers", fmt.Errorf("the structural tag needs at least one trigger")
	}
	for i, tr := range st.Triggers {
		if tr == "" {
			return nil, fmt.Sprintf("triggers[%d]", i), fmt.Errorf("a trigger cannot be empty")
		}
	}
	for i, tr := range st.Triggers {
		ok := false
		for _, s := range st.Structures {
			ok = ok || strings.HasPrefix(s.Begin, tr)
		}
		if !ok {
			return nil, fmt.Sprintf("triggers[%d]", i), fmt.Errorf("the trigger %q begins none of the structures", tr)
		}
	}
	for i, s := range st.Structures {
		ok := false
		for _, tr := range st.Triggers {
			ok = ok || strings.HasPrefix(s.Begin, tr)
		}
		if !ok {
			return nil, fmt.Sprintf("structures[%d].begin", i), fmt.Errorf("the begin %q of structure %d starts with none of the triggers", s.Begin, i)
		}
	}
	return &st, "", nil
}

// rules builds the rule set of a structural tag: rule 0 is free text with the triggers; for
// each trigger a rule of the alternatives it may start (the rest of each begin, the content,
// the end); schemas add their own rules.
func (st *StructuralTag) rules(o SchemaOptions) (RuleSet, error) {
	set := &RuleSet{Rules: []string{""}, Names: []string{"structural_tag"}, text: map[int]*triggerText{}}
	calls := make([]int32, len(st.Triggers))
	for i, tr := range st.Triggers {
		k := len(set.Rules)
		set.Rules = append(set.Rules, "")
		set.Names = append(set.Names, "trigger "+tr)
		calls[i] = int32(k)
		var alts []string
		for j, s := range st.Structures {
			if !strings.HasPrefix(s.Begin, tr) {
				continue
			}
			schema := s.Schema
			if len(schema) == 0 || string(schema) == "null" {
				schema = json.RawMessage(`{}`)
			}
			oj := o
			content, err := schemaInto(set, schema, oj)
			if err != nil {
				if ue, ok := err.(*UnsupportedError); ok {
					for f := range ue.Features {
						ue.Features[f] = fmt.Sprintf("structures[%d].schema: %s", j, ue.Features[f])
					}
				}
				return RuleSet{}, err
			}
			alts = append(alts, regexp.QuoteMeta(s.Begin[len(tr):])+content+regexp.QuoteMeta(s.End))
		}
		set.Rules[k] = "(?:" + strings.Join(alts, "|") + ")"
	}
	set.text[0] = newTriggerText(st.Triggers, calls)
	if len(set.Rules) > maxRules {
		return RuleSet{}, &UnsupportedError{Features: []string{fmt.Sprintf("more than %d rules", maxRules-1)}}
	}
	return *set, nil
}
