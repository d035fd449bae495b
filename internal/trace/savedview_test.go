package trace

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/db/dbtest"
)

// TestSavedViewObjects: saved views are objects of base class SavedView, as Weave keeps them:
// the Python SDK's (weave.SavedView("traces", ...).filter_op(...).save(), its value in
// testdata/weave_saved_view.json, written by weave 0.54.0), Hone Studio's (the same shape with
// its query string in definition.hone_studio) and Weave's frontend's (builtin_object_class,
// no _bases) are listed by /objs/query's base_object_classes, a new version replaces a view
// and /obj/delete removes one.
func TestSavedViewObjects(t *testing.T) {
	sdkVal, err := os.ReadFile("testdata/weave_saved_view.json")
	if err != nil {
		t.Fatal(err)
	}
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		s := newService(t, d)
		studio := func(label, search string) string {
			return `{"_type":"SavedView","name":"` + label + `","description":null,"view_type":"traces","label":"` + label + `","definition":{"filter":{"trace_roots_only":true},` +
				`"query":{"$expr":{"$eq":[{"$getField":"summary.weave.status"},{"$literal":"success"}]}},"cols":{"inputs":true,"id":false},` +
				`"sort_by":[{"field":"summary.weave.total_cost","direction":"desc"}],"page":0,"page_size":50,"hone_studio":{"search":"` + search + `","columns":["name","cost"]}},` +
				`"_class_name":"SavedView","_bases":["BaseObject","BaseModel"]}`
		}
		for _, o := range []ObjSchemaForInsert{
			{ProjectID: proj, ObjectID: "traces_2026-11-29_13-00-25-04846", Val: sdkVal},
			{ProjectID: proj, ObjectID: "traces_studio", Val: raw(studio("agent runs", "?status=success"))},
			{ProjectID: proj, ObjectID: "traces_frontend", Val: raw(`{"view_type":"traces","label":"from the UI","definition":{"filter":{"op_names":["weave:///ent/proj/op/llm:*"]}}}`), BuiltinObjectClass: ptr("SavedView")},
			{ProjectID: proj, ObjectID: "other", Val: raw(`{"label":"not a view","_class_name":"Thing","_bases":["Object","BaseModel"]}`)},
		} {
			if _, err := s.ObjCreate(ctx, ObjCreateReq{Obj: o}, "ent"); err != nil {
				t.Fatalf("%s: %v", o.ObjectID, err)
			}
		}
		views := func() map[string]ObjSchema {
			t.Helper()
			res, err := s.ObjsQuery(ctx, ObjQueryReq{ProjectID: proj, Filter: &ObjectVersionFilter{BaseObjectClasses: []string{"SavedView"}, LatestOnly: ptr(true)}})
			if err != nil {
				t.Fatal(err)
			}
			out := map[string]ObjSchema{}
			for _, o := range res.Objs {
				if o.BaseObjectClass == nil || *o.BaseObjectClass != "SavedView" || o.LeafObjectClass == nil || *o.LeafObjectClass != "SavedView" {
					t.Errorf("%s: classes %v %v", o.ObjectID, o.BaseObjectClass, o.LeafObjectClass)
				}
				out[o.ObjectID] = o
			}
			return out
		}
		got := views()
		if len(got) != 3 {
			t.Fatalf("views: %v", got)
		}
		sdk := got["traces_2026-11-29_13-00-25-04846"]
		var v struct {
			Label      string `json:"label"`
			Definition struct {
				Filter struct {
					OpNames []string `json:"op_names"`
				} `json:"filter"`
				HoneStudio *struct {
					Search string `json:"search"`
				} `json:"hone_studio"`
			} `json:"definition"`
		}
		if err := json.Unmarshal(sdk.Val, &v); err != nil || v.Label != "Slow llm calls" || strings.Join(v.Definition.Filter.OpNames, ",") != "weave:///local/sv/op/llm:*" {
			t.Errorf("the SDK's view: %s", sdk.Val)
		}
		if string(got["traces_studio"].Val) != studio("agent runs", "?status=success") {
			t.Errorf("the Studio's view changed: %s", got["traces_studio"].Val)
		}
		// Saved again under its id: a new version, the latest listed.
		if _, err := s.ObjCreate(ctx, ObjCreateReq{Obj: ObjSchemaForInsert{ProjectID: proj, ObjectID: "traces_studio", Val: raw(studio("agent runs", "?status=error"))}}, "ent"); err != nil {
			t.Fatal(err)
		}
		got = views()
		if len(got) != 3 || got["traces_studio"].VersionIndex != 1 || !strings.Contains(string(got["traces_studio"].Val), `"search":"?status=error"`) {
			t.Errorf("after a new version: %v", got["traces_studio"])
		}
		if _, err := s.ObjDelete(ctx, ObjDeleteReq{ProjectID: proj, ObjectID: "traces_studio"}); err != nil {
			t.Fatal(err)
		}
		if got = views(); len(got) != 2 || got["traces_studio"].ObjectID != "" {
			t.Errorf("after delete: %v", got)
		}
	})
}
