package chattemplate

import (
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/nodes"
)

// Negative subscripts. gonja v2.9.1 (pinned) finds x[-n] only when x is longer than n, so
// `messages[-1]` of a one-message conversation, or Mistral v0.3's `user_messages[-1]` with
// one user turn, is undefined where Python gives the last item. pythonIndex rewrites a
// subscript `x[i]` whose index is not a string literal into `x[i | __hone_index(x)]`: an
// integer index below zero becomes len(x) + i when that is an index of x (a list or a
// string), which gonja then finds; anything else passes through unchanged, so a key, an index
// in range and one out of range behave as before.

// indexFilter is the filter pythonIndex wraps subscripts in.
const indexFilter = "__hone_index"

// pythonIndex rewrites g's index as described above (once: a rewritten index is left alone).
func pythonIndex(g *nodes.GetItem) {
	arg, ok := g.Arg.(nodes.Expression)
	target, tok := g.Node.(nodes.Expression)
	if !ok || !tok {
		return
	}
	switch a := arg.(type) {
	case *nodes.String:
		return
	case *nodes.Integer:
		if a.Val >= 0 {
			return
		}
	case *nodes.FilteredExpression:
		if len(a.Filters) == 1 && a.Filters[0].Name == indexFilter {
			return
		}
	}
	g.Arg = &nodes.FilteredExpression{Expression: arg, Filters: []*nodes.FilterCall{{Token: g.Location, Name: indexFilter,
		Args: []nodes.Expression{target}, Kwargs: map[string]nodes.Expression{}}}}
}

// filterIndex is __hone_index: in is the index, the argument the subscripted value.
func filterIndex(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() || !in.IsInteger() || len(params.Args) != 1 {
		return in
	}
	i, x := in.Integer(), params.Args[0]
	if i >= 0 || !(x.IsList() || x.IsString()) {
		return in
	}
	if n := x.Len(); n+i >= 0 {
		return exec.AsValue(n + i)
	}
	return in
}
