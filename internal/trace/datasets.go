package trace

import (
	"context"
	"encoding/json"
	"fmt"
)

// DatasetRows returns the rows of a weave:/// ref as stored: a table's, or those of the rows
// table of an object that has one (a weave Dataset), in order. The caller has authorised
// the ref's project; a Dataset's rows must be in the same project.
func (s *Service) DatasetRows(ctx context.Context, ref Ref) ([]json.RawMessage, error) {
	project := ref.Entity + "/" + ref.Project
	digest := ref.Digest
	switch ref.Kind {
	case "table":
	case "object":
		obj, err := s.ObjRead(ctx, ObjReadReq{ProjectID: project, ObjectID: ref.Name, Digest: ref.Digest})
		if err != nil {
			return nil, err
		}
		var val struct {
			Rows string `json:"rows"`
		}
		json.Unmarshal(obj.Obj.Val, &val)
		rows, err := ParseRef(val.Rows)
		if err != nil || rows.Kind != "table" {
			return nil, fmt.Errorf("%s/%s:%s is not a dataset (it has no rows table)", project, ref.Name, ref.Digest)
		}
		if rows.Entity+"/"+rows.Project != project {
			return nil, fmt.Errorf("the rows of %s/%s:%s are in another project (%s/%s)", project, ref.Name, ref.Digest, rows.Entity, rows.Project)
		}
		digest = rows.Digest
	default:
		return nil, fmt.Errorf("a %s ref holds no rows", ref.Kind)
	}
	var out []json.RawMessage
	const page = 1000
	for offset := 0; ; offset += page {
		limit, off := page, offset
		res, err := s.TableQuery(ctx, TableQueryReq{ProjectID: project, Digest: digest, Limit: &limit, Offset: &off})
		if err != nil {
			return nil, err
		}
		for _, row := range res.Rows {
			out = append(out, row.Val)
		}
		if len(res.Rows) < page {
			return out, nil
		}
	}
}
