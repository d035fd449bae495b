package chatapi

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/honeai/hone/internal/inference"
)

// parseSpeculative reads the request's `speculative` extension: an object with the fields
// of vLLM's --speculative-config ({"method": "ngram", "num_speculative_tokens": K,
// "prompt_lookup_max": N, "prompt_lookup_min": M}) turns prompt-lookup speculation on for
// the request (over the server's --speculative-config), false turns the server's off, null
// or absent leaves the server's. Errors name the field (`speculative.num_speculative_tokens`).
func parseSpeculative(raw json.RawMessage) (spec *inference.Speculative, off bool, err error) {
	raw = bytes.TrimSpace(raw)
	switch string(raw) {
	case "", "null":
		return nil, false, nil
	case "false":
		return nil, true, nil
	}
	if len(raw) == 0 || raw[0] != '{' {
		return nil, false, bad("speculative", `speculative must be an object such as {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2}, or false to turn the server's speculation off for this request`)
	}
	spec, err = inference.ParseSpeculative(raw)
	var se *inference.SpecError
	if errors.As(err, &se) {
		param := "speculative"
		if se.Field != "" {
			param += "." + se.Field
		}
		return nil, false, bad(param, "%s: %s", param, se.Msg)
	}
	return spec, false, err
}

// SpecUsage reports a completion's speculative decoding (a Hone extension of usage, with
// the counters of vLLM's spec-decode metrics): speculative steps, tokens proposed, and
// proposed tokens accepted.
type SpecUsage struct {
	NumDrafts         int64 `json:"num_drafts"`
	NumDraftTokens    int64 `json:"num_draft_tokens"`
	NumAcceptedTokens int64 `json:"num_accepted_tokens"`
}

func specUsage(s inference.SpecStats) *SpecUsage {
	if s.Drafts == 0 {
		return nil
	}
	return &SpecUsage{NumDrafts: s.Drafts, NumDraftTokens: s.DraftTokens, NumAcceptedTokens: s.AcceptedTokens}
}
