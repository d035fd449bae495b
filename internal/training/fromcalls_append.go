package training

import (
	"context"
	"encoding/json"

	"github.com/honeai/hone/internal/fault"
	"github.com/honeai/hone/internal/trace"
)

// previousRows reads the rows of the latest version of the Dataset name in project, for a
// request with append (Hone Studio's "add to dataset": the picked calls join the rows the
// dataset already has). A dataset that does not exist yet has none.
func (s *Service) previousRows(ctx context.Context, project, name string) ([]json.RawMessage, error) {
	obj, err := s.Trace.ObjRead(ctx, trace.ObjReadReq{ProjectID: project, ObjectID: name, Digest: "latest"})
	if fault.Is(err, fault.KindNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	ref, err := trace.ParseRef("weave:///" + project + "/object/" + name + ":" + obj.Obj.Digest)
	if err != nil {
		return nil, err
	}
	rows, err := s.Trace.DatasetRows(ctx, ref)
	if err != nil {
		return nil, fault.Invalid("name", "append: %s in %s is not a dataset to add rows to: %v", name, project, err)
	}
	return rows, nil
}

// appendRows puts the rows the dataset already has before rows, when req asks to append.
func (s *Service) appendRows(ctx context.Context, req FromCallsRequest, project string, rows []json.RawMessage, res *FromCallsResult) ([]json.RawMessage, error) {
	if !req.Append {
		return rows, nil
	}
	prev, err := s.previousRows(ctx, project, req.Name)
	if err != nil {
		return nil, err
	}
	if len(prev)+len(rows) > maxFromCalls {
		return nil, fault.Invalid("append", "append: %s would hold %d rows, more than %d", req.Name, len(prev)+len(rows), maxFromCalls)
	}
	res.PreviousRows = len(prev)
	return append(prev, rows...), nil
}
