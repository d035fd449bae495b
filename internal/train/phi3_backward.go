package train

// fusedBackward accumulates the gradients of a fused adapter module (Phi-3's qkv_proj or
// gate_up_proj): y = [outs...] = x·Wᵀ + s·(drop(x)·Aᵀ)·Bᵀ with the output split by columns
// into parts whose gradients are dys (T × each part's width; the base weights' share of dx
// is added by linearBackward on each part). When dx is not nil it adds the adapter's path to
// it. Nothing happens when the adapter does not have the module.
func (e *Trainer) fusedBackward(ac *acts, module string, x, dx []float32, dys ...[]float32) {
	if ac.lora != e.A {
		return
	}
	p := e.A.Layers[ac.layer][module]
	if p == nil {
		return
	}
	T := ac.T
	in, out := p.In, p.Out
	// dy of the fused output, the parts side by side.
	dy := ac.ar.raw(T * out)
	c := 0
	for _, d := range dys {
		w := len(d) / T
		for r := 0; r < T; r++ {
			copy(dy[r*out+c:r*out+c+w], d[r*w:(r+1)*w])
		}
		c += w
	}
	e.adapterBackward(ac, module, p, in, out, x, dy, dx)
}

// ropeContexts is, for each row of the pass, the length of its segment (the sequence a
// packed row belongs to), which picks the rotary table under LongRoPE; nil when the model's
// RoPE does not depend on it.
func (e *Trainer) ropeContexts(ac *acts) []int {
	if !e.M.NeedsRopeContext() {
		return nil
	}
	T := ac.T
	ctx := make([]int, T)
	end := T
	for r := T - 1; r >= 0; r-- {
		ctx[r] = end - ac.seg[r]
		if ac.seg[r] == r {
			end = r
		}
	}
	return ctx
}
