package kvcache

// Sliding-window models whose every layer is windowed (Mistral, Phi-3 with a window,
// Ministral with every layer sliding) never read a position again once it is a window behind
// the sequence's end, so the blocks that hold only such positions go back to the pool: a
// sequence holds about window + 2 blocks' worth of positions instead of its whole length. A
// released block's entry in the block table becomes noBlock; the table keeps its length, so
// positions keep their blocks. Models that interleave global layers, which read every
// position (Gemma 2/3, Ministral), keep their sliding layers in a cache of their own
// (Cache.Window), whose sequences drop their blocks the same way.

// noBlock marks a block table entry whose block was released (see dropBefore).
const noBlock int32 = -1

// dropBefore releases the sequence's blocks that hold only positions before pos. Truncating
// the sequence afterwards to a length whose window would reach a released position is not
// supported: Advance drops one block later than the window allows, so a truncation by up to
// a block's worth of positions (speculative decoding's rejected tokens) stays safe.
func (s *Sequence) dropBefore(pos int) {
	c := s.c
	end := min(pos/c.blockSize, len(s.blocks))
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := 0; i < end; i++ {
		if b := s.blocks[i]; b != noBlock {
			c.release(b)
			s.blocks[i] = noBlock
		}
	}
}

// HeldBlocks is how many blocks the sequence holds (released ones not counted).
func (s *Sequence) HeldBlocks() int {
	n := 0
	for _, b := range s.blocks {
		if b != noBlock {
			n++
		}
	}
	return n
}

// releaseBehindWindow drops the blocks of the sequence that no layer will read again (see
// above); Advance runs it once a step's positions are stored.
func (s *Sequence) releaseBehindWindow() {
	switch {
	case s.c.windowed:
	case s.swa != nil:
		// A model mixing global and sliding layers: the sliding layers' cache only.
		s = s.swa
	default:
		return
	}
	// The next query sits at s.n and reads from s.n - window + 1; a margin of
	// WindowRollback positions (at least a block) keeps truncations by that much safe.
	s.dropBefore(s.n - s.c.window + 1 - max(s.c.blockSize, WindowRollback))
}

// WindowRollback is how many positions a sequence of a model whose every layer is windowed
// may be truncated back by (speculative decoding removes its rejected proposals): the blocks
// behind the window are kept that much longer.
const WindowRollback = 64
