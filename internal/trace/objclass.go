package trace

import "github.com/honeai/hone/internal/pyjson"

// Kind returns "op" when val is a saved op (`{"_type": "CustomWeaveType", "weave_type":
// {"type": "Op"}, ...}`) and "object" otherwise, as Weave's get_kind does.
func Kind(val pyjson.Value) string {
	if t, ok := val.Path("weave_type", "type"); ok && t.String() == "Op" {
		if _, ok := val.Get("_type"); ok {
			return "op"
		}
	}
	return "object"
}

// ObjectClasses returns the base and leaf object classes of val as Weave derives them: only
// for dicts whose `_bases` ends with "BaseModel" and whose `_bases[-2]` is "BaseObject" or
// "Object"; then leaf = `_class_name` and base = `_bases[-3]` when there are more than two
// bases, else the leaf. Otherwise both are absent ("").
func ObjectClasses(val pyjson.Value) (base, leaf string) {
	basesV, ok := val.Get("_bases")
	if !ok || basesV.Kind != pyjson.Array {
		return "", ""
	}
	bases := basesV.Arr
	n := len(bases)
	if n < 2 || bases[n-1].String() != "BaseModel" {
		return "", ""
	}
	if b := bases[n-2].String(); b != "BaseObject" && b != "Object" {
		return "", ""
	}
	cn, ok := val.Get("_class_name")
	if !ok || cn.Kind != pyjson.String {
		return "", ""
	}
	leaf = cn.Str
	base = leaf
	if n > 2 && bases[n-3].Kind == pyjson.String {
		base = bases[n-3].Str
	}
	return base, leaf
}
