package trace

import (
	"context"
	"errors"
	"runtime"
)

// ingestPart is the number of a batch's items decoded, checked and turned into rows at a
// time by CallUpsertBatchBody; a batch of more items is written while its later parts are
// still being decoded.
const ingestPart = 256

// errBatchAborted ends the write of a batch whose later items turned out bad.
var errBatchAborted = errors.New("trace: batch aborted")

// CallUpsertBatchBody decodes the body of POST /call/upsert_batch and records it as
// CallUpsertBatch does, in one transaction, with the same answer and the same error for every
// body. check is called on each decoded item in order (the caller's checks of text and the
// caller's defaults); route names the route for the fields Hone does not know.
//
// A large batch is a pipeline: the transaction writes the rows of its first items while the
// next ones are decoded, checked and turned into rows, so that decoding (which runs on
// several cores) and the store's writes (one writer) overlap. A bad item found after earlier
// ones were written rolls the transaction back. Errors keep the precedence of the plain
// path (a malformed body, then the first item that does not decode, then the first that
// fails check, then the first refused by the ordered pass, then the store's error): once an
// error is found, the remaining parts still go through the stages whose errors would come
// first.
func (s *Service) CallUpsertBatchBody(ctx context.Context, route string, body []byte, check func(i int, it *CallBatchItem) error, authorize Authorizer) (CallCreateBatchRes, error) {
	var unk []UnknownField
	raw, err := batchItems(body, &unk)
	if err != nil {
		return CallCreateBatchRes{}, err
	}
	items := make([]CallBatchItem, len(raw))
	workers := runtime.GOMAXPROCS(0)
	if len(raw) <= ingestPart || workers < 2 {
		if err := decodeItems(raw, 0, items, &unk, workers); err != nil {
			return CallCreateBatchRes{}, err
		}
		for i := range items {
			if err := check(i, &items[i]); err != nil {
				return CallCreateBatchRes{}, err
			}
		}
		return s.CallUpsertBatch(WithUnknownFields(ctx, route, unk), CallCreateBatchReq{Batch: items}, authorize)
	}

	res := CallCreateBatchRes{Res: make([]any, len(raw))}
	pass := &batchPass{s: s, authorize: authorize, res: res.Res, started: map[[2]string]int{}}
	pass.addUnknown(route, unk)
	parts := make(chan []CallWrite, 1)
	abort := make(chan struct{})
	written := make(chan struct{})
	var werr error
	var wpanic any // a panic of the writer, raised again on the request's goroutine
	go func() {
		defer close(written)
		defer func() {
			if wpanic = recover(); wpanic != nil {
				werr = errBatchAborted
			}
		}()
		werr = s.store.UpsertCallStream(ctx, func() ([]CallWrite, error) {
			select {
			case ws, ok := <-parts:
				if !ok {
					return nil, nil
				}
				return ws, nil
			case <-abort:
				return nil, errBatchAborted
			}
		})
	}()
	// The stages of a part, in the order of their errors' precedence.
	const (
		decoding = iota + 1
		checking
		passing
		writing
	)
	failed, ferr := 0, error(nil) // the stage of the first error found, and that error
	fail := func(stage int, err error) {
		if failed == 0 || stage < failed {
			failed, ferr = stage, err
		}
	}
	workers-- // one core is the writer's
	for lo := 0; lo < len(raw) && failed != decoding; lo += ingestPart {
		hi := min(lo+ingestPart, len(raw))
		var partUnk []UnknownField
		if err := decodeItems(raw[lo:hi], lo, items[lo:hi], &partUnk, workers); err != nil {
			fail(decoding, err)
			break
		}
		if failed == 0 || failed > checking {
			for i := lo; i < hi; i++ {
				if err := check(i, &items[i]); err != nil {
					fail(checking, err)
					break
				}
			}
		}
		if failed == 0 || failed > passing {
			pass.addUnknown(route, partUnk)
			if err := pass.run(items[lo:hi], lo, s.batchRows(items[lo:hi], lo, workers)); err != nil {
				fail(passing, err)
			}
		}
		if failed == 0 {
			select {
			case parts <- pass.take():
			case <-written: // the write failed: werr
				fail(writing, werr)
			}
		}
	}
	wait := func() {
		<-written
		if wpanic != nil {
			panic(wpanic)
		}
	}
	if failed != 0 {
		close(abort)
		wait()
		if failed == writing {
			return CallCreateBatchRes{}, werr
		}
		return CallCreateBatchRes{}, ferr
	}
	if len(pass.writes) > 0 {
		select {
		case parts <- pass.writes:
		case <-written:
		}
	}
	close(parts)
	wait()
	if werr != nil {
		return CallCreateBatchRes{}, werr
	}
	return res, s.keepExtras(ctx, pass.ex)
}

// addUnknown adds fields Hone does not know to those the pass's items claim.
func (b *batchPass) addUnknown(route string, fields []UnknownField) {
	if len(fields) == 0 {
		return
	}
	if b.ex == nil {
		b.ex = &extras{route: route}
	}
	b.ex.fields = append(b.ex.fields, fields...)
	b.ex.claimed = append(b.ex.claimed, make([]bool, len(fields))...)
}
