package httpx

import (
	"net/http"

	"github.com/honeai/hone/internal/apierror"
	"github.com/honeai/hone/internal/auth"
	"github.com/honeai/hone/internal/fault"
)

// AuthenticateAny is Authenticate for a route that takes the key in a header of its own
// (keyHeader, e.g. wandb-api-key) as well as in Authorization with Basic or Bearer
// (auth.Keys.AuthenticateAny); a 401 challenges Basic.
func AuthenticateAny(keys *auth.Keys, keyHeader string, limiter *KeyLimiter) Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p, err := keys.AuthenticateAny(r.Context(), r.Header.Get(keyHeader), r.Header.Get("Authorization"))
			if err != nil {
				if fault.Is(err, fault.KindUnauthenticated) {
					w.Header().Set("WWW-Authenticate", auth.Basic.Challenge())
				}
				apierror.Write(w, r, err)
				return
			}
			if ri := Info(r.Context()); ri != nil {
				ri.setPrincipal(p)
			}
			if limiter != nil {
				release, ok := limiter.Acquire(p.KeyID)
				if !ok {
					e := apierror.TooManyRequests("Concurrency limit reached for requests: at most %d concurrent requests per API key", limiter.Limit())
					e.Headers = map[string]string{"Retry-After": "1"}
					apierror.WriteError(w, e)
					return
				}
				defer release()
			}
			next.ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), p)))
		})
	}
}
