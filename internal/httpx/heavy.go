package httpx

import (
	"io"
	"net/http"

	"github.com/honeai/hone/internal/apierror"
	"github.com/honeai/hone/internal/auth"
	"github.com/honeai/hone/internal/membudget"
)

// Heavy is the middleware of the routes that can amplify (a small request naming a lot of
// stored data: refs, object and table reads, calls queries, stored Responses input items,
// file reads). It goes after Authenticate: the request holds one of its key's slots for such
// routes (limiter; past it a 429 with Retry-After), and a lease of the process's memory budget
// for requests in its context (membudget.Budget) for its whole duration, to which its body is
// charged as it is read and the service charges what it loads and answers; a charge that does
// not fit waits briefly, then the request is a 503 with Retry-After.
func Heavy(budget *membudget.Budget, limiter *KeyLimiter) Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if limiter != nil {
				key := ""
				if p, ok := auth.FromContext(r.Context()); ok {
					key = p.KeyID
				}
				release, ok := limiter.Acquire(key)
				if !ok {
					e := apierror.TooManyRequests("Concurrency limit reached for this route: at most %d concurrent requests per API key read stored data at once (--max-reads-per-key)", limiter.Limit())
					e.Headers = map[string]string{"Retry-After": "1"}
					apierror.WriteError(w, e)
					return
				}
				defer release()
			}
			if budget == nil {
				next.ServeHTTP(w, r)
				return
			}
			ctx, end, err := budget.Start(r.Context())
			if err != nil {
				apierror.Write(w, r, err)
				return
			}
			defer end()
			if n := r.ContentLength; n > 0 {
				if err := membudget.Charge(ctx, int(min(n, 1<<40))); err != nil {
					apierror.Write(w, r, err)
					return
				}
			} else if r.Body != nil && r.Body != http.NoBody {
				r.Body = &chargedBody{ReadCloser: r.Body, r: r.WithContext(ctx)}
			}
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
}

// chargedBody charges a body of unknown length to the request's lease as it is read.
type chargedBody struct {
	io.ReadCloser
	r *http.Request
}

func (b *chargedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		if cerr := membudget.Charge(b.r.Context(), n); cerr != nil {
			return n, cerr
		}
	}
	return n, err
}
