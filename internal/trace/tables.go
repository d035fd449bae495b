package trace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/honeai/hone/internal/fault"
	"github.com/honeai/hone/internal/membudget"
	"github.com/honeai/hone/internal/pyjson"
)

func (s *Service) digestRows(rows []json.RawMessage, field string) ([]RowData, []string, error) {
	data := make([]RowData, len(rows))
	digests := make([]string, len(rows))
	for i, raw := range rows {
		v, err := parseValue(raw, fmt.Sprintf("%s[%d]", field, i))
		if err != nil {
			return nil, nil, err
		}
		digests[i] = ValueDigest(v)
		data[i] = RowData{Digest: digests[i], Val: pyjson.Compact(v)}
	}
	return data, digests, nil
}

// TableCreate stores a table of rows; its digest comes from the rows' digests.
func (s *Service) TableCreate(ctx context.Context, req TableCreateReq) (TableCreateRes, error) {
	if req.Table.Rows == nil {
		return TableCreateRes{}, badField("table.rows", "is required (an array of rows)")
	}
	rows, digests, err := s.digestRows(req.Table.Rows, "table.rows")
	if err != nil {
		return TableCreateRes{}, err
	}
	digest := TableDigest(digests)
	if e := req.Table.ExpectedDigest; e != nil && *e != "" && *e != digest {
		return TableCreateRes{}, fault.Conflict("table.expected_digest", "table.expected_digest: does not match the digest Hone computed (%s); Hone digests keys in arrival order", digest)
	}
	if err := s.store.InsertTable(ctx, req.Table.ProjectID, digest, digests, rows, s.nowString()); err != nil {
		return TableCreateRes{}, err
	}
	ex := s.extrasFor(ctx, req.Table.ProjectID)
	ex.claim("", "table:"+digest)
	return TableCreateRes{Digest: digest, RowDigests: digests}, s.keepExtras(ctx, ex)
}

// TableUpdate applies appends, pops and inserts to a table, making a new table.
func (s *Service) TableUpdate(ctx context.Context, req TableUpdateReq) (TableUpdateRes, error) {
	base, err := s.store.TableRowDigests(ctx, req.ProjectID, req.BaseDigest)
	if errors.Is(err, ErrNotFound) {
		return TableUpdateRes{}, notFound("Table %s not found", req.BaseDigest)
	}
	if err != nil {
		return TableUpdateRes{}, err
	}
	digests := append([]string(nil), base...)
	var newRows []RowData
	updated := []string{}
	addRow := func(raw json.RawMessage, field string) (string, error) {
		if len(raw) == 0 {
			return "", badField(field, "is required")
		}
		v, err := parseValue(raw, field)
		if err != nil {
			return "", err
		}
		d := ValueDigest(v)
		newRows = append(newRows, RowData{Digest: d, Val: pyjson.Compact(v)})
		updated = append(updated, d)
		return d, nil
	}
	for i, u := range req.Updates {
		p := fmt.Sprintf("updates[%d]", i)
		n := 0
		if u.Append != nil {
			n++
		}
		if u.Pop != nil {
			n++
		}
		if u.Insert != nil {
			n++
		}
		if n != 1 {
			return TableUpdateRes{}, badField(p, "must be exactly one of append, pop, insert")
		}
		switch {
		case u.Append != nil:
			d, err := addRow(u.Append.Row, p+".append.row")
			if err != nil {
				return TableUpdateRes{}, err
			}
			digests = append(digests, d)
		case u.Pop != nil:
			if u.Pop.Index == nil || *u.Pop.Index < 0 || *u.Pop.Index >= len(digests) {
				return TableUpdateRes{}, badField(p+".pop.index", "index out of range for a table of %d rows", len(digests))
			}
			idx := *u.Pop.Index
			digests = append(digests[:idx], digests[idx+1:]...)
		case u.Insert != nil:
			if u.Insert.Index == nil || *u.Insert.Index < 0 || *u.Insert.Index > len(digests) {
				return TableUpdateRes{}, badField(p+".insert.index", "index out of range for a table of %d rows", len(digests))
			}
			d, err := addRow(u.Insert.Row, p+".insert.row")
			if err != nil {
				return TableUpdateRes{}, err
			}
			idx := *u.Insert.Index
			digests = append(digests[:idx], append([]string{d}, digests[idx:]...)...)
		}
	}
	digest := TableDigest(digests)
	if err := s.store.InsertTable(ctx, req.ProjectID, digest, digests, newRows, s.nowString()); err != nil {
		return TableUpdateRes{}, err
	}
	ex := s.extrasFor(ctx, req.ProjectID)
	ex.claim("", "table:"+digest)
	return TableUpdateRes{Digest: digest, UpdatedRowDigests: updated}, s.keepExtras(ctx, ex)
}

// TableCreateFromDigests makes a table of rows already stored.
func (s *Service) TableCreateFromDigests(ctx context.Context, req TableCreateFromDigestsReq) (TableCreateFromDigestsRes, error) {
	missing, err := s.store.RowsExist(ctx, req.ProjectID, req.RowDigests)
	if err != nil {
		return TableCreateFromDigestsRes{}, err
	}
	if len(missing) > 0 {
		return TableCreateFromDigestsRes{}, notFound("row digests not found: %s", strings.Join(missing, ", "))
	}
	digest := TableDigest(req.RowDigests)
	if e := req.ExpectedDigest; e != nil && *e != "" && *e != digest {
		return TableCreateFromDigestsRes{}, fault.Conflict("expected_digest", "expected_digest: does not match the digest Hone computed (%s); Hone digests keys in arrival order", digest)
	}
	if err := s.store.InsertTable(ctx, req.ProjectID, digest, req.RowDigests, nil, s.nowString()); err != nil {
		return TableCreateFromDigestsRes{}, err
	}
	ex := s.extrasFor(ctx, req.ProjectID)
	ex.claim("", "table:"+digest)
	return TableCreateFromDigestsRes{Digest: digest}, s.keepExtras(ctx, ex)
}

// TableQuery returns rows of a table with their absolute positions.
func (s *Service) TableQuery(ctx context.Context, req TableQueryReq) (TableQueryRes, error) {
	if req.Digest == "" {
		return TableQueryRes{}, badField("digest", "is required")
	}
	limit, offset, err := checkLimitOffset(req.Limit, req.Offset)
	if err != nil {
		return TableQueryRes{}, err
	}
	q := TableQuery{Limit: limit, Offset: offset}
	if req.Filter != nil && req.Filter.RowDigests != nil {
		q.RowDigests = req.Filter.RowDigests
	}
	for i, sb := range req.SortBy {
		dir := strings.ToLower(sb.Dir())
		if dir == "" {
			dir = "asc"
		}
		if dir != "asc" && dir != "desc" {
			return TableQueryRes{}, fault.Invalid(fmt.Sprintf("sort_by[%d].order", i), "sort_by[%d].order: invalid order %q (asc or desc)", i, sb.Dir())
		}
		if err := checkFieldPath(sb.Field); err != nil {
			return TableQueryRes{}, fault.Invalid(fmt.Sprintf("sort_by[%d].field", i), "sort_by[%d].field: %v", i, err)
		}
		q.Sort = append(q.Sort, SortBy{Field: sb.Field, Direction: dir})
	}
	var rows []TableRowSchema
	if len(q.Sort) > 0 && q.RowDigests == nil {
		rows, err = s.sortedTablePage(ctx, req.ProjectID, req.Digest, q)
	} else {
		rows, err = s.store.QueryTable(ctx, req.ProjectID, req.Digest, q)
	}
	if errors.Is(err, ErrNotFound) {
		return TableQueryRes{}, notFound("Table %s not found", req.Digest)
	}
	if err != nil {
		return TableQueryRes{}, err
	}
	loaded := 0
	for _, r := range rows {
		loaded += len(r.Val)
	}
	if err := membudget.Charge(ctx, loaded); err != nil {
		return TableQueryRes{}, err
	}
	return TableQueryRes{Rows: rows}, nil
}

// TableQueryStats counts a table's rows.
func (s *Service) TableQueryStats(ctx context.Context, req TableQueryStatsReq) (TableQueryStatsRes, error) {
	st, err := s.store.TableStats(ctx, req.ProjectID, []string{req.Digest})
	if errors.Is(err, ErrNotFound) {
		return TableQueryStatsRes{}, notFound("Table %s not found", req.Digest)
	}
	if err != nil {
		return TableQueryStatsRes{}, err
	}
	return TableQueryStatsRes{Count: st[0].Count}, nil
}

// TableQueryStatsBatch counts rows of several tables.
func (s *Service) TableQueryStatsBatch(ctx context.Context, req TableQueryStatsBatchReq) (TableQueryStatsBatchRes, error) {
	st, err := s.store.TableStats(ctx, req.ProjectID, req.Digests)
	if errors.Is(err, ErrNotFound) {
		return TableQueryStatsBatchRes{}, notFound("%s", strings.TrimPrefix(err.Error(), ErrNotFound.Error()+": "))
	}
	if err != nil {
		return TableQueryStatsBatchRes{}, err
	}
	if !req.IncludeStorageSize {
		for i := range st {
			st[i].StorageSizeBytes = nil
		}
	}
	return TableQueryStatsBatchRes{Tables: st}, nil
}
