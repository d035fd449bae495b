package main

import (
	"github.com/honeai/hone/internal/inference"
)

// specFlag is --speculative-config: vLLM's JSON form, {"method": "ngram",
// "num_speculative_tokens": K, "prompt_lookup_max": N, "prompt_lookup_min": M}, read when
// the flag is parsed (a bad value is a usage error naming the field).
type specFlag struct {
	raw  string
	spec *inference.Speculative
}

func (f *specFlag) String() string { return f.raw }

func (f *specFlag) Set(v string) error {
	if v == "" {
		f.raw, f.spec = "", nil
		return nil
	}
	s, err := inference.ParseSpeculative([]byte(v))
	if err != nil {
		return err
	}
	f.raw, f.spec = v, s
	return nil
}
