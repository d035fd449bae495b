package serving

// SpecialTokens are the template variables a chat template gets from the tokenizer: its
// special tokens by name, bos_token and eos_token among them.
func (s *Served) SpecialTokens() map[string]string {
	cfg := s.Tok.Config()
	special := map[string]string{}
	for k, v := range cfg.SpecialTokens {
		special[k] = v
	}
	if cfg.BOSToken != "" {
		special["bos_token"] = cfg.BOSToken
	}
	if cfg.EOSToken != "" {
		special["eos_token"] = cfg.EOSToken
	}
	return special
}
