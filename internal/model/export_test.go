package model

// ForceBF16Arithmetic makes passes of at least BF16MinRows rows use bf16 arithmetic on any
// CPU (tests).
func ForceBF16Arithmetic(m *Model) { m.bf16Always = true }
